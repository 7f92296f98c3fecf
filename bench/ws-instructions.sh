#!/usr/bin/env bash
# ws-instructions.sh: the `make bench-ws-instructions` harness. What one
# WebSocket echo message costs a proxy, counted rather than timed, so it can
# be read on a busy machine: user-space instructions per message (valgrind's
# cachegrind, two runs of a fixed echo load whose difference cancels
# start-up and the tunnels' opening and closing) and, at full speed,
# syscalls and context switches per message of the proxy's threads (tracefs
# events when /sys/kernel/tracing is writable, else `strace -c -f`, which
# slows the proxy and so changes how its waits batch). For the current
# build, BASE when given (built in a temporary worktree) and nginx, each
# behind bench/cmd/wsbench's echoing upstream, the load 64 tunnels of
# bench/cmd/wsbench -mode echo -m. Written to bench/out/ws-instructions.md.
#
# Environment:
#   BASE          git revision to compare with (optional)
#   SHORT, LONG   round trips per tunnel of the two cachegrind runs (default 200, 1200)
#   TRACE_MSGS    round trips per tunnel of the syscall count (default 500)
#   WS_PROXIES    subset of: current base nginx (default: all that apply)
#   WS_COUNT      subset of: instructions syscalls (default both)
#   LOOPGATE_BIN  the current gateway binary (default bin/loopgate)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

BASE=${BASE:-}
SHORT=${SHORT:-200}
LONG=${LONG:-1200}
TRACE_MSGS=${TRACE_MSGS:-500}
CONNS=64
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
OUT=$ROOT/bench/out
[[ -x $LOOPGATE_BIN ]] || { log "${LOOPGATE_BIN#"$ROOT"/} missing (run \`make build\`)"; exit 1; }
command -v valgrind >/dev/null 2>&1 || { log "bench-ws-instructions needs valgrind"; exit 1; }
((LONG > SHORT)) || { log "LONG must exceed SHORT"; exit 2; }
PROXIES=" ${WS_PROXIES:-current ${BASE:+base} $(command -v nginx >/dev/null 2>&1 && echo nginx)} "
COUNT=" ${WS_COUNT:-instructions syscalls} "
TRACEFS=/sys/kernel/tracing
if mkdir -p "$TRACEFS/instances/loopgate-ws.$$" 2>/dev/null; then
	TRACE=$TRACEFS/instances/loopgate-ws.$$
	COUNTER=tracefs
else
	TRACE=""
	COUNTER="strace -c -f"
	command -v strace >/dev/null 2>&1 || { log "no writable tracefs and no strace"; exit 1; }
fi

cleanup_trace() { [[ -z $TRACE ]] || rmdir "$TRACE" 2>/dev/null || true; }

# ws.sh's proxy configs, without the idle part's descriptor headroom.
loopgate_conf() {
	cat >"$1" <<CONF
listen: 127.0.0.1:$2
admin: "off"
loops: 1
filters: []
metrics: {per_request: false}
upstreams:
  - {name: ws, nodes: ["127.0.0.1:$UPSTREAM_PORT"]}
routes:
  - {id: ws, prefix: /, upstream: ws}
CONF
}

nginx_conf() {
	local dir=$1 port=$2
	write_nginx_dirs "$dir"
	{
		# One process, so cachegrind follows the proxying itself.
		nginx_common "$dir" | sed 's/^worker_processes 1;/master_process off;/'
		echo "http {"
		nginx_http_common "$dir"
		cat <<CONF
    map \$http_upgrade \$connection_upgrade { default upgrade; '' close; }
    server {
        listen 127.0.0.1:$port;
        location / {
            proxy_pass http://127.0.0.1:$UPSTREAM_PORT;
            proxy_http_version 1.1;
            proxy_set_header Upgrade \$http_upgrade;
            proxy_set_header Connection \$connection_upgrade;
            proxy_read_timeout 3600s;
        }
    }
}
CONF
	} >"$dir/nginx.conf"
}

# start WHO PORT [WRAPPER...]: starts proxy WHO on PORT pinned to the proxy
# CPU, under WRAPPER; sets STARTED_PID.
start() {
	local who=$1 port=$2
	shift 2
	case $who in
	nginx)
		nginx_conf "$TMP/nginx-$port" "$port"
		start_pinned "nginx-$port" "$PROXY_CPU" "$@" nginx -p "$TMP/nginx-$port/" -c "$TMP/nginx-$port/nginx.conf" -e "$TMP/nginx-$port/logs/error.log"
		;;
	*)
		local bin=$LOOPGATE_BIN
		[[ $who == base ]] && bin=$TMP/bin/loopgate-base
		loopgate_conf "$TMP/$who-$port.yaml" "$port"
		start_pinned "$who-$port" "$PROXY_CPU" "$@" "$bin" -config "$TMP/$who-$port.yaml" -loops 1
		;;
	esac
	local i
	for i in $(seq 300); do
		"$TMP/bin/wsbench" -mode echo -addr "127.0.0.1:$port" -c 1 -m 1 >/dev/null 2>&1 && return 0
		sleep 0.2
	done
	log "$who did not start"
	exit 1
}

