#!/usr/bin/env bash
# churn.sh: the connection-churn scenarios of `make bench`. Two workloads
# where a proxy opens upstream connections all the time, or could:
#
#   c1000  wrk -c1000 keep-alive clients, every proxy with its default
#          upstream pool settings (see bench/README.md for what "default"
#          means for each)
#   close  wrk -c64 through a backend that closes every connection after
#          one response (nginx keepalive_requests 1): a dial per request
#
# Both run against nginx and haproxy in the same run, interleaved in rounds,
# and print one Markdown table of medians (also bench/out/churn.md).
#
# Environment: BENCH_DURATION, BENCH_ROUNDS and LOOPGATE_BIN as for run.sh;
# CHURN_SCENARIOS (default "c1000 close") runs a subset.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

DURATION=${BENCH_DURATION:-10}
ROUNDS=${BENCH_ROUNDS:-3}
WARMUP=2
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
OUT=$ROOT/bench/out
RAW=$OUT/raw-churn
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || { log "BENCH_DURATION must be whole seconds, got '$DURATION'"; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { log "BENCH_ROUNDS must be a positive integer, got '$ROUNDS'"; exit 2; }
[[ -x $LOOPGATE_BIN ]] || { log "${LOOPGATE_BIN#"$ROOT"/} missing (run \`make build\`)"; exit 1; }
command -v nginx >/dev/null 2>&1 || { log "the churn scenarios need nginx (backend and baseline)"; exit 1; }

read -r -a SCENARIOS <<<"${CHURN_SCENARIOS:-c1000 close}"
PROXIES=(nginx haproxy loopgate)
declare -A CONNS=([c1000]=1000 [close]=64)
declare -A TITLE=(
	[c1000]="-c1000 keep-alive clients, default pool settings"
	[close]="-c64, backend closes every connection after one response"
)
declare -A PORT=() PID=()
TARGETS=() # scenario-proxy keys that started, in table order
NOTES=()
FAILED=0

# start_backend_for SCENARIO PORT starts the scenario's nginx backend on
# LOAD_CPU: keep-alive unlimited, or one request per connection for close.
start_backend_for() {
	local scen=$1 port=$2 dir=$TMP/backend-$1
	write_nginx_backend_conf "$dir" "$port"
	if [[ $scen == close ]]; then
		sed -i 's/keepalive_requests 10000000;/keepalive_requests 1;/' "$dir/nginx.conf"
	fi
	start_nginx "backend-$scen" "$dir" "$LOAD_CPU"
	wait_ready "backend-$scen" "$STARTED_PID" "$port" || { log "backend for $scen failed"; exit 1; }
}

# start_proxy SCENARIO PROXY PORT BACKEND_PORT starts one proxy for a
# scenario. The close scenario uses the same proxy configs as run.sh's
# -c64 rows. c1000 drops the pool sizes those rows set, leaving each
# proxy's default: Loopgate's max_idle (= max_conns), haproxy's unlimited
# server connections; nginx has no upstream keep-alive at all without the
# keepalive directive, so its row keeps run.sh's, the usual 128.
start_proxy() {
	local scen=$1 proxy=$2 port=$3 backend=$4 key=$1-$2
	case $proxy in
	nginx)
		write_nginx_proxy_conf "$TMP/$key" "$port" "$backend"
		start_nginx "$key" "$TMP/$key" "$PROXY_CPU"
		;;
	haproxy)
		command -v haproxy >/dev/null 2>&1 || { NOTES+=("haproxy not installed; rows skipped"); return 0; }
		write_haproxy_conf "$TMP/$key.cfg" "$port" "$backend"
		[[ $scen == c1000 ]] && sed -i 's/ maxconn 64$//' "$TMP/$key.cfg"
		start_pinned "$key" "$PROXY_CPU" haproxy -db -f "$TMP/$key.cfg"
		;;
	loopgate)
		write_loopgate_config "$TMP/$key.yaml" "$port" "$backend" plain
		[[ $scen == c1000 ]] && sed -i '/^    max_idle: /d' "$TMP/$key.yaml"
		start_loopgate "$key" "$TMP/$key.yaml" "$PROXY_CPU"
		;;
	esac
	if wait_ready "$key" "$STARTED_PID" "$port"; then
		TARGETS+=("$key")
		PORT[$key]=$port
		PID[$key]=$STARTED_PID
	else
		NOTES+=("$proxy failed to start for $scen; row skipped (see log above)")
		FAILED=1
	fi
}

