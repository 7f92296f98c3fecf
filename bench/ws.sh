#!/usr/bin/env bash
# ws.sh: the `make bench-ws` harness. A WebSocket echo through Loopgate and
# through nginx (1 worker, the usual Upgrade/Connection proxying), on the
# same upstream (bench/cmd/wsbench -mode upstream, which echoes): round
# trips per second and the proxy's CPU per message (user+sys of the proxy
# process tree divided by the round trips) at WS_CONNS tunnels, WS_ROUNDS
# rounds each; then WS_IDLE idle tunnels through each and the proxy's RSS
# growth per tunnel (nginx: its worker's); then WS_FLOOD_MIB pushed through
# one tunnel to a 1 MiB/s reader and the proxy's peak RSS growth. Written
# to bench/out/ws.md (or ws-PARTS.md when WS_PARTS is a subset).
#
# Environment:
#   WS_PARTS      space-separated subset of: echo idle flood (default all three;
#                 `make bench` runs echo, `make bench-ws-slow` flood)
#   WS_PROXIES    space-separated subset of: loopgate nginx loopgate-loops
#                 loopgate-batch (default loopgate nginx); echo only:
#                 loopgate-loops is Loopgate run with GOMAXPROCS=1, the loops'
#                 count, instead of the binary's loops + 1; loopgate-batch is
#                 Loopgate under SCHED_BATCH (chrt -b 0), whose threads a
#                 wake-up does not let preempt the one running (docs/architecture.md)
#   WS_CONNS      concurrent tunnels of the echo rows (default 64)
#   WS_SECONDS    length of one echo run (default 10)
#   WS_ROUNDS     echo runs per proxy, alternating (default 3)
#   WS_IDLE       idle tunnels (default 10000)
#   WS_FLOOD_MIB  MiB pushed through one tunnel to an upstream reading 1 MiB/s
#                 (default 64; the issue's figure is 1024, which takes 17 minutes)
#   WS_RSS_LOG    flood: file that gets a "proxy seconds VmRSS_bytes" line a second
#   LOOPGATE_BIN  gateway binary (default bin/loopgate, built by `make build`)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

CONNS=${WS_CONNS:-64}
SECONDS_PER_RUN=${WS_SECONDS:-10}
ROUNDS=${WS_ROUNDS:-3}
IDLE=${WS_IDLE:-10000}
FLOOD=${WS_FLOOD_MIB:-64}
PARTS=" ${WS_PARTS:-echo idle flood} "
PROXIES=" ${WS_PROXIES:-loopgate nginx} "
RSS_LOG=${WS_RSS_LOG:-}
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
OUT=$ROOT/bench/out
[[ -x $LOOPGATE_BIN ]] || { log "${LOOPGATE_BIN#"$ROOT"/} missing; run \`make build\` first"; exit 1; }
for p in $PARTS; do
	[[ $p == echo || $p == idle || $p == flood ]] || { log "WS_PARTS: unknown part '$p'"; exit 2; }
done
for p in $PROXIES; do
	[[ $p == loopgate || $p == nginx || $p == loopgate-loops || $p == loopgate-batch ]] || { log "WS_PROXIES: unknown proxy '$p'"; exit 2; }
done
if [[ $PROXIES == *" nginx "* ]] && ! command -v nginx >/dev/null 2>&1; then
	log "nginx is needed for the comparison (or WS_PROXIES=loopgate)"
	exit 1
fi

# part NAME and proxy NAME report whether WS_PARTS / WS_PROXIES select it.
part() { [[ $PARTS == *" $1 "* ]]; }
proxy() { [[ $PROXIES == *" $1 "* ]]; }

