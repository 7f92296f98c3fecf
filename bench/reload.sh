#!/usr/bin/env bash
# reload.sh: `make bench-reload`. Live reload under load: wrk -c64 runs
# against a route that every config keeps while the gateway is reloaded
# every 250 ms, alternating two configs (one adds an upstream and a route,
# removes another upstream and route, and changes a filter). Reloads
# alternate between POST /reload and SIGHUP. After each, the added route
# must answer 200 and the removed one 404. Prints wrk's summary, the
# reload and route-check counts, and the connections still open to the
# removed upstreams. See bench/README.md.
#
# Environment:
#   RELOAD_DURATION  seconds of load (default 20)
#   RELOAD_EVERY     seconds from one reload to the next (default 0.25)
#   LOOPGATE_BIN     gateway binary (default bin/loopgate)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init
ensure_wrk

DURATION=${RELOAD_DURATION:-20}
EVERY=${RELOAD_EVERY:-0.25}
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
build_tools

mapfile -t ports < <(free_ports 5)
gw=${ports[0]} admin=${ports[1]} keep=${ports[2]} gone=${ports[3]} extra=${ports[4]}
for p in "$keep" "$gone" "$extra"; do
	start_pinned "backend-$p" "" "$TMP/bin/backend" -addr "127.0.0.1:$p"
	wait_ready "backend-$p" "$STARTED_PID" "$p" || exit 1
done

# write_config FILE VARIANT: a keeps /old/ on upstream "gone"; b has /new/
# on upstream "extra" and a response header edit on the kept route.
write_config() {
	local file=$1 variant=$2
	cat >"$file" <<EOF
listen: 127.0.0.1:$gw
admin: 127.0.0.1:$admin
loops: 1
upstreams:
  - {name: keep, nodes: ["127.0.0.1:$keep"]}
EOF
	if [[ $variant == a ]]; then
		cat >>"$file" <<EOF
  - {name: gone, nodes: ["127.0.0.1:$gone"]}
routes:
  - {id: main, prefix: /api/, upstream: keep}
  - {id: old, prefix: /old/, upstream: gone}
EOF
	else
		cat >>"$file" <<EOF
  - {name: extra, nodes: ["127.0.0.1:$extra"]}
routes:
  - {id: main, prefix: /api/, upstream: keep, response_headers: {set: {X-Config: b}}}
  - {id: new, prefix: /new/, upstream: extra}
EOF
	fi
}
write_config "$TMP/a.yaml" a
write_config "$TMP/b.yaml" b
cp "$TMP/a.yaml" "$TMP/live.yaml"
start_pinned loopgate "" "$LOOPGATE_BIN" -config "$TMP/live.yaml"
gwpid=$STARTED_PID
status() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$gw$1"; }
for i in $(seq 100); do
	[[ $(status /api/x) == 200 ]] && break
	kill -0 "$gwpid" 2>/dev/null || { tail -n 20 "$TMP/loopgate.log" >&2; exit 1; }
	sleep 0.1
done

# reloader: alternate configs until the load ends, checking each one took.
reloader() {
	local n=0 bad=0 variant want_new want_old got_new got_old
	local end=$((SECONDS + DURATION))
	while ((SECONDS < end)); do
		local started=$(date +%s%N)
		if ((n % 2 == 0)); then variant=b want_new=200 want_old=404; else variant=a want_new=404 want_old=200; fi
		# Written to a temporary name and renamed into place, as
		# docs/operations.md advises, so no reload sees it half-written.
		cp "$TMP/$variant.yaml" "$TMP/live.yaml.new" && mv "$TMP/live.yaml.new" "$TMP/live.yaml"
		if ((n % 2 == 0)); then
			curl -s -o /dev/null -X POST -H "X-Loopgate-Admin: 1" "http://127.0.0.1:$admin/reload"
		else
			kill -HUP "$gwpid"
			sleep 0.2 # the reload debounce window is 100 ms, then two reads of the file 20 ms apart
		fi
		got_new=$(status /new/x) got_old=$(status /old/x)
		if [[ $got_new != "$want_new" || $got_old != "$want_old" ]]; then
			bad=$((bad + 1))
			log "reload $n (config $variant): /new/ $got_new, /old/ $got_old; want $want_new, $want_old"
		fi
		n=$((n + 1))
		# One reload every EVERY seconds, the checks included.
		sleep "$(awk -v s="$started" -v now="$(date +%s%N)" -v e="$EVERY" 'BEGIN { d = e - (now - s) / 1e9; printf "%.3f", (d > 0 ? d : 0) }')"
	done
	echo "reloads: $n (POST /reload and SIGHUP alternating), route checks failed: $bad"
}

reloader >"$TMP/reloads.txt" &
reloader_pid=$!
wrk -t2 -c64 -d"${DURATION}s" "http://127.0.0.1:$gw/api/x"
wait "$reloader_pid"
cat "$TMP/reloads.txt"
echo "reload log lines: $(grep -c '"event":"reload"' "$TMP/loopgate.log" || true)"
echo "refused or failed reloads: $(grep '"event":"reload"' "$TMP/loopgate.log" | grep -vc '"changes"' || true)"
echo "connections open to the upstream the last config removed: $(ss -Htn state established "( dport = :$gone or dport = :$extra )" | wc -l) (1 is the last route check's, to the one kept)"
