#!/usr/bin/env bash
# scale.sh: `make bench-scale`. Memory and API writes at scale: starts the
# gateway with 2 routes and with SCALE_ROUTES exact routes (plus one prefix
# route each), prints VmRSS at start and the KB per route between the two,
# then writes SCALE_WRITES routes one at a time through the config API
# (PUT /config/routes/r7, a new path each time), printing how long each
# took until the new path answered 200, and VmRSS after them. See
# bench/README.md.
#
# Environment:
#   SCALE_ROUTES  exact routes of the large config (default 30000)
#   SCALE_WRITES  API writes (default 5)
#   LOOPGATE_BIN  gateway binary (default bin/loopgate)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

ROUTES=${SCALE_ROUTES:-30000}
WRITES=${SCALE_WRITES:-5}
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
build_tools

mapfile -t ports < <(free_ports 3)
gw=${ports[0]} admin=${ports[1]} up=${ports[2]}
start_pinned backend "" "$TMP/bin/backend" -addr "127.0.0.1:$up"
wait_ready backend "$STARTED_PID" "$up" || exit 1

# write_config FILE N: N exact routes /r0 ... and a prefix route /.
write_config() {
	local file=$1 n=$2
	{
		printf 'listen: 127.0.0.1:%s\nadmin: {address: 127.0.0.1:%s, state: %s}\nloops: 1\n' "$gw" "$admin" "$file.state"
		printf 'upstreams:\n  - {name: backend, nodes: ["127.0.0.1:%s"]}\nroutes:\n' "$up"
		awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) printf "  - {id: r%d, path: /r%d, upstream: backend}\n", i, i }'
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
	wait_ready "loopgate-$1" "$GW_PID" "$gw" || exit 1
}

stop() { kill -TERM "$GW_PID"; wait "$GW_PID" 2>/dev/null || true; }

start 2
small=$(rss_kb "$GW_PID")
stop
start "$ROUTES"
large=$(rss_kb "$GW_PID")
log "VmRSS at start: $((small / 1024)) MB with 2 routes, $((large / 1024)) MB with $ROUTES;" \
	"$(( (large - small) * 1000 / ROUTES ))e-3 KB a route"

for i in $(seq "$WRITES"); do
	t0=$(date +%s%N)
	code=$(curl -s -o "$TMP/write.json" -w '%{http_code}' -X PUT -H 'Content-Type: application/json' \
		-d "{\"id\": \"r7\", \"path\": \"/moved/$i\", \"upstream\": \"backend\"}" "http://127.0.0.1:$admin/config/routes/r7")
	t1=$(date +%s%N)
	[[ $code == 200 ]] || { log "write $i answered $code: $(cat "$TMP/write.json")"; exit 1; }
	until [[ $(status "/moved/$i") == 200 ]]; do :; done
	t2=$(date +%s%N)
	log "write $i: answered in $(( (t1 - t0) / 1000000 )) ms, serving after $(( (t2 - t0) / 1000000 )) ms"
done
log "VmRSS after $WRITES writes: $(( $(rss_kb "$GW_PID") / 1024 )) MB"
stop
