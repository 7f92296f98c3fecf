#!/usr/bin/env bash
# scale.sh: `make bench-scale`. Memory and API writes at scale: starts the
# gateway with 2 routes and with SCALE_ROUTES exact routes (plus one prefix
# route each), prints VmRSS at start and the KB per route between the two,
# then writes SCALE_WRITES routes one at a time through the config API
# (PUT /config/routes/r7, a new path each time), printing how long each
# took until the new path answered 200, and VmRSS after them; then reloads
# the file three times (unchanged, one route changed, every route changed),
# printing each reload's own time (took_ms of POST /reload), how long
# until a changed route answered, and VmRSS before and after. Under it all
# wrk keeps SCALE_CONNS connections on the prefix route, which never changes, and the script
# prints how many of its requests failed, and VmRSS once the gateway
# returned what the applies left behind. See bench/README.md.
#
# Environment:
#   SCALE_ROUTES  exact routes of the large config (default 30000)
#   SCALE_WRITES  API writes (default 5)
#   SCALE_CONNS   wrk connections on /any (the prefix route) meanwhile (default 8; 0 for none)
#   LOOPGATE_BIN  gateway binary (default bin/loopgate)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

ROUTES=${SCALE_ROUTES:-30000}
WRITES=${SCALE_WRITES:-5}
CONNS=${SCALE_CONNS:-8}
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
build_tools

mapfile -t ports < <(free_ports 3)
gw=${ports[0]} admin=${ports[1]} up=${ports[2]}
start_pinned backend "" "$TMP/bin/backend" -addr "127.0.0.1:$up"
wait_ready backend "$STARTED_PID" "$up" || exit 1

# write_config FILE N [P]: N exact routes r0 ... on paths /P0 ... (P r by
# default) and a prefix route /.
write_config() {
	local file=$1 n=$2 p=${3:-r}
	{
		printf 'listen: 127.0.0.1:%s\nadmin: {address: 127.0.0.1:%s, state: %s}\nloops: 1\n' "$gw" "$admin" "$file.state"
		printf 'upstreams:\n  - {name: backend, nodes: ["127.0.0.1:%s"]}\nroutes:\n' "$up"
		awk -v n="$n" -v p="$p" 'BEGIN { for (i = 0; i < n; i++) printf "  - {id: r%d, path: /%s%d, upstream: backend}\n", i, p, i }'
		printf '  - {id: all, prefix: /, upstream: backend}\n'
	} >"$file"
}

rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

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

start 2
small=$(rss_kb "$GW_PID")
stop
start "$ROUTES"
large=$(rss_kb "$GW_PID")
log "VmRSS at start: $((small / 1024)) MB with 2 routes, $((large / 1024)) MB with $ROUTES;" \
	"$(( (large - small) * 1000 / ROUTES ))e-3 KB a route"

# The load on an unchanged route, for the whole of the writes and reloads.
if ((CONNS > 0)); then
	ensure_wrk
	wrk -t1 -c"$CONNS" -d600s "http://127.0.0.1:$gw/any" >"$TMP/wrk.txt" 2>&1 &
	WRK_PID=$!
fi

# ms NS0 NS1 is the milliseconds between two date +%s%N.
ms() { echo $(( ($2 - $1) / 1000000 )); }

before_writes=$(rss_kb "$GW_PID")
for i in $(seq "$WRITES"); do
	t0=$(date +%s%N)
	code=$(curl -s -o "$TMP/write.json" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
		-d "{\"id\": \"r7\", \"path\": \"/moved/$i\", \"upstream\": \"backend\"}" "http://127.0.0.1:$admin/config/routes/r7")
	t1=$(date +%s%N)
	[[ $code == 200 ]] || { log "write $i answered $code: $(cat "$TMP/write.json")"; exit 1; }
	until [[ $(status "/moved/$i") == 200 ]]; do :; done
	t2=$(date +%s%N)
	log "write $i: answered in $(ms "$t0" "$t1") ms, serving after $(ms "$t0" "$t2") ms"
done
log "VmRSS after $WRITES writes: $((before_writes / 1024)) -> $(( $(rss_kb "$GW_PID") / 1024 )) MB"

# reload LABEL PATH: POST /reload of the file as it is now, then polls PATH
# until it answers 200.
reload() {
	local label=$1 path=$2 rss0 t0 t1 t2 body took
	rss0=$(rss_kb "$GW_PID")
	t0=$(date +%s%N)
	body=$(curl -s -X POST -H 'X-Loopgate-Admin: 1' "http://127.0.0.1:$admin/reload")
	t1=$(date +%s%N)
	took=$(sed -n 's/.*"took_ms":\([0-9.]*\).*/\1/p' <<<"$body")
	[[ -n $took ]] || { log "reload, $label: $body"; exit 1; }
	until [[ $(status "$path") == 200 ]]; do :; done
	t2=$(date +%s%N)
	log "reload, $label: took ${took} ms (answered after $(ms "$t0" "$t1") ms, the 100 ms debounce window included;" \
		"$path serving after $(ms "$t0" "$t2") ms); VmRSS $((rss0 / 1024)) -> $(( $(rss_kb "$GW_PID") / 1024 )) MB"
}
before_reloads=$(rss_kb "$GW_PID")
reload "file unchanged" /r5
sed -i 's|path: /r5,|path: /r5x,|' "$TMP/r$ROUTES.yaml"
reload "one route changed" /r5x
write_config "$TMP/r$ROUTES.yaml" "$ROUTES" p
reload "every route changed" /p5
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