write_ws_nginx_conf() {
	local dir=$1 port=$2 up=$3
	write_nginx_dirs "$dir"
	{
		nginx_common "$dir" | sed "s/worker_connections 4096/worker_connections $((2 * IDLE + 1024))/"
		echo "worker_rlimit_nofile $((2 * IDLE + 2048));"
		echo "http {"
		nginx_http_common "$dir"
		cat <<CONF
    map \$http_upgrade \$connection_upgrade { default upgrade; '' close; }
    server {
        listen 127.0.0.1:$port reuseport;
        location / {
            proxy_pass http://127.0.0.1:$up;
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

write_ws_loopgate_conf() {
	local file=$1 port=$2 up=$3
	cat >"$file" <<CONF
listen: 127.0.0.1:$port
admin: "off"
loops: 1
filters: []
metrics: {per_request: false}
limits: {max_connections: $((IDLE + 1024))}
websocket: {max_tunnels: $((IDLE + 1024))}
upstreams:
  - {name: ws, nodes: ["127.0.0.1:$up"]}
routes:
  - {id: ws, prefix: /, upstream: ws}
CONF
}

# echo_run NAME PID PORT prints "round_trips cpu_us_per_message".
echo_run() {
	local pid=$2 port=$3 t0 t1 n
	t0=$(cpu_ticks "$pid")
	n=$(pinned "$LOAD_CPU" "$TMP/bin/wsbench" -mode echo -addr "127.0.0.1:$port" -c "$CONNS" -d "${SECONDS_PER_RUN}s")
	t1=$(cpu_ticks "$pid")
	awk -v n="$n" -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%d %.2f\n", n, ticks * 1e6 / hz / n }'
}

main() {
	# A tunnel costs the proxy two descriptors; past the limit accept
	# pauses and the run would measure refused tunnels, so it stays under.
	ulimit -n $((2 * IDLE + 4096)) 2>/dev/null || ulimit -n "$(ulimit -Hn)"
	local fds
	fds=$(ulimit -n)
	if [[ $fds != unlimited ]] && ((2 * IDLE + 1024 > fds)); then
		IDLE=$(((fds - 1024) / 2))
		log "open-file limit is $fds; opening $IDLE idle tunnels instead"
	fi
	setup_pinning
	log "building bench tools"
	build_tools
	go build -o "$TMP/bin/" ./bench/cmd/wsbench
	local ports lg="" ng="" worker="" lp="" lb=""
	mapfile -t ports < <(free_ports 5)
	start_pinned ws-upstream "$LOAD_CPU" "$TMP/bin/wsbench" -mode upstream -listen "127.0.0.1:${ports[0]}"
	if proxy loopgate; then
		write_ws_loopgate_conf "$TMP/loopgate.yaml" "${ports[1]}" "${ports[0]}"
		start_loopgate loopgate "$TMP/loopgate.yaml" "$PROXY_CPU"
		lg=$STARTED_PID
		wait_ready loopgate "$lg" "${ports[1]}" || exit 1
	fi
	if proxy loopgate-loops; then
		write_ws_loopgate_conf "$TMP/loopgate-loops.yaml" "${ports[3]}" "${ports[0]}"
		GOMAXPROCS=1 start_loopgate loopgate-loops "$TMP/loopgate-loops.yaml" "$PROXY_CPU"
		lp=$STARTED_PID
		wait_ready loopgate-loops "$lp" "${ports[3]}" || exit 1
	fi
	if proxy loopgate-batch; then
		command -v chrt >/dev/null 2>&1 || { log "loopgate-batch needs chrt (util-linux)"; exit 1; }
		write_ws_loopgate_conf "$TMP/loopgate-batch.yaml" "${ports[4]}" "${ports[0]}"
		start_pinned loopgate-batch "$PROXY_CPU" chrt -b 0 "$LOOPGATE_BIN" -config "$TMP/loopgate-batch.yaml" -loops 1
		lb=$STARTED_PID
		wait_ready loopgate-batch "$lb" "${ports[4]}" || exit 1
	fi
	if proxy nginx; then
		write_ws_nginx_conf "$TMP/nginx-ws" "${ports[2]}" "${ports[0]}"
		start_nginx nginx-ws "$TMP/nginx-ws" "$PROXY_CPU"
		ng=$STARTED_PID
		wait_ready nginx "$ng" "${ports[2]}" || exit 1
		worker=$(pgrep -P "$ng" | head -1)
	fi

	local r lgr=() ngr=() lpr=() lbr=() lgi="" ngi="" lgf="" ngf=""
	if part echo; then
		for ((r = 1; r <= ROUNDS; r++)); do
			log "echo round $r of $ROUNDS: $CONNS tunnels, ${SECONDS_PER_RUN}s each"
			proxy loopgate && lgr+=("$(echo_run loopgate "$lg" "${ports[1]}")")
			proxy nginx && ngr+=("$(echo_run nginx "$ng" "${ports[2]}")")
			proxy loopgate-loops && lpr+=("$(echo_run loopgate-loops "$lp" "${ports[3]}")")
			proxy loopgate-batch && lbr+=("$(echo_run loopgate-batch "$lb" "${ports[4]}")")
		done
	fi
	if part idle; then
		log "opening $IDLE idle tunnels through each"
		proxy loopgate && lgi=$(pinned "$LOAD_CPU" "$TMP/bin/wsbench" -mode idle -addr "127.0.0.1:${ports[1]}" -n "$IDLE" -pid "$lg")
		proxy nginx && ngi=$(pinned "$LOAD_CPU" "$TMP/bin/wsbench" -mode idle -addr "127.0.0.1:${ports[2]}" -n "$IDLE" -pid "$worker")
	fi
	if part flood; then
		log "pushing $FLOOD MiB through one tunnel each to a 1 MiB/s reader"
		if [[ -n $RSS_LOG ]]; then
			mkdir -p "$(dirname "$RSS_LOG")"
			: >"$RSS_LOG"
		fi
		proxy loopgate && lgf=$(pinned "$LOAD_CPU" "$TMP/bin/wsbench" -mode flood -addr "127.0.0.1:${ports[1]}" -mib "$FLOOD" -pid "$lg" -log "${RSS_LOG:+$RSS_LOG}" -label loopgate)
		proxy nginx && ngf=$(pinned "$LOAD_CPU" "$TMP/bin/wsbench" -mode flood -addr "127.0.0.1:${ports[2]}" -mib "$FLOOD" -pid "$worker" -log "${RSS_LOG:+$RSS_LOG}" -label nginx)
	fi
	mkdir -p "$OUT"
	local name=ws
	[[ $PARTS != " echo idle flood " ]] && name=ws-$(echo $PARTS | tr ' ' '-')
	{
		echo "WebSocket tunnels, $(date -u '+%Y-%m-%d %H:%M UTC'): kernel $(uname -r), $CONNS tunnels, ${SECONDS_PER_RUN}s runs," \
			"nginx $(nginx_version) (1 worker), Loopgate 1 loop, $PINNING, load average $(load_average)."
		local n us open failed before after per secs peak
		if part echo; then
			echo
			echo "| proxy | round | round trips/s | CPU µs per message |"
			echo "|---|---|---|---|"
			for ((r = 0; r < ROUNDS; r++)); do
				if proxy loopgate; then
					read -r n us <<<"${lgr[r]}"
					echo "| loopgate | $((r + 1)) | $((n / SECONDS_PER_RUN)) | $us |"
				fi
				if proxy nginx; then
					read -r n us <<<"${ngr[r]}"
					echo "| nginx | $((r + 1)) | $((n / SECONDS_PER_RUN)) | $us |"
				fi
				if proxy loopgate-loops; then
					read -r n us <<<"${lpr[r]}"
					echo "| loopgate, GOMAXPROCS=1 | $((r + 1)) | $((n / SECONDS_PER_RUN)) | $us |"
				fi
				if proxy loopgate-batch; then
					read -r n us <<<"${lbr[r]}"
					echo "| loopgate, SCHED_BATCH | $((r + 1)) | $((n / SECONDS_PER_RUN)) | $us |"
				fi
			done
		fi
		if part idle; then
			echo
			echo "| proxy | idle tunnels open | failed | RSS before | RSS open | RSS per tunnel |"
			echo "|---|---|---|---|---|---|"
			if [[ -n $lgi ]]; then
				read -r open failed _ before after per <<<"$lgi"
				echo "| loopgate | $open | $failed | $((before >> 20)) MiB | $((after >> 20)) MiB | $per B |"
			fi
			if [[ -n $ngi ]]; then
				read -r open failed _ before after per <<<"$ngi"
				echo "| nginx (worker) | $open | $failed | $((before >> 20)) MiB | $((after >> 20)) MiB | $per B |"
			fi
		fi
		if part flood; then
			echo
			echo "| proxy | $FLOOD MiB to a 1 MiB/s reader: seconds | RSS before | peak RSS | growth |"
			echo "|---|---|---|---|---|"
			if [[ -n $lgf ]]; then
				read -r secs before peak <<<"$lgf"
				echo "| loopgate | $secs | $((before >> 10)) KiB | $((peak >> 10)) KiB | $(((peak - before) >> 10)) KiB |"
			fi
			if [[ -n $ngf ]]; then
				read -r secs before peak <<<"$ngf"
				echo "| nginx (worker) | $secs | $((before >> 10)) KiB | $((peak >> 10)) KiB | $(((peak - before) >> 10)) KiB |"
			fi
		fi
	} | tee "$OUT/$name.md"
}

main "$@"
