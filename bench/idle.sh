#!/usr/bin/env bash
# idle.sh: the `make bench-idle` harness. Starts Loopgate (same config as the
# "loopgate (plain)" row of run.sh) in front of the benchmark backend, opens
# N idle keep-alive client connections with bench/cmd/idleconns and reports
# the gateway's RSS growth per connection (also written to bench/out/idle.md).
#
# Environment:
#   IDLE_CONNS    connections to open (default 10000); the first argument overrides it
#   LOOPGATE_BIN  gateway binary (default bin/loopgate, built by `make build`)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

CONNS=${1:-${IDLE_CONNS:-10000}}
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
OUT=$ROOT/bench/out
[[ $CONNS =~ ^[1-9][0-9]*$ ]] || { log "connection count must be a positive integer, got '$CONNS'"; exit 2; }
[[ -x $LOOPGATE_BIN ]] || { log "${LOOPGATE_BIN#"$ROOT"/} missing; run \`make build\` first"; exit 1; }

# raise_fd_limit makes room for CONNS descriptors plus slack in this shell,
# which the gateway and idleconns inherit; it lowers CONNS when the hard
# limit cannot be raised.
raise_fd_limit() {
	local need=$((CONNS + 1024)) hard
	hard=$(ulimit -Hn)
	if [[ $hard != unlimited ]] && ((hard < need)); then
		if ! ulimit -Hn "$need" 2>/dev/null; then
			CONNS=$((hard - 1024))
			log "hard open-file limit is $hard; opening $CONNS connections instead"
			((CONNS > 0)) || exit 1
			need=$hard
		fi
	fi
	ulimit -Sn "$need"
}

main() {
	raise_fd_limit
	setup_pinning
	log "building bench tools"
	build_tools
	local ports
	mapfile -t ports < <(free_ports 2)
	start_backend "${ports[0]}"
	write_loopgate_config "$TMP/loopgate.yaml" "${ports[1]}" "${ports[0]}" plain
	start_loopgate loopgate "$TMP/loopgate.yaml" "$PROXY_CPU"
	local gateway=$STARTED_PID
	wait_ready loopgate "$gateway" "${ports[1]}" || exit 1

	log "opening $CONNS idle keep-alive connections (open-file limit $(ulimit -Sn))"
	local result rc=0
	result=$(pinned "$LOAD_CPU" timeout 55 "$TMP/bin/idleconns" \
		-addr "127.0.0.1:${ports[1]}" -n "$CONNS" -pid "$gateway" -deadline 40s) || rc=$?
	mkdir -p "$OUT"
	{
		echo "Loopgate idle connections, $(date -u '+%Y-%m-%d %H:%M UTC'): kernel $(uname -r), $CONNS connections," \
			"backend $BACKEND_KIND, 1 loop, $PINNING${GOGC:+, GOGC=$GOGC}${GOMEMLIMIT:+, GOMEMLIMIT=$GOMEMLIMIT}."
		echo
		echo "$result"
	} | tee "$OUT/idle.md"
	if ((rc != 0)); then
		log "idleconns failed (exit $rc); gateway log tail:"
		tail -n 20 "$TMP/loopgate.log" >&2 || true
	fi
	return "$rc"
}

main "$@"
