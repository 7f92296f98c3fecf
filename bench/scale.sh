#!/usr/bin/env bash
# scale.sh: `make bench-scale`. Memory, API writes and reloads at scale:
# prints the load average, starts the gateway with 2 routes and with
# SCALE_ROUTES exact routes (plus one prefix route each), prints the
# start's CPU time, VmRSS and the heap in use after a collection at start,
# and the KB per route between the two. Then SCALE_WRITES route writes through the config API,
# one at a time, cycling through create (POST), replace (PUT), patch
# (PATCH) and delete (DELETE), each timed by bench/cmd/writeprobe from the
# write's first byte until the data plane answers with the written route
# (its X-Route response header; for a delete, until the header is gone):
# first on a quiet gateway, with the CPU each write cost the gateway, the
# heap in use after a collection and VmRSS at start, after the first write
# and after the rest (each once the gateway has handed back what the
# applies left behind, loopgate_memory_returns_total); then again under
# wrk. Then it reloads the file four times (unchanged, one route changed,
# every route changed, every route changed again), printing each reload's
# own time (took_ms of POST /reload), the CPU time the gateway used
# meanwhile (from /proc; serving wrk's load included), how long until a
# changed route answered, and VmRSS before and after. wrk keeps SCALE_CONNS connections on the prefix route, which never
# changes, from the second round of writes on, and the script prints how
# many of its requests failed, and VmRSS once the gateway returned what the
# applies left behind. See bench/README.md.
#
# Environment:
#   SCALE_ROUTES  exact routes of the large config (default 30000)
#   SCALE_WRITES  API writes in each round, quiet and under wrk (default 8)
#   SCALE_CONNS   wrk connections on /any (the prefix route) meanwhile (default 8; 0 for none)
#   LOOPGATE_BIN  gateway binary (default bin/loopgate)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

ROUTES=${SCALE_ROUTES:-30000}
WRITES=${SCALE_WRITES:-8}
CONNS=${SCALE_CONNS:-8}
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
build_tools
go build -o "$TMP/bin/" ./bench/cmd/writeprobe

mapfile -t ports < <(free_ports 3)
gw=${ports[0]} admin=${ports[1]} up=${ports[2]}
start_pinned backend "" "$TMP/bin/backend" -addr "127.0.0.1:$up"
wait_ready backend "$STARTED_PID" "$up" || exit 1

