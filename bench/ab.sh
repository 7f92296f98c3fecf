#!/usr/bin/env bash
# ab.sh: the `make bench-ab BASE=<rev>` harness. Builds Loopgate at BASE in a
# temporary git worktree and measures it against the current build
# (bin/loopgate) and nginx, interleaved, on four rows: plain, default chain,
# a backend closing every connection, and plain at 1000 connections.
# Prints, per row, the CPU each build spends per request and wrk's p99,
# and current ÷ base and current ÷ nginx of both as medians of per-round
# ratios with their spread (also bench/out/ab.md).
# See bench/README.md.
#
# Environment:
#   BASE            git revision to compare with (required): a tag, a commit
#   ROUNDS          interleaved rounds (default 5)
#   BENCH_DURATION  seconds of each measured wrk run (default 6)
#   AB_ROWS         space-separated subset of: plain chain close c1000
#   AB_DASHBOARD    1: the current build also serves its admin port, polled
#                   once a second as the dashboard polls it (GET /summary,
#                   /config/versions, /errors) while it is measured; with
#                   BASE=HEAD, current ÷ base is what an open dashboard costs
#   LOOPGATE_BIN    the current gateway binary (default bin/loopgate)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

BASE=${BASE:-}
ROUNDS=${ROUNDS:-5}
DURATION=${BENCH_DURATION:-6}
WARMUP=2
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
OUT=$ROOT/bench/out
RAW=$OUT/raw-ab
read -r -a ROWS <<<"${AB_ROWS:-plain chain close c1000}"
[[ -n $BASE ]] || { log "BASE must name a git revision (make bench-ab BASE=v0.1)"; exit 2; }
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || { log "BENCH_DURATION must be whole seconds, got '$DURATION'"; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { log "ROUNDS must be a positive integer, got '$ROUNDS'"; exit 2; }
[[ -x $LOOPGATE_BIN ]] || { log "${LOOPGATE_BIN#"$ROOT"/} missing (run \`make build\`)"; exit 1; }
command -v nginx >/dev/null 2>&1 || { log "bench-ab needs nginx (backend and baseline)"; exit 1; }

declare -A TITLE=(
	[plain]="plain (no filters, metrics off)"
	[chain]="default chain"
	[close]="backend closes every connection"
	[c1000]="plain, -c1000"
)
declare -A SETUP=([plain]=plain [chain]=default [close]=plain [c1000]=plain)
# wrk's connections per row: c1000 holds 1000 keep-alive clients, with
# Loopgate's upstream pool at its default (no max_idle: max_conns) as in
# bench/churn.sh; nginx keeps its keepalive 128.
declare -A CONNS=([plain]=64 [chain]=64 [close]=64 [c1000]=1000)
WHO=(base current nginx)
declare -A PORT=() PID=() ADMIN=()
NOTES=()
FAILED=0

# write_config WHO FILE PORT BACKEND SETUP writes the row's Loopgate config.
# The base build gets the config its own bench/lib.sh wrote for the setup,
# so a schema that changed since (a key it does not know) cannot stop it;
# when that writer is missing or refuses the setup, the current one is used.
write_config() {
	local who=$1 file=$2 port=$3 backend=$4 setup=$5
	if [[ $who == base && -f $TMP/base-lib.sh ]] &&
		(source "$TMP/base-lib.sh" && declare -F write_loopgate_config >/dev/null &&
			write_loopgate_config "$file" "$port" "$backend" "$setup") 2>/dev/null; then
		return 0
	fi
	write_loopgate_config "$file" "$port" "$backend" "$setup"
}

# start_target ROW WHO PORT BACKEND starts one proxy of a row and checks it.
start_target() {
	local row=$1 who=$2 port=$3 backend=$4 key=$1-$2
	case $who in
	nginx)
		write_nginx_proxy_conf "$TMP/$key" "$port" "$backend"
		start_nginx "$key" "$TMP/$key" "$PROXY_CPU"
		;;
	base | current)
		local bin=$LOOPGATE_BIN
		[[ $who == base ]] && bin=$TMP/bin/loopgate-base
		write_config "$who" "$TMP/$key.yaml" "$port" "$backend" "${SETUP[$row]}"
		[[ $row == c1000 ]] && sed -i '/^    max_idle: /d' "$TMP/$key.yaml"
		if [[ $who == current && ${AB_DASHBOARD:-0} == 1 ]]; then
			ADMIN[$key]=$(free_ports 1)
			sed -i "s/^admin: \"off\"$/admin: 127.0.0.1:${ADMIN[$key]}/" "$TMP/$key.yaml"
		fi
		start_pinned "$key" "$PROXY_CPU" "$bin" -config "$TMP/$key.yaml" -loops 1
		;;
	esac
	if wait_ready "$key" "$STARTED_PID" "$port"; then
		PORT[$key]=$port
		PID[$key]=$STARTED_PID
	else
		NOTES+=("$key failed to start (see log above); its ratios are missing")
		FAILED=1
	fi
}

