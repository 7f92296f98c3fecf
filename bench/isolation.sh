#!/usr/bin/env bash
# isolation.sh: `make bench-isolation`. Slow-call isolation with the
# default settings (no isolation section anywhere: it is on by default)
# under a storm: one route's upstream answers in 2 s while ISO_STORM
# clients hit it, and wrk -c32 hits a fast route. Two setups, each run in
# turn with its own gateway:
#   separate  the fast route on an upstream of its own (bench/cmd/backend),
#             the slow route on bench/cmd/slowbackend;
#   shared    both routes on one upstream, one node: bench/cmd/slowbackend
#             with -fast /fast, so the routes share every connection pool
#             and the slow route's share of it (max_pool_share) is what
#             keeps connections for the fast one.
# Per setup it reports the fast route's p99 alone and beside the storm
# (target: within 2x) and its errors (a 503/50302 there is the starvation
# of issue 18 item 8), the slow route's isolation limit second by second
# (it should fall to the floor, 5), its 42901 and 50302 refusals, and how
# long the limit takes to climb back to its base (200) once the upstream
# is fast again. The report goes to stdout and bench/out/isolation.md;
# raw wrk output, metric samples and the gateway logs to
# bench/out/raw-isolation/SETUP/. See bench/README.md.
#
# Environment:
#   ISO_SETUPS    the setups to run, in order (default "separate shared")
#   ISO_STORM     connections of the slow route's storm (default 3000, as in
#                 the issue; the open-file limit is raised to fit)
#   ISO_DURATION  seconds of each measured wrk -c32 run on the fast route (default 12)
#   ISO_OFFSET    seconds the storm runs before the measured run starts (default 2)
#   ISO_RECOVERY  seconds of wrk -c10 on the slow route after it turns fast (default 18)
#   LOOPGATE_BIN  gateway binary (default bin/loopgate, built by `make build`)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init
ensure_wrk

SETUPS=${ISO_SETUPS:-separate shared}
STORM_CONNS=${ISO_STORM:-3000}
DURATION=${ISO_DURATION:-12}
OFFSET=${ISO_OFFSET:-2}
RECOVERY=${ISO_RECOVERY:-18}
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
OUT=$ROOT/bench/out
RAW=$OUT/raw-isolation
BASE=200 FLOOR=5 # the isolation defaults
for v in STORM_CONNS DURATION OFFSET RECOVERY; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || { log "ISO_${v%_CONNS} must be a positive integer, got '${!v}'"; exit 2; }
done
for setup in $SETUPS; do
	[[ $setup == separate || $setup == shared ]] || { log "ISO_SETUPS: unknown setup '$setup' (separate, shared)"; exit 2; }
done
# wrk and the gateway each hold one descriptor per storm connection.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
need=$((STORM_CONNS + 1024))
[[ $(ulimit -n) == unlimited ]] || (($(ulimit -n) >= need)) ||
	{ log "the open-file limit $(ulimit -n) is below the $need a storm of $STORM_CONNS needs; lower ISO_STORM"; exit 1; }
[[ -x $LOOPGATE_BIN ]] || { log "${LOOPGATE_BIN#"$ROOT"/} missing; run \`make build\` first"; exit 1; }
command -v curl >/dev/null 2>&1 || { log "curl is needed to poll /metrics"; exit 1; }

log "building bench tools"
build_tools
# Built as build_tools builds the other bench/cmd commands.
go build -o "$TMP/bin/" ./bench/cmd/slowbackend
rm -rf "$RAW"
mkdir -p "$RAW" "$OUT"

# wait_until NAME PID CMD... polls CMD every 0.1 s for up to 10 s while the
# process PID lives; on failure it prints the tail of NAME's log.
wait_until() {
	local name=$1 pid=$2 i
	shift 2
	for i in $(seq 100); do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "$name exited during startup; log tail:"
			tail -n 20 "$TMP/$name.log" >&2 || true
			return 1
		fi
		"$@" && return 0
		sleep 0.1
	done
	log "$name was not ready within 10 s; log tail:"
	tail -n 20 "$TMP/$name.log" >&2 || true
	return 1
}

