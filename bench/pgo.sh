#!/usr/bin/env bash
# pgo.sh: the `make pgo` harness. Writes cmd/loopgate/default.pgo, the CPU
# profile `go build` (-pgo=auto, the default) uses to build cmd/loopgate
# with profile-guided optimisation: hot calls inlined past the usual
# budget, hot code laid out together. The gateway, built from this tree
# without PGO, serves wrk for PGO_SECONDS on each of three rows, keep-alive
# all: the plain proxy, the default filter chain (request ID, IP allow
# list, forwarded headers, JWT) and plain over HTTPS; /debug/pprof/profile
# on its admin port records each, and the three are merged into one
# profile, each row weighted by its samples. See bench/README.md.
#
# Environment:
#   PGO_SECONDS  seconds profiled per row (default 10)
#   PGO_OUT      the merged profile (default cmd/loopgate/default.pgo)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

SECS=${PGO_SECONDS:-10}
PGO_OUT=${PGO_OUT:-$ROOT/cmd/loopgate/default.pgo}

# profile ROW SETUP [tls]: one row's CPU profile into $TMP/ROW.pprof.
profile() {
	local row=$1 setup=$2 tls=${3:-} scheme=http ports
	ports=($("$TMP/bin/freeport" -n 2))
	local port=${ports[0]} admin=${ports[1]}
	local cfg=$TMP/$row.yaml
	write_loopgate_config "$cfg" "$port" "$BACKEND_PORT" "$setup"
	sed -i "s|^admin: .*|admin: {address: 127.0.0.1:$admin, pprof: true}|" "$cfg"
	if [[ -n $tls ]]; then
		loopgate_tls_listener "$cfg"
		scheme=https
	fi
	start_pinned "$row" "" "$TMP/bin/loopgate" -config "$cfg" -loops 1
	local pid=$STARTED_PID
	local i
	for i in $(seq 100); do
		curl -sk -o /dev/null -H "Authorization: Bearer $BENCH_JWT" "$scheme://127.0.0.1:$port/" && break
		sleep 0.1
	done
	log "profiling $row for ${SECS}s"
	wrk -t1 -c64 -d"$((SECS + 3))s" -H "Authorization: Bearer $BENCH_JWT" "$scheme://127.0.0.1:$port/" >"$TMP/$row.wrk" 2>&1 &
	local load=$!
	sleep 1
	curl -sf -H 'X-Loopgate-Admin: 1' -o "$TMP/$row.pprof" "http://127.0.0.1:$admin/debug/pprof/profile?seconds=$SECS" ||
		{ log "fetching $row's profile failed"; exit 1; }
	wait "$load" || true
	grep -q 'Requests/sec' "$TMP/$row.wrk" || { log "wrk failed on $row:"; cat "$TMP/$row.wrk" >&2; exit 1; }
	kill -TERM "$pid"
	wait "$pid" || true
}

main() {
	ensure_wrk
	build_tools
	go build -pgo=off -o "$TMP/bin/loopgate" ./cmd/loopgate
	write_bench_cert
	BACKEND_PORT=$("$TMP/bin/freeport" -n 1)
	start_pinned backend "" "$TMP/bin/backend" -addr "127.0.0.1:$BACKEND_PORT"
	wait_ready backend "$STARTED_PID" "$BACKEND_PORT" || exit 1
	profile plain plain
	profile default default
	profile https plain tls
	go tool pprof -proto "$TMP/plain.pprof" "$TMP/default.pprof" "$TMP/https.pprof" >"$PGO_OUT" 2>/dev/null
	log "wrote ${PGO_OUT#"$ROOT"/} ($(wc -c <"$PGO_OUT") bytes); rebuild (make build) to use it"
}

main "$@"
