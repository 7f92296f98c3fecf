#!/usr/bin/env bash
# clientlimit.sh: the full-size measurement of per-client cluster limits.
# Runs TestClusterLimitPerUserAcrossGateways (cmd/loopgate): two loopgate
# processes built from this tree share a {key: "header:X-User", rate: 2,
# burst: 4, scope: cluster} limit through a real redis-server the test
# starts; USERS distinct users (a tenth heavy, asking 10/s; the rest light,
# asking 1/s) spread their requests over both for SECONDS. It reports each
# kind's admitted requests against the bound, the Redis scripts per
# request, the hot sets and the Redis keys left (every one with a TTL), and
# writes them to bench/out/clientlimit.md.
#
# Environment:
#   USERS    distinct users (default 10000); the first argument overrides it
#   SECONDS_ run length in seconds (default 10); the second argument overrides it
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"

USERS=${1:-${USERS:-10000}}
RUN=${2:-${SECONDS_:-10}}
[[ $USERS =~ ^[1-9][0-9]*$ ]] || { echo "clientlimit: user count must be a positive integer, got '$USERS'" >&2; exit 2; }
[[ $RUN =~ ^[1-9][0-9]*$ ]] || { echo "clientlimit: seconds must be a positive integer, got '$RUN'" >&2; exit 2; }
command -v redis-server >/dev/null || { echo "clientlimit: redis-server is needed" >&2; exit 1; }

OUT=$ROOT/bench/out
mkdir -p "$OUT"
log=$(mktemp "${TMPDIR:-/tmp}/clientlimit.XXXXXX")
trap 'rm -f "$log"' EXIT

echo "clientlimit: $USERS users over 2 gateways for ${RUN}s" >&2
status=0
LOOPGATE_CLIENTLIMIT_USERS=$USERS LOOPGATE_CLIENTLIMIT_SECONDS=$RUN \
	go test -count=1 -timeout 10m -run '^TestClusterLimitPerUserAcrossGateways$' -v ./cmd/loopgate/ >"$log" 2>&1 || status=$?
{
	echo "# Per-client cluster limits: $USERS users, 2 gateways, ${RUN}s"
	echo
	echo "Load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo
	echo '```'
	sed -n 's/^ *clientlimit_test.go:[0-9]*: //p' "$log"
	echo '```'
} | tee "$OUT/clientlimit.md"
if ((status != 0)); then
	echo "clientlimit: the test failed:" >&2
	tail -40 "$log" >&2
fi
exit "$status"