# status PATH prints the gateway's status code for GET PATH.
status() { curl -s -o /dev/null --max-time 5 -w '%{http_code}' "http://127.0.0.1:$gw$1" || true; }


# status PATH prints the gateway's status code for GET PATH.
status() { curl -s -o /dev/null --max-time 5 -w '%{http_code}' "http://127.0.0.1:$gw$1" || true; }

# sample prints one line from /metrics: the slow route's limit, in-flight
# calls, waiting requests, 42901 total and pool-share (50302) total (NA
# when the scrape failed).
sample() {
	curl -s --max-time 0.9 "http://127.0.0.1:$admin/metrics" 2>/dev/null | awk '
		function get(name) { return (name in v) ? v[name] : "NA" }
		/^loopgate_route_isolation_[a-z_]+\{route="slow"\} / {
			name = $1; sub(/\{.*/, "", name); sub(/^loopgate_route_isolation_/, "", name)
			v[name] = $2
		}
		END { printf "%s %s %s %s %s\n", get("limit"), get("in_flight"), get("waiting"), get("rejected_total"), get("pool_share_rejected_total") }'
}

now_ms() { echo $(($(date +%s%N) / 1000000)); }

# poll FILE SECONDS T0_MS writes a sample at T0+0 s, T0+1 s, ..., T0+SECONDS
# s, each line prefixed with its second. A sampling interval, not a wait
# for readiness.
poll() {
	local file=$1 n=$2 t0=$3 i left
	: >"$file"
	for ((i = 0; i <= n; i++)); do
		left=$((t0 + i * 1000 - $(now_ms)))
		((left <= 0)) || sleep "$(printf '%d.%03d' $((left / 1000)) $((left % 1000)))"
		echo "$i $(sample)" >>"$file"
	done
}

# run_wrk NAME ARGS...: a measured wrk run in the foreground, to $RAW/NAME.txt.
run_wrk() {
	local name=$1
	shift
	wrk "$@" >"$RAW/$name.txt" 2>&1 || { log "wrk $name failed:"; cat "$RAW/$name.txt" >&2; exit 1; }
}

# stop PID...: ends processes this script started for a setup, so the next
# setup runs on a quiet machine (the exit trap covers the rest).
stop() {
	local pid
	for pid in "$@"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "$@"; do
		wait "$pid" 2>/dev/null || true
	done
}

errors() { # non2xx connect read write timeout
	local s="" n
	(($1)) && s+=", $1 non-2xx"
	for n in "connect $2" "read $3" "write $4" "timeout $5"; do
		((${n#* })) && s+=", ${n#* } ${n% *} errors"
	done
	echo "${s:-, no errors}"
}

# run_setup NAME runs the phases of one setup and appends its section of
# the report to $TMP/report.md.
run_setup() {
	local setup=$1 up_fast up_slow
	local RAW=$ROOT/bench/out/raw-isolation/$setup
	mkdir -p "$RAW"
	mapfile -t ports < <(free_ports 4)
	gw=${ports[0]} admin=${ports[1]}
	local fast=${ports[2]} slow=${ports[3]} pids=()
	if [[ $setup == separate ]]; then
		start_pinned "$setup-fast-backend" "" "$TMP/bin/backend" -addr "127.0.0.1:$fast"
		pids+=("$STARTED_PID")
		wait_ready "$setup-fast-backend" "$STARTED_PID" "$fast" || exit 1
		start_pinned "$setup-slow-backend" "" "$TMP/bin/slowbackend" -addr "127.0.0.1:$slow" -delay 2s
		up_fast="  - {name: fast, nodes: [\"127.0.0.1:$fast\"]}"
		up_slow="  - {name: slow, nodes: [\"127.0.0.1:$slow\"], response_timeout: 10s}"
	else
		start_pinned "$setup-slow-backend" "" "$TMP/bin/slowbackend" -addr "127.0.0.1:$slow" -delay 2s -fast /fast
		up_fast=""
		up_slow="  - {name: shared, nodes: [\"127.0.0.1:$slow\"], response_timeout: 10s}"
	fi
	pids+=("$STARTED_PID")
	wait_until "$setup-slow-backend" "$STARTED_PID" curl -sf -o /dev/null --max-time 1 "http://127.0.0.1:$slow/delay" || exit 1
	local fast_up=fast slow_up=slow
	[[ $setup == shared ]] && fast_up=shared slow_up=shared
	{
		echo "# Written by bench/isolation.sh, setup $setup: no isolation section, the defaults apply."
		echo "listen: 127.0.0.1:$gw"
		echo "admin: 127.0.0.1:$admin"
		echo "upstreams:"
		[[ -z $up_fast ]] || echo "$up_fast"
		echo "$up_slow"
		echo "routes:"
		echo "  - {id: fast, prefix: /fast, upstream: $fast_up}"
		echo "  - {id: slow, prefix: /slow, upstream: $slow_up}"
	} >"$TMP/$setup.yaml"
	cp "$TMP/$setup.yaml" "$RAW/loopgate.yaml"
	start_pinned "$setup-loopgate" "" "$LOOPGATE_BIN" -config "$TMP/$setup.yaml"
	local gwpid=$STARTED_PID
	pids+=("$gwpid")
	fast_ok() { [[ $(status /fast) == 200 ]]; }
	wait_until "$setup-loopgate" "$gwpid" fast_ok || exit 1
	[[ $(sample) == "$BASE 0 0 0 0" ]] || { log "/metrics on the admin port lacks the slow route's isolation at its base: '$(sample)'"; exit 1; }

	local load_start load_end t0 slow_wrk poller recovery_wrk STORM
	load_start=$(load_average)
	log "[$setup] warm-up: wrk -c32 on /fast for 2 s"
	run_wrk warmup -t1 -c32 -d2s "http://127.0.0.1:$gw/fast"

	log "[$setup] phase alone: wrk -t1 -c32 -d${DURATION}s on /fast"
	run_wrk fast-alone -t1 -c32 -d"${DURATION}s" --latency "http://127.0.0.1:$gw/fast"

	STORM=$((OFFSET + DURATION + 2))
	log "[$setup] phase beside: wrk -t1 -c$STORM_CONNS -d${STORM}s on /slow (2 s upstream), wrk -c32 on /fast from second $OFFSET"
	t0=$(now_ms)
	start_pinned "$setup-slow-wrk" "" wrk -t1 -c"$STORM_CONNS" -d"${STORM}s" --timeout 10s --latency "http://127.0.0.1:$gw/slow"
	slow_wrk=$STARTED_PID
	poll "$RAW/storm-samples.txt" $((STORM + 1)) "$t0" &
	poller=$!
	STARTED_PIDS+=("$poller")
	sleep "$OFFSET" # load shaping: the storm is under way when the measured run starts
	run_wrk fast-beside -t1 -c32 -d"${DURATION}s" --latency "http://127.0.0.1:$gw/fast"
	wait "$slow_wrk" || { log "the slow route's wrk failed:"; cat "$TMP/$setup-slow-wrk.log" >&2; exit 1; }
	cp "$TMP/$setup-slow-wrk.log" "$RAW/slow-storm.txt"
	wait "$poller"

	log "[$setup] phase recovery: slow upstream delay set to 0, wrk -t1 -c10 -d${RECOVERY}s on /slow"
	t0=$(now_ms)
	curl -sf -o /dev/null -X POST "http://127.0.0.1:$slow/delay?d=0s" || { log "could not switch the slow backend's delay"; exit 1; }
	start_pinned "$setup-recovery-wrk" "" wrk -t1 -c10 -d"${RECOVERY}s" --latency "http://127.0.0.1:$gw/slow"
	recovery_wrk=$STARTED_PID
	poll "$RAW/recovery-samples.txt" "$RECOVERY" "$t0" &
	poller=$!
	STARTED_PIDS+=("$poller")
	wait "$recovery_wrk" || { log "the recovery wrk failed:"; cat "$TMP/$setup-recovery-wrk.log" >&2; exit 1; }
	cp "$TMP/$setup-recovery-wrk.log" "$RAW/slow-recovery.txt"
	wait "$poller"
	load_end=$(load_average)
	kill -0 "$gwpid" 2>/dev/null || { log "the gateway died during the run; log tail:"; tail -n 20 "$TMP/$setup-loopgate.log" >&2; exit 1; }
	stop "${pids[@]}"
	cp "$TMP/$setup-loopgate.log" "$RAW/loopgate.log"

	# ---- this setup's section of the report ----
	local a_req a_rps a_p50 a_p99 a_non2xx a_sc a_sr a_sw a_st
	local b_req b_rps b_p50 b_p99 b_non2xx b_sc b_sr b_sw b_st
	local s_req s_rps s_p50 s_p99 s_non2xx s_sc s_sr s_sw s_st
	local r_req r_rps r_p50 r_p99 r_non2xx r_sc r_sr r_sw r_st
	read -r a_req a_rps a_p50 a_p99 a_non2xx a_sc a_sr a_sw a_st < <(parse_wrk "$RAW/fast-alone.txt")
	read -r b_req b_rps b_p50 b_p99 b_non2xx b_sc b_sr b_sw b_st < <(parse_wrk "$RAW/fast-beside.txt")
	read -r s_req s_rps s_p50 s_p99 s_non2xx s_sc s_sr s_sw s_st < <(parse_wrk "$RAW/slow-storm.txt")
	read -r r_req r_rps r_p50 r_p99 r_non2xx r_sc r_sr r_sw r_st < <(parse_wrk "$RAW/slow-recovery.txt")
	local ratio verdict min_limit min_at limits waiting rej_per_s share_per_s rej_total rej_floor_rate floor_secs share_total
	local rec_limits recovered_at warn_count warn_line
	ratio=$(awk -v a="$a_p99" -v b="$b_p99" 'BEGIN { if (a == "NA" || b == "NA" || a == 0) print "NA"; else printf "%.2f", b / a }')
	verdict=$(awk -v r="$ratio" 'BEGIN { if (r == "NA") print "not measured"; else print (r <= 2 ? "met" : "missed") }')
	# Storm timeline: the lowest limit and the first second it was seen; the
	# refusals between samples.
	read -r min_limit min_at < <(awk '$2 != "NA" && (min == "" || $2 + 0 < min + 0) { min = $2; at = $1 } END { print (min == "" ? "NA NA" : min " " at) }' "$RAW/storm-samples.txt")
	limits=$(awk '{ printf "%s%s", (NR > 1 ? " " : ""), $2 }' "$RAW/storm-samples.txt")
	waiting=$(awk '{ printf "%s%s", (NR > 1 ? " " : ""), $4 }' "$RAW/storm-samples.txt")
	per_second() { awk -v c="$1" '{ if (NR > 1) printf "%s%s", (NR > 2 ? " " : ""), ($c == "NA" || prev == "NA") ? "NA" : $c - prev; prev = $c }' "$RAW/storm-samples.txt"; }
	rej_per_s=$(per_second 5)
	share_per_s=$(per_second 6)
	read -r rej_total rej_floor_rate floor_secs share_total < <(awk -v floor="$FLOOR" '
		NR == 1 { first = $5; sfirst = $6 }
		NR > 1 && $5 != "NA" && prev != "NA" && $2 == floor && plimit == floor { fr += $5 - prev; fs++ }
		{ prev = $5; plimit = $2; if ($5 != "NA") last = $5; if ($6 != "NA") slast = $6 }
		END { printf "%s %s %d %s\n", last - first, (fs ? sprintf("%.0f", fr / fs) : "NA"), fs, slast - sfirst }' "$RAW/storm-samples.txt")
	rec_limits=$(awk '{ printf "%s%s", (NR > 1 ? " " : ""), $2 }' "$RAW/recovery-samples.txt")
	recovered_at=$(awk -v base="$BASE" '$2 == base { print $1; found = 1; exit } END { if (!found) print "NA" }' "$RAW/recovery-samples.txt")
	warn_count=$(grep -c 'warning: isolation route=slow' "$RAW/loopgate.log" || true)
	warn_line=$(grep -m1 'warning: isolation route=slow' "$RAW/loopgate.log" || true)
	{
		echo "## Setup \`$setup\`"
		echo
		if [[ $setup == separate ]]; then
			echo "The fast route on its own upstream (bench/cmd/backend), the slow route on bench/cmd/slowbackend."
		else
			echo "Both routes on one upstream, one node (bench/cmd/slowbackend -fast /fast): they share every connection pool."
		fi
		echo "Load average $load_start at start, $load_end at end. Config: raw-isolation/$setup/loopgate.yaml."
		echo
		echo "### Fast route (\`wrk -t1 -c32 -d${DURATION}s\` on /fast)"
		echo
		echo "| phase | req/s | p50 ms | p99 ms | errors |"
		echo "|---|---|---|---|---|"
		echo "| alone | $(fmt %.0f "$a_rps") | $(fmt %.2f "$a_p50") | $(fmt %.2f "$a_p99") | $(errors "$a_non2xx" "$a_sc" "$a_sr" "$a_sw" "$a_st" | cut -c3-) |"
		echo "| beside the slow route's storm | $(fmt %.0f "$b_rps") | $(fmt %.2f "$b_p50") | $(fmt %.2f "$b_p99") | $(errors "$b_non2xx" "$b_sc" "$b_sr" "$b_sw" "$b_st" | cut -c3-) |"
		echo
		echo "p99 beside / p99 alone: **${ratio}×** (target ≤ 2×: $verdict); any non-2xx beside the storm is a starved fast route."
		echo
		echo "### Slow route storm (\`wrk -t1 -c$STORM_CONNS -d${STORM}s\` on /slow; the fast run covers seconds $OFFSET–$((OFFSET + DURATION)))"
		echo
		echo "- wrk: $s_req requests, $((s_req - s_non2xx)) answered 2xx, $s_non2xx non-2xx (42901 or 50302)$(errors 0 "$s_sc" "$s_sr" "$s_sw" "$s_st")."
		echo "- Limit by second: $limits"
		echo "- Lowest limit: **$min_limit**, first seen at second $min_at (floor $FLOOR)."
		echo "- Waiting for a permit by second: $waiting"
		echo "- Refusals 42901 per second: $rej_per_s"
		echo "- Refusals 50302 (over the route's pool share) per second: $share_per_s"
		echo "- Refusals in all: $rej_total 42901, $share_total 50302; 42901 at the floor $rej_floor_rate/s on average over $floor_secs s."
		echo "- Gateway log: $warn_count line(s) \`warning: isolation route=slow ...\`${warn_line:+: \`${warn_line}\`}"
		echo
		echo "### Recovery (delay set to 0, \`wrk -t1 -c10 -d${RECOVERY}s\` on /slow)"
		echo
		echo "- Limit by second from the switch: $rec_limits"
		if [[ $recovered_at == NA ]]; then
			echo "- The limit did **not** get back to $BASE within ${RECOVERY} s."
		else
			echo "- Back at $BASE after **${recovered_at} s** (sampled once a second)."
		fi
		echo "- wrk: $r_req requests, $(fmt %.0f "$r_rps") req/s, p99 $(fmt %.2f "$r_p99") ms$(errors "$r_non2xx" "$r_sc" "$r_sr" "$r_sw" "$r_st")."
		echo
	} >>"$TMP/report.md"
}

: >"$TMP/report.md"
for setup in $SETUPS; do
	run_setup "$setup"
done
{
	echo "# Loopgate slow-call isolation with the default settings (issue 18 item 8), $(date -u '+%Y-%m-%d %H:%M UTC')"
	echo
	echo "Kernel $(uname -r), $(nproc) CPUs, wrk $(wrk_version), nothing pinned; Loopgate with default loops" \
		"(one per CPU), the default filter chain and no isolation section: isolation is on by default" \
		"(limit $BASE, floor $FLOOR, slow_call 1s, window 3s, queue 1000, queue_timeout 100ms, max_pool_share 80 %)." \
		"Slow upstream: bench/cmd/slowbackend, 2 s per answer, \`response_timeout: 10s\`. Setups: $SETUPS."
	echo
	cat "$TMP/report.md"
} | tee "$OUT/isolation.md"