# write_config FILE N [P]: N exact routes r0 ... on paths /P0 ... (P r by
# default) and a prefix route /.
write_config() {
	local file=$1 n=$2 p=${3:-r}
	{
		printf 'listen: 127.0.0.1:%s\nadmin: {address: 127.0.0.1:%s, state: %s, pprof: true}\nloops: 1\n' "$gw" "$admin" "$file.state"
		printf 'upstreams:\n  - {name: backend, nodes: ["127.0.0.1:%s"]}\nroutes:\n' "$up"
		awk -v n="$n" -v p="$p" 'BEGIN { for (i = 0; i < n; i++) printf "  - {id: r%d, path: /%s%d, upstream: backend}\n", i, p, i }'
		printf '  - {id: all, prefix: /, upstream: backend}\n'
	} >"$file"
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# cpu_ms PID is the CPU time PID has used, user and system, in ms.
TICK=$(getconf CLK_TCK)
cpu_ms() { awk -v t="$TICK" '{sub(/.*\) /, ""); print int(($12 + $13) * 1000 / t)}' "/proc/$1/stat"; }

# heap_kb is the heap in use right after a collection (GET
# /debug/pprof/heap?gc=1 runs one), in KB.
heap_kb() {
	curl -s -o /dev/null "http://127.0.0.1:$admin/debug/pprof/heap?gc=1"
	curl -s "http://127.0.0.1:$admin/metrics" | awk '$1 == "go_memstats_heap_inuse_bytes" {printf "%d\n", $2 / 1024}'
}

# status PATH is the gateway's status code for GET PATH.
status() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$gw$1" || true; }

# start N: the gateway on N routes, ready; leaves its pid in GW_PID.
start() {
	write_config "$TMP/r$1.yaml" "$1"
	start_pinned "loopgate-$1" "" "$LOOPGATE_BIN" -config "$TMP/r$1.yaml"
	GW_PID=$STARTED_PID
	wait_ready "loopgate-$1" "$GW_PID" "$gw" 60 || exit 1 # 30,000 routes start in seconds on a busy machine
}

stop() { kill -TERM "$GW_PID"; wait "$GW_PID" 2>/dev/null || true; }

log "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) CPUs"
start 2
small=$(rss_kb "$GW_PID") small_heap=$(heap_kb)
stop
start "$ROUTES"
large=$(rss_kb "$GW_PID") large_heap=$(heap_kb)
log "start with $ROUTES routes: $(cpu_ms "$GW_PID") ms CPU (parse, check, compile, until ready)"
log "VmRSS at start: $((small / 1024)) MB with 2 routes, $((large / 1024)) MB with $ROUTES;" \
	"$(( (large - small) * 1000 / ROUTES ))e-3 KB a route"
log "heap in use after a collection at start: $((small_heap / 1024)) MB with 2 routes, $((large_heap / 1024)) MB with $ROUTES;" \
	"$(( (large_heap - small_heap) * 1000 / ROUTES ))e-3 KB a route"

# ms NS0 NS1 is the milliseconds between two date +%s%N.
ms() { echo $(( ($2 - $1) / 1000000 )); }

# metric NAME is NAME's value on /metrics, in MB.
metric_mb() {
	curl -s "http://127.0.0.1:$admin/metrics" | awk -v n="$1" '$1 == n {printf "%d", $2 / 1048576}'
}

# heap_mb is the heap in use after a collection (GET /debug/pprof/heap?gc=1
# runs one), in MB.
heap_mb() {
	curl -s -o /dev/null "http://127.0.0.1:$admin/debug/pprof/heap?gc=1"
	metric_mb go_memstats_heap_inuse_bytes
}

# returns is loopgate_memory_returns_total.
returns() { curl -s "http://127.0.0.1:$admin/metrics" | awk '$1 == "loopgate_memory_returns_total" {print $2}'; }

# returned N waits until loopgate_memory_returns_total exceeds N: the
# gateway has handed back what the applies left behind (a second after
# the last, at most once every 10 s).
returned() {
	local deadline=$((SECONDS + 30))
	until (($(returns) > $1)); do
		((SECONDS < deadline)) || { log "no memory return within 30 s"; exit 1; }
		sleep 0.2
	done
}

# write I ROUND: the I-th route write, cycling create, replace, patch and
# delete (of the route created three writes before), timed by writeprobe.
# Each written route sets X-Route, which the prefix route does not.
write() {
	local i=$1 a="http://127.0.0.1:$admin/config/routes" g="http://127.0.0.1:$gw" op args
	case $(( (i - 1) % 4 )) in
	0) op=create args=(-method POST -url "$a" -probe "$g/w/$i" -want "w$i"
		-body "{\"id\": \"w$i\", \"path\": \"/w/$i\", \"upstream\": \"backend\", \"response_headers\": {\"set\": {\"X-Route\": \"w$i\"}}}") ;;
	1) op=replace args=(-method PUT -url "$a/r7" -probe "$g/moved/$i" -want "r7-$i"
		-body "{\"id\": \"r7\", \"path\": \"/moved/$i\", \"upstream\": \"backend\", \"response_headers\": {\"set\": {\"X-Route\": \"r7-$i\"}}}") ;;
	2) op=patch args=(-method PATCH -url "$a/r8" -probe "$g/patched/$i" -want "r8-$i"
		-body "{\"path\": \"/patched/$i\", \"response_headers\": {\"set\": {\"X-Route\": \"r8-$i\"}}}") ;;
	3) op=delete args=(-method DELETE -url "$a/w$((i - 3))" -probe "$g/w/$((i - 3))" -want "") ;;
	esac
	local out
	out=$("$TMP/bin/writeprobe" -pid "$GW_PID" "${args[@]}")
	echo "$out" >>"$TMP/writes-$2.txt"
	log "write $i ($op, $2): $out"
}