# user_sys_ticks PID prints utime and stime in clock ticks of PID and its
# descendants (nginx's worker).
user_sys_ticks() {
	local u=0 s=0 pid line fields
	for pid in $(process_tree "$1"); do
		{ read -r line <"/proc/$pid/stat"; } 2>/dev/null || continue
		line=${line##*) }
		read -r -a fields <<<"$line"
		u=$((u + fields[11]))
		s=$((s + fields[12]))
	done
	echo "$u $s"
}

# measure ROUND KEY: a warm-up, then the measured wrk with the proxy's CPU
# read on both sides. One results line:
# round row who requests cpu_us_per_req user_us sys_us errors p99_ms
measure() {
	local round=$1 key=$2 row=${2%%-*} who=${2#*-}
	[[ -n ${PID[$key]:-} ]] || return 0
	local url="http://127.0.0.1:${PORT[$key]}/" pid=${PID[$key]} raw="$RAW/round$1-$2.txt"
	local u1 s1 u2 s2 cpu=NA user=NA sys=NA conns=${CONNS[$row]}
	pinned "$LOAD_CPU" wrk -t1 -c"$conns" -d"${WARMUP}s" -H "Authorization: Bearer $BENCH_JWT" "$url" >/dev/null 2>&1 || true
	local poller=
	[[ -n ${ADMIN[$key]:-} ]] && { poll_dashboard "${ADMIN[$key]}" & poller=$!; }
	read -r u1 s1 < <(user_sys_ticks "$pid")
	pinned "$LOAD_CPU" wrk -t1 -c"$conns" -d"${DURATION}s" --latency -H "Authorization: Bearer $BENCH_JWT" "$url" >"$raw" 2>&1 ||
		log "wrk exited non-zero for $key (see $raw)"
	read -r u2 s2 < <(user_sys_ticks "$pid")
	[[ -n $poller ]] && { kill "$poller" 2>/dev/null; wait "$poller" 2>/dev/null || true; }
	local requests rps p50 p99 non2xx c r w t
	read -r requests rps p50 p99 non2xx c r w t < <(parse_wrk "$raw")
	if ! kill -0 "$pid" 2>/dev/null; then
		NOTES+=("$key died during round $round")
		FAILED=1
	elif [[ $requests != NA && $requests -gt 0 ]]; then
		read -r cpu user sys < <(awk -v u=$((u2 - u1)) -v s=$((s2 - s1)) -v hz="$CLK_TCK" -v n="$requests" \
			'BEGIN { printf "%.3f %.3f %.3f\n", (u + s) / hz * 1e6 / n, u / hz * 1e6 / n, s / hz * 1e6 / n }')
	fi
	local errs=$((non2xx + c + r + w + t))
	echo "$round $row $who $requests $cpu $user $sys $errs $p99" >>"$RAW/results.txt"
	log "round $round $key: $rps req/s, CPU $cpu µs/req (user $user, sys $sys), p99 $p99 ms, errors $errs"
}

# poll_dashboard PORT asks the admin port what the dashboard asks, once a
# second, until killed; a failed poll is reported once.
poll_dashboard() {
	local base=http://127.0.0.1:$1 warned=0 p
	while :; do
		for p in summary config/versions errors; do
			if ! pinned "$LOAD_CPU" curl -fsS -o /dev/null "$base/$p" 2>/dev/null && ((warned == 0)); then
				log "dashboard poll of /$p failed"
				warned=1
			fi
		done
		sleep 1
	done
}

# stats reads numbers (one per line, NA ignored) and prints "median min max".
stats() {
	{ grep -v '^NA$' || true; } | sort -g | awk '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print "NA NA NA"; exit }
			m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
			print m, v[1], v[NR]
		}'
}

# figure ROW WHO FIELD prints that field of every round for one target.
figure() {
	awk -v row="$1" -v who="$2" -v f="$3" '$2 == row && $3 == who { print $f }' "$RAW/results.txt"
}

# ratios ROW A B FIELD prints A's figure in FIELD (5: CPU/req, 9: p99)
# over B's, one per round in which both were measured: a ratio within a
# round cancels most of the machine's drift.
ratios() {
	awk -v row="$1" -v a="$2" -v b="$3" -v f="$4" '
		$2 == row && $f != "NA" && $f > 0 && $8 == 0 { v[$1, $3] = $f; seen[$1] = 1 }
		END { for (r in seen) if ((r, a) in v && (r, b) in v) printf "%.4f\n", v[r, a] / v[r, b] }
	' "$RAW/results.txt"
}

report() {
	local row who m lo hi u s line errs
	echo "Loopgate A/B bench, $(date -u '+%Y-%m-%d %H:%M UTC'): current ${LOOPGATE_BIN#"$ROOT"/} (tree at $(git describe --always --dirty 2>/dev/null))" \
		"against base $BASE_NAME and nginx $(nginx_version); kernel $(uname -r) × $(nproc) CPUs; $PINNING." \
		"\`wrk -t1 -c64 -d${DURATION}s --latency\` (-c1000 on the c1000 row) after a ${WARMUP} s warm-up; $ROUNDS interleaved rounds." \
		"Load average (1 min): $LOAD_START at start, $(load_average) at end."
	echo
	echo "| row | proxy | CPU µs/req (median, min–max) | user µs/req | sys µs/req | p99 ms (median, min–max) |"
	echo "|---|---|---:|---:|---:|---:|"
	for row in "${ROWS[@]}"; do
		for who in "${WHO[@]}"; do
			read -r m lo hi < <(figure "$row" "$who" 5 | stats)
			[[ $m != NA ]] || continue
			read -r u _ _ < <(figure "$row" "$who" 6 | stats)
			read -r s _ _ < <(figure "$row" "$who" 7 | stats)
			local p pl ph
			read -r p pl ph < <(figure "$row" "$who" 9 | stats)
			errs=$(figure "$row" "$who" 8 | awk '{ n += $1 } END { print n + 0 }')
			local name=$who
			[[ $who == base ]] && name="base $BASE"
			((errs == 0)) || name="$name ⚠ ($errs errors)"
			local p99cell="—"
			[[ $p == NA ]] || p99cell=$(printf '%.2f (%.2f–%.2f)' "$p" "$pl" "$ph")
			printf '| %s | %s | %.2f (%.2f–%.2f) | %.2f | %.2f | %s |\n' "${TITLE[$row]}" "$name" "$m" "$lo" "$hi" "$u" "$s" "$p99cell"
		done
	done
	echo
	echo "| row | CPU current ÷ base (median, min–max) | CPU current ÷ nginx | p99 current ÷ base | p99 current ÷ nginx |"
	echo "|---|---:|---:|---:|---:|"
	local field
	for row in "${ROWS[@]}"; do
		local cells=()
		for field in 5 9; do
			for who in base nginx; do
				read -r m lo hi < <(ratios "$row" current "$who" "$field" | stats)
				if [[ $m == NA ]]; then
					cells+=("—")
				else
					cells+=("$(printf '%.3f× (%.3f–%.3f)' "$m" "$lo" "$hi")")
				fi
			done
		done
		printf '| %s | %s | %s | %s | %s |\n' "${TITLE[$row]}" "${cells[@]}"
	done
	echo
	echo "- A ratio is taken within each round (both runs minutes apart at most) and only for runs without wrk errors; the median and the range are over rounds. A range that straddles 1.0 means the difference is within this run's noise. p99 is wrk's, the noisiest figure: one scheduler hiccup in a run moves it."
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
	build_base
	rm -rf "$RAW"
	mkdir -p "$RAW"
	: >"$RAW/results.txt"

	local ports i=0 row who
	mapfile -t ports < <(free_ports $((2 + 3 * ${#ROWS[@]})))
	local keep=${ports[0]} closing=${ports[1]}
	write_nginx_backend_conf "$TMP/backend-keep" "$keep"
	start_nginx backend-keep "$TMP/backend-keep" "$LOAD_CPU"
	wait_ready backend-keep "$STARTED_PID" "$keep" || { log "backend failed"; exit 1; }
	write_nginx_backend_conf "$TMP/backend-close" "$closing"
	sed -i 's/keepalive_requests 10000000;/keepalive_requests 1;/' "$TMP/backend-close/nginx.conf"
	start_nginx backend-close "$TMP/backend-close" "$LOAD_CPU"
	wait_ready backend-close "$STARTED_PID" "$closing" || { log "closing backend failed"; exit 1; }
	i=2
	for row in "${ROWS[@]}"; do
		[[ -n ${TITLE[$row]:-} ]] || { log "unknown row '$row' in AB_ROWS"; exit 2; }
		local backend=$keep
		[[ $row == close ]] && backend=$closing
		for who in "${WHO[@]}"; do
			start_target "$row" "$who" "${ports[$i]}" "$backend"
			i=$((i + 1))
		done
	done
	log "about $((ROUNDS * ${#ROWS[@]} * 3 * (WARMUP + DURATION))) s of load; $PINNING"
	local round j
	for round in $(seq "$ROUNDS"); do
		for row in "${ROWS[@]}"; do
			# Rotate who goes first, so no build always runs first or last
			# on a machine whose load drifts.
			for j in 0 1 2; do
				measure "$round" "$row-${WHO[$(((j + round - 1) % 3))]}"
			done
		done
	done
	report | tee "$OUT/ab.md"
	log "report written to bench/out/ab.md; raw wrk output in ${RAW#"$ROOT"/}/"
	return "$FAILED"
}

main "$@"
