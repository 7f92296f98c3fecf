#!/usr/bin/env bash
# run.sh: the `make bench` harness. Compares Loopgate with nginx and haproxy
# as keep-alive reverse proxies in front of one backend and prints a Markdown
# table of medians (also written to bench/out/latest.md). See bench/README.md.
#
# Environment:
#   BENCH_DURATION  seconds of each measured wrk run (default 10)
#   BENCH_ROUNDS    interleaved rounds over all proxies (default 3)
#   BENCH_ONLY      space-separated subset of: direct nginx haproxy loopgate
#                   loopgate-metrics loopgate-accesslog loopgate-chain
#                   loopgate-ratelimit loopgate-cluster loopgate-resilience
#                   loopgate-json loopgate-respbody loopgate-trace
#   LOOPGATE_BIN    gateway binary (default bin/loopgate, built by `make build`)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

DURATION=${BENCH_DURATION:-10}
ROUNDS=${BENCH_ROUNDS:-3}
WARMUP=2
CONNS=64
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
OUT=$ROOT/bench/out
RAW=$OUT/raw
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || { log "BENCH_DURATION must be whole seconds, got '$DURATION'"; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { log "BENCH_ROUNDS must be a positive integer, got '$ROUNDS'"; exit 2; }

declare -A LABEL=(
	[direct]="direct (no proxy)"
	[nginx]="nginx"
	[haproxy]="haproxy"
	[loopgate]="loopgate (plain)"
	[loopgate-metrics]="loopgate (metrics on)"
	[loopgate-accesslog]="loopgate (access log)"
	[loopgate-chain]="loopgate (default chain)"
	[loopgate-ratelimit]="loopgate (local rate limit, ip)"
	[loopgate-cluster]="loopgate (cluster rate limit, leased)"
	[loopgate-resilience]="loopgate (breaker + isolation)"
	[loopgate-json]="loopgate (plain, 4 KiB JSON)"
	[loopgate-respbody]="loopgate (response_body, 4 KiB JSON)"
	[loopgate-trace]="loopgate (trace context)"
)
# URLPATH is what a row requests when not "/": the JSON rows get the 4 KiB body.
declare -A URLPATH=([loopgate-json]=/json [loopgate-respbody]=/json)
# The Loopgate rows in table order, and the write_loopgate_config setup of each.
LOOPGATE_ROWS=(loopgate loopgate-metrics loopgate-accesslog loopgate-chain loopgate-ratelimit loopgate-cluster loopgate-resilience loopgate-json loopgate-respbody
	loopgate-trace)
declare -A SETUP=([loopgate]=plain [loopgate-metrics]=metrics [loopgate-accesslog]=accesslog [loopgate-chain]=default
	[loopgate-ratelimit]=ratelimit [loopgate-cluster]=cluster [loopgate-resilience]=resilience
	[loopgate-json]=plain [loopgate-respbody]=respbody [loopgate-trace]=trace)
declare -A PORT=() PID=()
TARGETS=()  # keys of the targets that started, in table order
NOTES=()    # lines printed under the table
FAILED=0    # set when a proxy that is installed failed to start or died

# wanted KEY reports whether BENCH_ONLY (if set) selects the target.
wanted() {
	[[ -z ${BENCH_ONLY:-} || " $BENCH_ONLY " == *" $1 "* ]]
}

# add_target KEY PORT PID registers a started, verified target.
add_target() {
	TARGETS+=("$1")
	PORT[$1]=$2
	PID[$1]=$3
}

# start_proxies BACKEND_PORT NGINX_PORT HAPROXY_PORT LOOPGATE_PORTS...
# (one per LOOPGATE_ROWS entry) starts every installed proxy on its own
# port and keeps those that answer the probe. All stay up for the whole
# run; idle ones cost nothing.
start_proxies() {
	local backend=$1 port i
	declare -A proxy_port=([nginx]=$2 [haproxy]=$3)
	shift 3
	for i in "${!LOOPGATE_ROWS[@]}"; do
		proxy_port[${LOOPGATE_ROWS[$i]}]=${@:$((i + 1)):1}
	done

	wanted direct && add_target direct "$backend" ""

	port=${proxy_port[nginx]}
	if ! wanted nginx; then :
	elif command -v nginx >/dev/null 2>&1; then
		write_nginx_proxy_conf "$TMP/nginx-proxy" "$port" "$backend"
		start_nginx nginx-proxy "$TMP/nginx-proxy" "$PROXY_CPU"
		if wait_ready nginx-proxy "$STARTED_PID" "$port"; then
			add_target nginx "$port" "$STARTED_PID"
		else
			NOTES+=("nginx failed to start; row skipped (see log above)")
			FAILED=1
		fi
	else
		NOTES+=("nginx not installed; row skipped")
	fi

	port=${proxy_port[haproxy]}
	if ! wanted haproxy; then :
	elif command -v haproxy >/dev/null 2>&1; then
		write_haproxy_conf "$TMP/haproxy.cfg" "$port" "$backend"
		start_pinned haproxy "$PROXY_CPU" haproxy -db -f "$TMP/haproxy.cfg"
		if wait_ready haproxy "$STARTED_PID" "$port"; then
			add_target haproxy "$port" "$STARTED_PID"
		else
			NOTES+=("haproxy failed to start; row skipped (see log above)")
			FAILED=1
		fi
	else
		NOTES+=("haproxy not installed; row skipped")
	fi

	local key
	for key in "${LOOPGATE_ROWS[@]}"; do
		port=${proxy_port[$key]}
		wanted "$key" || continue
		if [[ $key == loopgate-cluster && -z ${REDIS_PORT:-} ]]; then
			NOTES+=("${LABEL[$key]}: redis-server not installed or not starting; row skipped")
			continue
		fi
		if [[ ! -x $LOOPGATE_BIN ]]; then
			NOTES+=("${LABEL[$key]}: ${LOOPGATE_BIN#"$ROOT"/} missing (run \`make build\`); row skipped")
			continue
		fi
		write_loopgate_config "$TMP/$key.yaml" "$port" "$backend" "${SETUP[$key]}"
		start_loopgate "$key" "$TMP/$key.yaml" "$PROXY_CPU"
		if wait_ready "$key" "$STARTED_PID" "$port"; then
			add_target "$key" "$port" "$STARTED_PID"
		else
			NOTES+=("${LABEL[$key]} failed to start; row skipped (see log above)")
			FAILED=1
		fi
	done
}

# measure ROUND KEY warms the target up, then runs the measured wrk while
# reading the proxy's CPU ticks on both sides, and appends one results line:
# round key requests req/s p50 p99 cpu_us_per_req non2xx connect read write timeout
measure() {
	local round=$1 key=$2 url="http://127.0.0.1:${PORT[$2]}${URLPATH[$2]:-/}" pid=${PID[$2]}
	local raw="$RAW/round$round-$key.txt" before="" after="" cpu=NA
	pinned "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${WARMUP}s" -H "Authorization: Bearer $BENCH_JWT" "$url" >/dev/null 2>&1 || true
	[[ -n $pid ]] && before=$(cpu_ticks "$pid")
	pinned "$LOAD_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" --latency -H "Authorization: Bearer $BENCH_JWT" "$url" >"$raw" 2>&1 ||
		log "wrk exited non-zero for ${LABEL[$key]} (see $raw)"
	[[ -n $pid ]] && after=$(cpu_ticks "$pid")

	local requests rps p50 p99 non2xx sock
	read -r requests rps p50 p99 non2xx sock < <(parse_wrk "$raw")
	# sock holds "connect read write timeout"
	if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
		log "${LABEL[$key]} died during round $round; log tail:"
		tail -n 20 "$TMP/$key.log" >&2 || true
		NOTES+=("${LABEL[$key]} died during round $round")
		FAILED=1
	elif [[ -n $pid ]] && ((after < before)); then
		log "${LABEL[$key]}: CPU ticks went from $before to $after; CPU figure dropped for round $round"
	elif [[ -n $pid && $requests != NA && $requests -gt 0 ]]; then
		cpu=$(awk -v t=$((after - before)) -v hz="$CLK_TCK" -v n="$requests" 'BEGIN { printf "%.3f", t / hz * 1e6 / n }')
	fi
	echo "$round $key $requests $rps $p50 $p99 $cpu $non2xx $sock" >>"$RAW/results.txt"
	log "round $round ${LABEL[$key]}: $rps req/s, p50 $p50 ms, p99 $p99 ms, CPU $cpu µs/req, non-2xx $non2xx, socket errors (connect read write timeout) $sock"
}

# report prints the header line, the table of medians and the notes.
report() {
	local cpu_model key label rps p50 p99 cpu errs n c r w t warnings=()
	cpu_model=$(awk -F': *' '/^model name/ { print $2; exit }' /proc/cpuinfo)
	echo "Loopgate bench, $(date -u '+%Y-%m-%d %H:%M UTC'): kernel $(uname -r), CPU ${cpu_model:-unknown} × $(nproc)," \
		"nginx ${NGINX_VERSION:-absent}, haproxy ${HAPROXY_VERSION:-absent}, wrk $WRK_VERSION."
	echo
	echo "Backend: $BACKEND_KIND. Load: \`wrk -t1 -c$CONNS -d${DURATION}s\` after a ${WARMUP} s warm-up;" \
		"$PINNING. Median of $ROUNDS interleaved rounds." \
		"Load average (1 min): $LOAD_START at start, $(load_average) at end."
	echo
	echo "| proxy | req/s | p50 ms | p99 ms | CPU µs/req |"
	echo "|---|---:|---:|---:|---:|"
	declare -gA MEDIAN_CPU=() MEDIAN_P99=() MEDIAN_RPS=() HAS_ERRORS=()
	for key in "${TARGETS[@]}"; do
		label=${LABEL[$key]}
		rps=$(column "$key" 4 | median)
		p50=$(column "$key" 5 | median)
		p99=$(column "$key" 6 | median)
		cpu=$(column "$key" 7 | median)
		MEDIAN_CPU[$key]=$cpu
		MEDIAN_P99[$key]=$p99
		MEDIAN_RPS[$key]=$rps
		errs=$(awk -v k="$key" '$2 == k { n += $8; c += $9; r += $10; w += $11; t += $12 }
			END { printf "%d %d %d %d %d", n, c, r, w, t }' "$RAW/results.txt")
		if [[ $errs != "0 0 0 0 0" ]]; then
			label="$label ⚠"
			HAS_ERRORS[$key]=1
			read -r n c r w t <<<"$errs"
			warnings+=("⚠ ${LABEL[$key]}: over $ROUNDS rounds wrk saw $n non-2xx/3xx responses and socket errors: connect $c, read $r, write $w, timeout $t (no response within 2 s); its figures are not comparable (raw output in bench/out/raw/).")
		fi
		printf '| %s | %s | %s | %s | %s |\n' "$label" "$(fmt %.0f "$rps")" "$(fmt %.2f "$p50")" \
			"$(fmt %.2f "$p99")" "$(fmt %.1f "$cpu")"
	done
	echo
	local line
	for line in "${warnings[@]}"; do
		echo "- $line"
	done
	relative_to_nginx
	relative_to_plain
	for line in "${NOTES[@]}"; do
		echo "- $line"
	done
}

# relative_to_nginx prints Loopgate's CPU per request and p99 against nginx's,
# next to the targets from DESIGN.md section 4.
relative_to_nginx() {
	local key limit base=${MEDIAN_CPU[nginx]:-NA} base99=${MEDIAN_P99[nginx]:-NA}
	[[ $base != NA ]] || return 0
	for key in loopgate loopgate-chain; do
		[[ ${MEDIAN_CPU[$key]:-NA} != NA ]] || continue
		if [[ -n ${HAS_ERRORS[$key]:-}${HAS_ERRORS[nginx]:-} ]]; then
			echo "- ${LABEL[$key]}: not compared with nginx, because wrk saw errors."
			continue
		fi
		limit=1.0
		[[ $key == loopgate-chain ]] && limit=1.2
		awk -v l="${LABEL[$key]}" -v c="${MEDIAN_CPU[$key]}" -v b="$base" -v lim="$limit" \
			-v p="${MEDIAN_P99[$key]}" -v bp="$base99" 'BEGIN {
				r = c / b
				printf "- %s: CPU/req %.2f× nginx (target ≤ %.1f×: %s)", l, r, lim, (r <= lim ? "met" : "missed")
				if (p != "NA" && bp != "NA") printf ", p99 %.2f× nginx (target ≤ 1.0×: %s)", p / bp, (p <= bp ? "met" : "missed")
				printf ".\n"
			}'
	done
}

# relative_to_plain prints what metrics and the access log cost per request
# over the plain row, next to the targets of Loopgate issues 7 and 8
# (metrics on ≤ 3 %, access log ≤ 10 %, a local rate limit ≤ 5 %; the
# cluster limit's target is throughput within 1.5× of the local row's).
relative_to_plain() {
	local key limit base=${MEDIAN_CPU[loopgate]:-NA}
	[[ $base != NA && -z ${HAS_ERRORS[loopgate]:-} ]] || return 0
	for key in loopgate-metrics loopgate-accesslog loopgate-ratelimit loopgate-resilience; do
		[[ ${MEDIAN_CPU[$key]:-NA} != NA && -z ${HAS_ERRORS[$key]:-} ]] || continue
		case $key in
		loopgate-metrics | loopgate-resilience) limit=3 ;;
		loopgate-ratelimit) limit=5 ;;
		*) limit=10 ;;
		esac
		awk -v l="${LABEL[$key]}" -v c="${MEDIAN_CPU[$key]}" -v b="$base" -v lim="$limit" 'BEGIN {
			d = (c / b - 1) * 100
			printf "- %s: CPU/req %+.1f %% over loopgate (plain) (target ≤ %d %%: %s).\n", l, d, lim, (d <= lim ? "met" : "missed")
		}'
	done
	local jcpu=${MEDIAN_CPU[loopgate-json]:-NA} rcpu=${MEDIAN_CPU[loopgate-respbody]:-NA}
	if [[ $jcpu != NA && $rcpu != NA && -z ${HAS_ERRORS[loopgate-json]:-}${HAS_ERRORS[loopgate-respbody]:-} ]]; then
		awk -v j="$jcpu" -v r="$rcpu" 'BEGIN {
			printf "- loopgate (response_body, 4 KiB JSON): CPU/req %+.1f %% over loopgate (plain, 4 KiB JSON).\n", (r / j - 1) * 100
		}'
	fi
	local lrps=${MEDIAN_RPS[loopgate-ratelimit]:-NA} crps=${MEDIAN_RPS[loopgate-cluster]:-NA}
	if [[ $lrps != NA && $crps != NA && -z ${HAS_ERRORS[loopgate-cluster]:-}${HAS_ERRORS[loopgate-ratelimit]:-} ]]; then
		awk -v l="$lrps" -v c="$crps" 'BEGIN {
			r = l / c
			printf "- loopgate (cluster rate limit, leased): throughput 1/%.2f of the local limit row'"'"'s (target within 1.5×: %s).\n", r, (r <= 1.5 ? "met" : "missed")
		}'
	fi
}