# echo_load PORT M: M round trips on each of the 64 tunnels.
echo_load() { pinned "$LOAD_CPU" "$TMP/bin/wsbench" -mode echo -addr "127.0.0.1:$1" -c "$CONNS" -m "$2" >/dev/null; }

# count WHO N: a cachegrind run echoing N round trips per tunnel after a
# warm-up; writes "Ir function" lines to $TMP/WHO-N.fn.
count() {
	local who=$1 n=$2 port
	port=$("$TMP/bin/freeport" -n 1)
	GOGC=off GODEBUG=asyncpreemptoff=1 start "$who" "$port" valgrind --tool=cachegrind --cache-sim=no \
		--cachegrind-out-file="$TMP/$who-$n.cg"
	local pid=$STARTED_PID
	echo_load "$port" 100
	echo_load "$port" "$n"
	kill -INT "$pid" # nginx: a fast shutdown; loopgate: a drain with nothing open
	wait "$pid" || true
	cg_annotate --auto=no --threshold=0 "$TMP/$who-$n.cg" 2>/dev/null | sed -n '/file:function/,$p' | grep '^ *[0-9]' |
		awk '{ir=$1; gsub(",","",ir); fn=$NF; if (fn ~ /^\[/) fn=$(NF-1); sub(/^[^:]*:/,"",fn); a[fn]+=ir} END{for (f in a) print a[f], f}' |
		sort -k2 >"$TMP/$who-$n.fn"
}

# instructions WHO: per-message Ir by function into $TMP/WHO.per; prints
# "own | total" (see below).
instructions() {
	count "$1" "$SHORT"
	count "$1" "$LONG"
	join -1 2 -2 2 -a1 -a2 -e0 -o 0,1.1,2.1 "$TMP/$1-$SHORT.fn" "$TMP/$1-$LONG.fn" |
		awk -v r=$(((LONG - SHORT) * CONNS)) '{printf "%.1f %s\n", ($3-$2)/r, $1}' | sort -k2 >"$TMP/$1.per"
	# As instructions.sh: the proxy's own code apart from the Go runtime's
	# scheduler and collector, which move with timing from run to run.
	awk '{ if ($2 ~ /^(runtime\.|sync\.|internal\/runtime|gcWriteBarrier)/ && $2 !~ /mem(move|eqbody|clr)|indexbytebody|mapaccess|memhash|aeshash/) r += $1; else u += $1 }
		END { printf "%.0f | %.0f\n", u, u + r }' "$TMP/$1.per"
}

# syscalls WHO: "name count" lines per message of the proxy's threads over
# TRACE_MSGS round trips per tunnel at full speed, then "switches N" (the
# threads' context switches, tracefs only) into $TMP/WHO.sys.
syscalls() {
	local who=$1 port pid tids n=$((TRACE_MSGS * CONNS))
	port=$("$TMP/bin/freeport" -n 1)
	start "$who" "$port"
	pid=$STARTED_PID
	echo_load "$port" 100
	tids=$(ls "/proc/$pid/task" | tr '\n' ' ')
	if [[ -n $TRACE ]]; then
		echo 65536 >"$TRACE/buffer_size_kb"
		echo "$tids" >"$TRACE/set_event_pid"
		: >"$TRACE/trace"
		echo 1 >"$TRACE/events/raw_syscalls/sys_enter/enable"
		echo 1 >"$TRACE/events/sched/sched_switch/enable"
		echo_load "$port" "$TRACE_MSGS"
		echo 0 >"$TRACE/events/raw_syscalls/sys_enter/enable"
		echo 0 >"$TRACE/events/sched/sched_switch/enable"
		awk -v n="$n" -v tids="$tids" -v names="$(syscall_names)" '
			BEGIN { split(tids, x, " "); for (i in x) mine[x[i]] = 1; split(names, y, " "); for (i = 1; i < length(y); i += 2) name[y[i]] = y[i+1] }
			/ sys_enter: / { k = split($1, a, "-"); if (!(a[k] in mine)) next; for (i = 1; i <= NF; i++) if ($i == "NR") c[$(i+1)]++ }
			/ sched_switch: / { for (i = 1; i <= NF; i++) if ($i ~ /^prev_pid=/) { split($i, p, "="); if (p[2] in mine) sw++ } }
			END { for (k in c) printf "%s %.3f\n", (k in name ? name[k] : "nr" k), c[k] / n; printf "switches %.3f\n", sw / n }' \
			"$TRACE/trace" | sort >"$TMP/$who.sys"
		echo >"$TRACE/set_event_pid"
		: >"$TRACE/trace"
	else
		strace -c -f -p "$pid" -o "$TMP/$who.strace" 2>/dev/null &
		local sp=$!
		sleep 1
		echo_load "$port" "$TRACE_MSGS"
		kill -INT "$sp"
		wait "$sp" || true
		awk -v n="$n" '$4 ~ /^[0-9]+$/ && $NF != "total" { printf "%s %.3f\n", $NF, $4 / n }' "$TMP/$who.strace" | sort >"$TMP/$who.sys"
	fi
	kill -TERM "$pid"
	wait "$pid" || true
}