# measure ROUND KEY: a warm-up, then the measured wrk with the proxy's CPU
# ticks read on both sides; appends one line to results.txt as run.sh does.
measure() {
	local round=$1 key=$2 url="http://127.0.0.1:${PORT[$2]}/" pid=${PID[$2]}
	local conns=${CONNS[${key%%-*}]} raw="$RAW/round$1-$2.txt" before after cpu=NA
	pinned "$LOAD_CPU" wrk -t1 -c"$conns" -d"${WARMUP}s" "$url" >/dev/null 2>&1 || true
	before=$(cpu_ticks "$pid")
	pinned "$LOAD_CPU" wrk -t1 -c"$conns" -d"${DURATION}s" --latency "$url" >"$raw" 2>&1 ||
		log "wrk exited non-zero for $key (see $raw)"
	after=$(cpu_ticks "$pid")
	local requests rps p50 p99 non2xx sock
	read -r requests rps p50 p99 non2xx sock < <(parse_wrk "$raw")
	if ! kill -0 "$pid" 2>/dev/null; then
		NOTES+=("$key died during round $round")
		FAILED=1
	elif ((after >= before)) && [[ $requests != NA && $requests -gt 0 ]]; then
		cpu=$(awk -v t=$((after - before)) -v hz="$CLK_TCK" -v n="$requests" 'BEGIN { printf "%.3f", t / hz * 1e6 / n }')
	fi
	echo "$round $key $requests $rps $p50 $p99 $cpu $non2xx $sock" >>"$RAW/results.txt"
	log "round $round $key: $rps req/s, p50 $p50 ms, p99 $p99 ms, CPU $cpu µs/req, non-2xx $non2xx, socket errors $sock"
}

report() {
	local scen proxy key rps p50 p99 cpu errs
	declare -A MCPU=() MP99=() ERR=()
	echo "Loopgate churn bench, $(date -u '+%Y-%m-%d %H:%M UTC'): kernel $(uname -r) × $(nproc) CPUs," \
		"nginx $(nginx_version), haproxy $(haproxy_version), wrk $(wrk_version); $PINNING." \
		"\`wrk -t1 -d${DURATION}s\` after a ${WARMUP} s warm-up; median of $ROUNDS interleaved rounds." \
		"Load average (1 min): $LOAD_START at start, $(load_average) at end."
	echo
	echo "| scenario | proxy | req/s | p50 ms | p99 ms | CPU µs/req |"
	echo "|---|---|---:|---:|---:|---:|"
	for key in "${TARGETS[@]}"; do
		scen=${key%%-*}
		proxy=${key#*-}
		rps=$(column "$key" 4 | median)
		p50=$(column "$key" 5 | median)
		p99=$(column "$key" 6 | median)
		cpu=$(column "$key" 7 | median)
		MCPU[$key]=$cpu
		MP99[$key]=$p99
		errs=$(awk -v k="$key" '$2 == k { n += $8 + $9 + $10 + $11 + $12 } END { print n + 0 }' "$RAW/results.txt")
		[[ $errs == 0 ]] || { ERR[$key]=1; proxy="$proxy ⚠ ($errs errors)"; }
		printf '| %s | %s | %s | %s | %s | %s |\n' "${TITLE[$scen]}" "$proxy" "$(fmt %.0f "$rps")" \
			"$(fmt %.2f "$p50")" "$(fmt %.2f "$p99")" "$(fmt %.1f "$cpu")"
	done
	echo
	for scen in "${SCENARIOS[@]}"; do
		local lg=$scen-loopgate ng=$scen-nginx
		[[ ${MCPU[$lg]:-NA} != NA && ${MCPU[$ng]:-NA} != NA ]] || continue
		if [[ -n ${ERR[$lg]:-}${ERR[$ng]:-} ]]; then
			echo "- $scen: not compared with nginx, because wrk saw errors."
			continue
		fi
		awk -v s="$scen" -v c="${MCPU[$lg]}" -v b="${MCPU[$ng]}" -v p="${MP99[$lg]}" -v bp="${MP99[$ng]}" 'BEGIN {
			printf "- %s: loopgate CPU/req %.2f× nginx (target ≤ 1.0×: %s), p99 %.2f× nginx (target ≤ 1.0×: %s).\n",
				s, c / b, (c <= b ? "met" : "missed"), p / bp, (p <= bp ? "met" : "missed")
		}'
	done
	local line
	for line in "${NOTES[@]}"; do
		echo "- $line"
	done
}

main() {
	ensure_wrk
	setup_pinning
	CLK_TCK=$(getconf CLK_TCK)
	LOAD_START=$(load_average)
	build_tools
	rm -rf "$RAW"
	mkdir -p "$RAW"
	: >"$RAW/results.txt"

	local ports scen proxy i=0
	mapfile -t ports < <(free_ports 8)
	for scen in "${SCENARIOS[@]}"; do
		local backend=${ports[$i]}
		start_backend_for "$scen" "$backend"
		i=$((i + 1))
		for proxy in "${PROXIES[@]}"; do
			start_proxy "$scen" "$proxy" "${ports[$i]}" "$backend"
			i=$((i + 1))
		done
	done
	log "targets: ${TARGETS[*]}; $PINNING"
	local round n=${#TARGETS[@]}
	for round in $(seq "$ROUNDS"); do
		for i in $(seq 0 $((n - 1))); do
			measure "$round" "${TARGETS[$(((i + round - 1) % n))]}"
		done
	done
	report | tee "$OUT/churn.md"
	log "report written to bench/out/churn.md; raw wrk output in ${RAW#"$ROOT"/}/"
	return "$FAILED"
}

main "$@"