main() {
	ensure_wrk
	setup_pinning
	CLK_TCK=$(getconf CLK_TCK)
	NGINX_VERSION=$(nginx_version)
	HAPROXY_VERSION=$(haproxy_version)
	WRK_VERSION=$(wrk_version)
	LOAD_START=$(load_average)
	log "building bench tools"
	build_tools
	rm -rf "$RAW"
	mkdir -p "$RAW"
	: >"$RAW/results.txt"

	local ports
	mapfile -t ports < <(free_ports $((4 + ${#LOOPGATE_ROWS[@]})))
	REDIS_PORT=""
	if wanted loopgate-cluster && start_redis "${ports[-1]}"; then
		REDIS_PORT=${ports[-1]}
		log "redis-server on port $REDIS_PORT"
	fi
	unset 'ports[-1]'
	start_backend "${ports[0]}"
	log "backend: $BACKEND_KIND on port ${ports[0]}"
	start_proxies "${ports[@]}"
	((${#TARGETS[@]} > 0)) || { log "nothing to benchmark"; exit 1; }

	local total=$((ROUNDS * ${#TARGETS[@]} * (WARMUP + DURATION)))
	log "targets: ${TARGETS[*]}; about $total s of load; $PINNING"
	local round i n=${#TARGETS[@]}
	for round in $(seq "$ROUNDS"); do
		# Rotate the starting target each round so no proxy always runs
		# first (or last) on a machine whose load drifts.
		for i in $(seq 0 $((n - 1))); do
			measure "$round" "${TARGETS[$(((i + round - 1) % n))]}"
		done
	done

	report | tee "$OUT/latest.md"
	log "report written to bench/out/latest.md; raw wrk output in bench/out/raw/"
	return "$FAILED"
}

main "$@"