# syscall_names prints "number name" pairs from the kernel headers, when
# installed (x86-64); without them syscalls are listed by number.
syscall_names() {
	local h=/usr/include/x86_64-linux-gnu/asm/unistd_64.h
	[[ -f $h ]] || return 0
	awk '/^#define __NR_[a-z0-9_]+[ \t]+[0-9]+/ { sub("__NR_", "", $2); printf "%s %s ", $3, $2 }' "$h"
}

main() {
	trap 'cleanup_trace; bench_cleanup' EXIT
	setup_pinning
	build_tools
	go build -o "$TMP/bin/" ./bench/cmd/wsbench
	[[ -n $BASE ]] && build_base
	UPSTREAM_PORT=$("$TMP/bin/freeport" -n 1)
	start_pinned ws-upstream "$LOAD_CPU" "$TMP/bin/wsbench" -mode upstream -listen "127.0.0.1:$UPSTREAM_PORT"
	local who ir=()
	for who in $PROXIES; do
		if [[ $COUNT == *" instructions "* ]]; then
			log "counting $who: instructions (cachegrind, $SHORT and $LONG round trips per tunnel)"
			ir+=("$who $(instructions "$who")")
		else
			ir+=("$who - | -")
		fi
		: >"$TMP/$who.sys"
		if [[ $COUNT == *" syscalls "* ]]; then
			log "counting $who: syscalls ($COUNTER, $TRACE_MSGS round trips per tunnel)"
			syscalls "$who"
		fi
	done
	mkdir -p "$OUT"
	{
		echo "One WebSocket echo message through the proxy, 64 tunnels, $(date -u '+%Y-%m-%d %H:%M UTC'), load average $(cut -d' ' -f1 /proc/loadavg):"
		echo "instructions per round trip (cachegrind, user space, all threads, $(((LONG - SHORT) * CONNS)) round trips;"
		echo "own code: all but the Go runtime's scheduler and collector, which vary with timing; for nginx all of it);"
		echo "syscalls and context switches per round trip ($COUNTER, $((TRACE_MSGS * CONNS)) round trips)."
		echo
		local names
		names=$(cat "$TMP"/*.sys | awk '$2 >= 0.005 { print $1 }' | sort -u | tr '\n' ' ')
		printf '| proxy | instructions: own code | with the Go runtime |'
		for n in $names; do printf ' %s |' "$n"; done
		echo
		printf '|---|---|---|'
		for n in $names; do printf -- '---|'; done
		echo
		local line
		for line in "${ir[@]}"; do
			who=${line%% *}
			printf '| %s | %s |' "${who/base/${BASE_NAME:-base}}" "${line#* }"
			for n in $names; do printf ' %s |' "$(awk -v k="$n" '$1 == k { v = $2 } END { print v == "" ? "0" : v }' "$TMP/$who.sys")"; done
			echo
		done
		for who in $PROXIES; do
			[[ $who == nginx || ! -f $TMP/$who.per ]] && continue
			echo
			echo "$who, the functions costing most per round trip:"
			echo
			echo '```'
			sort -g -r "$TMP/$who.per" | sed -n 1,40p # all of the input read: no SIGPIPE for pipefail
			echo '```'
		done
	} | tee "$OUT/ws-instructions.md"
	for who in $PROXIES; do
		if [[ -f $TMP/$who.per ]]; then cp "$TMP/$who.per" "$OUT/ws-instructions-$who.txt"; fi
	done
}

main "$@"