# summary ROUND: the round's serving times (min, median, max), mean CPU and
# failed probes.
summary() {
	local f=$TMP/writes-$1.txt serving
	serving=$(sed 's/.*serving_ms=\([0-9.]*\).*/\1/' "$f" | sort -n | awk '{ s[NR] = $1 }
		END { printf "%.1f / %.1f / %.1f ms (min / median / max of %d)", s[1], s[int((NR + 1) / 2)], s[NR], NR }')
	log "writes $1: serving after $serving;" \
		"$(awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] } }
			END { printf "gateway CPU %.1f ms a write, %d probe answers failed", v["cpu_ms"] / NR, v["failed"] }' "$f")"
}

# Writes on a quiet gateway: their CPU, and what they leave in memory.
heap0=$(heap_mb) rss0=$(rss_kb "$GW_PID") n0=$(returns)
write 1 quiet
returned "$n0"
heap1=$(heap_mb) rss1=$(rss_kb "$GW_PID") n1=$(returns)
for i in $(seq 2 "$WRITES"); do write "$i" quiet; done
summary quiet
rss_now=$(rss_kb "$GW_PID") inuse_now=$(metric_mb go_memstats_heap_inuse_bytes)
returned "$n1"
heap2=$(heap_mb) rss2=$(rss_kb "$GW_PID")
log "heap in use after a collection: $heap0 MB at start, $heap1 MB after the first write, $heap2 MB after $WRITES;" \
	"VmRSS $((rss0 / 1024)) MB at start, $((rss1 / 1024)) MB after the first write, $((rss2 / 1024)) MB after $WRITES (each after the return);" \
	"right after the last write, before the return: VmRSS $((rss_now / 1024)) MB, heap in use $inuse_now MB"

# The load on an unchanged route, for the second round of writes and the reloads.
if ((CONNS > 0)); then
	ensure_wrk
	wrk -t1 -c"$CONNS" -d600s "http://127.0.0.1:$gw/any" >"$TMP/wrk.txt" 2>&1 &
	WRK_PID=$!
fi
for i in $(seq "$((WRITES + 1))" "$((2 * WRITES))"); do write "$i" "under wrk"; done
summary "under wrk"

# reload LABEL PATH: POST /reload of the file as it is now, then polls PATH
# until it answers 200.
reload() {
	local label=$1 path=$2 rss0 t0 t1 t2 body took cpu0 cpu1
	rss0=$(rss_kb "$GW_PID")
	cpu0=$(cpu_ms "$GW_PID")
	t0=$(date +%s%N)
	body=$(curl -s -X POST -H 'X-Loopgate-Admin: 1' "http://127.0.0.1:$admin/reload")
	t1=$(date +%s%N)
	cpu1=$(cpu_ms "$GW_PID")
	took=$(sed -n 's/.*"took_ms":\([0-9.]*\).*/\1/p' <<<"$body")
	[[ -n $took ]] || { log "reload, $label: $body"; exit 1; }
	until [[ $(status "$path") == 200 ]]; do :; done
	t2=$(date +%s%N)
	log "reload, $label: took ${took} ms, $((cpu1 - cpu0)) ms CPU (answered after $(ms "$t0" "$t1") ms, the 100 ms debounce window included;" \
		"$path serving after $(ms "$t0" "$t2") ms); VmRSS $((rss0 / 1024)) -> $(( $(rss_kb "$GW_PID") / 1024 )) MB"
}
before_reloads=$(rss_kb "$GW_PID")
reload "file unchanged" /r5
sed -i 's|path: /r5,|path: /r5x,|' "$TMP/r$ROUTES.yaml"
reload "one route changed" /r5x
write_config "$TMP/r$ROUTES.yaml" "$ROUTES" p
reload "every route changed" /p5
write_config "$TMP/r$ROUTES.yaml" "$ROUTES" q
reload "every route changed again" /q5
log "VmRSS after the reloads: $((before_reloads / 1024)) -> $(( $(rss_kb "$GW_PID") / 1024 )) MB"
# The gateway returns what applies left behind a second after the last,
# at most once every 10 s (loopgate_memory_returns_total).
sleep 12
returns=$(curl -s "http://127.0.0.1:$admin/metrics" | awk '$1 == "loopgate_memory_returns_total" {print $2}')
log "VmRSS 12 s later: $(( $(rss_kb "$GW_PID") / 1024 )) MB (at start: $((large / 1024)) MB); memory returns: $returns"

if ((CONNS > 0)); then
	kill -INT "$WRK_PID"
	wait "$WRK_PID" 2>/dev/null || true
	read -r req _ _ _ non2xx sc sr sw st < <(parse_wrk "$TMP/wrk.txt")
	log "meanwhile on /any (the prefix route): $req requests, $non2xx not 2xx, socket errors: connect $sc, read $sr, write $sw, timeout $st"
fi
stop
