#!/usr/bin/env bash
# instructions.sh: the `make bench-instructions BASE=<rev>` harness. Counts
# the user-space instructions the gateway executes per keep-alive request,
# for BASE (built in a temporary git worktree) and the current build, with
# valgrind's cachegrind: deterministic, so it can be read on a busy machine
# where CPU-time ratios cannot. Each build serves bench/cmd/fixedload twice
# (SHORT and LONG requests per connection, 4 connections, after a warm-up);
# the difference of the two runs, divided by the extra requests, is the cost
# of a request without start-up. Prints, per build, the gateway's own code
# (everything but the Go runtime's scheduler and collector, which vary with
# timing from run to run) and the total, and the functions that differ most
# (also bench/out/instructions.md). See bench/README.md.
#
# Environment:
#   BASE          git revision to compare with (required)
#   SETUP         write_loopgate_config setup (default plain)
#   CLOSE         backend (or 1): the backend closes every connection
#                 after one response (bench-ab's close row), so each
#                 request costs a dial, an adoption and a close as well;
#                 client: every request comes on a connection of its own
#                 with Connection: close (fixedload -close), so each costs
#                 an accept and a close; default: neither
#   SHORT, LONG   requests per connection of the two runs (default 500, 3000)
#   LOOPGATE_BIN  the current gateway binary (default bin/loopgate)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

BASE=${BASE:-}
SETUP=${SETUP:-plain}
CLOSE=${CLOSE:-0}
[[ $CLOSE == 1 ]] && CLOSE=backend
[[ $CLOSE =~ ^(0|backend|client)$ ]] || { log "CLOSE must be backend or client, got '$CLOSE'"; exit 2; }
SHORT=${SHORT:-500}
LONG=${LONG:-3000}
CONNS=4
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
OUT=$ROOT/bench/out
[[ -n $BASE ]] || { log "BASE must name a git revision (make bench-instructions BASE=v0.1)"; exit 2; }
[[ -x $LOOPGATE_BIN ]] || { log "${LOOPGATE_BIN#"$ROOT"/} missing (run \`make build\`)"; exit 1; }
command -v valgrind >/dev/null 2>&1 || { log "bench-instructions needs valgrind"; exit 1; }
((LONG > SHORT)) || { log "LONG must exceed SHORT"; exit 2; }

# config WHO FILE PORT BACKEND: BASE gets the config its own lib.sh wrote.
config() {
	if [[ $1 == base && -f $TMP/base-lib.sh ]] &&
		(source "$TMP/base-lib.sh" && write_loopgate_config "$2" "$3" "$4" "$SETUP") 2>/dev/null; then
		return 0
	fi
	write_loopgate_config "$2" "$3" "$4" "$SETUP"
}

# count WHO BIN N: a cachegrind run serving N requests per connection;
# writes "Ir function" lines to $TMP/WHO-N.fn.
count() {
	local who=$1 bin=$2 n=$3 port
	port=$("$TMP/bin/freeport" -n 1)
	config "$who" "$TMP/$who.yaml" "$port" "$BACKEND_PORT"
	GOGC=off GODEBUG=asyncpreemptoff=1 valgrind --tool=cachegrind --cache-sim=no \
		--cachegrind-out-file="$TMP/$who-$n.cg" "$bin" -config "$TMP/$who.yaml" -loops 1 >"$TMP/$who-$n.log" 2>&1 &
	local pid=$!
	STARTED_PIDS+=("$pid")
	local i
	for i in $(seq 300); do
		curl -s -o /dev/null "http://127.0.0.1:$port/" && break
		sleep 0.2
	done
	# The default setup's routes want a JWT (bench-ab sends wrk's the same way).
	local auth=""
	[[ $SETUP == default ]] && auth="Authorization: Bearer $BENCH_JWT"
	local each=()
	[[ $CLOSE == client ]] && each=(-close)
	"$TMP/bin/fixedload" -addr "127.0.0.1:$port" -n 300 -c "$CONNS" -H "$auth" "${each[@]}"
	"$TMP/bin/fixedload" -addr "127.0.0.1:$port" -n "$n" -c "$CONNS" -H "$auth" "${each[@]}"
	kill -INT "$pid"
	wait "$pid" || true
	cg_annotate --auto=no --threshold=0 "$TMP/$who-$n.cg" 2>/dev/null | sed -n '/file:function/,$p' | grep '^ *[0-9]' |
		awk '{ir=$1; gsub(",","",ir); fn=$NF; if (fn ~ /^\[/) fn=$(NF-1); sub(/^[^:]*:/,"",fn); a[fn]+=ir} END{for (f in a) print a[f], f}' |
		sort -k2 >"$TMP/$who-$n.fn"
}

# per WHO BIN: per-request Ir by function into $TMP/WHO.per.
per() {
	count "$1" "$2" "$SHORT"
	count "$1" "$2" "$LONG"
	join -1 2 -2 2 -a1 -a2 -e0 -o 0,1.1,2.1 "$TMP/$1-$SHORT.fn" "$TMP/$1-$LONG.fn" |
		awk -v r=$(((LONG - SHORT) * CONNS)) '{printf "%.1f %s\n", ($3-$2)/r, $1}' | sort -k2 >"$TMP/$1.per"
}

# sums WHO: "own total" instructions per request.
sums() {
	awk '{ if ($2 ~ /^(runtime\.|sync\.|internal\/runtime|gcWriteBarrier)/ && $2 !~ /mem(move|eqbody|clr)|indexbytebody|mapaccess|memhash|aeshash/) r += $1; else u += $1 }
		END { printf "%.0f %.0f\n", u, u + r }' "$TMP/$1.per"
}

main() {
	build_tools
	go build -o "$TMP/bin/" ./bench/cmd/fixedload
	build_base
	BACKEND_PORT=$("$TMP/bin/freeport" -n 1)
	local close_flag=()
	[[ $CLOSE == backend ]] && close_flag=(-close)
	start_pinned backend "" "$TMP/bin/backend" -addr "127.0.0.1:$BACKEND_PORT" "${close_flag[@]}"
	wait_ready backend "$STARTED_PID" "$BACKEND_PORT" || exit 1
	log "counting $BASE_NAME"
	per base "$TMP/bin/loopgate-base"
	log "counting the current build"
	per current "$LOOPGATE_BIN"
	local bo bt co ct
	read -r bo bt < <(sums base)
	read -r co ct < <(sums current)
	mkdir -p "$OUT"
	{
		local backend="keep-alive clients and backend"
		[[ $CLOSE == backend ]] && backend="backend closing every connection"
		[[ $CLOSE == client ]] && backend="a connection per request (Connection: close)"
		echo "Instructions per request (cachegrind, setup $SETUP, $backend, $(((LONG - SHORT) * CONNS)) requests), $(date -u '+%Y-%m-%d %H:%M UTC'):"
		echo
		echo "| build | gateway code | with the Go runtime |"
		echo "|---|---|---|"
		echo "| $BASE_NAME | $bo | $bt |"
		echo "| current | $co ($(awk -v a="$co" -v b="$bo" 'BEGIN{printf "%.3f", a/b}')×) | $ct ($(awk -v a="$ct" -v b="$bt" 'BEGIN{printf "%.3f", a/b}')×) |"
		echo
		echo "Largest differences per request (current - base, base, current, function):"
		echo
		echo '```'
		join -1 2 -2 2 -a1 -a2 -e0 -o 0,1.1,2.1 "$TMP/base.per" "$TMP/current.per" |
			awk '{d=$3-$2; if (d*d >= 100) printf "%8.1f %8.1f %8.1f %s\n", d, $2, $3, $1}' | sort -g >"$TMP/diff.txt"
		head -15 "$TMP/diff.txt"
		echo ...
		tail -30 "$TMP/diff.txt"
		echo '```'
	} | tee "$OUT/instructions.md"
}

main "$@"
