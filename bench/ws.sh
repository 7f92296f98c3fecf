#!/usr/bin/env bash
# ws.sh: the `make bench-ws` harness. A WebSocket echo through Loopgate and
# through nginx (1 worker, the usual Upgrade/Connection proxying), on the
# same upstream (bench/cmd/wsbench -mode upstream, which echoes): round
# trips per second and the proxy's CPU per message (user+sys of the proxy
# process tree divided by the round trips) at WS_CONNS tunnels, WS_ROUNDS
# rounds each; then WS_IDLE idle tunnels through each and the proxy's RSS
# growth per tunnel (nginx: its worker's). Written to bench/out/ws.md.
#
# Environment:
#   WS_CONNS      concurrent tunnels of the echo rows (default 64)
#   WS_SECONDS    length of one echo run (default 10)
#   WS_ROUNDS     echo runs per proxy, alternating (default 3)
#   WS_IDLE       idle tunnels (default 10000)
#   WS_FLOOD_MIB  MiB pushed through one tunnel to an upstream reading 1 MiB/s
#                 (default 64; the issue's figure is 1024, which takes 17 minutes)
#   LOOPGATE_BIN  gateway binary (default bin/loopgate, built by `make build`)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

CONNS=${WS_CONNS:-64}
SECONDS_PER_RUN=${WS_SECONDS:-10}
ROUNDS=${WS_ROUNDS:-3}
IDLE=${WS_IDLE:-10000}
FLOOD=${WS_FLOOD_MIB:-64}
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
OUT=$ROOT/bench/out
[[ -x $LOOPGATE_BIN ]] || { log "${LOOPGATE_BIN#"$ROOT"/} missing; run \`make build\` first"; exit 1; }
command -v nginx >/dev/null 2>&1 || { log "nginx is needed for the comparison"; exit 1; }

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
	local ports
	mapfile -t ports < <(free_ports 3)
	start_pinned ws-upstream "$LOAD_CPU" "$TMP/bin/wsbench" -mode upstream -listen "127.0.0.1:${ports[0]}"
	write_ws_loopgate_conf "$TMP/loopgate.yaml" "${ports[1]}" "${ports[0]}"
	start_loopgate loopgate "$TMP/loopgate.yaml" "$PROXY_CPU"
	local lg=$STARTED_PID
	write_ws_nginx_conf "$TMP/nginx-ws" "${ports[2]}" "${ports[0]}"
	start_nginx nginx-ws "$TMP/nginx-ws" "$PROXY_CPU"
	local ng=$STARTED_PID
	wait_ready loopgate "$lg" "${ports[1]}" || exit 1
	wait_ready nginx "$ng" "${ports[2]}" || exit 1

	local rows=() r lgr=() ngr=()
	for ((r = 1; r <= ROUNDS; r++)); do
		log "echo round $r of $ROUNDS: $CONNS tunnels, ${SECONDS_PER_RUN}s each"
		lgr+=("$(echo_run loopgate "$lg" "${ports[1]}")")
		ngr+=("$(echo_run nginx "$ng" "${ports[2]}")")
	done
	local worker
	worker=$(pgrep -P "$ng" | head -1)
	log "opening $IDLE idle tunnels through each"
	local lgi ngi
	lgi=$(pinned "$LOAD_CPU" "$TMP/bin/wsbench" -mode idle -addr "127.0.0.1:${ports[1]}" -n "$IDLE" -pid "$lg")
	ngi=$(pinned "$LOAD_CPU" "$TMP/bin/wsbench" -mode idle -addr "127.0.0.1:${ports[2]}" -n "$IDLE" -pid "$worker")
	log "pushing $FLOOD MiB through one tunnel each to a 1 MiB/s reader"
	local lgf ngf
	lgf=$(pinned "$LOAD_CPU" "$TMP/bin/wsbench" -mode flood -addr "127.0.0.1:${ports[1]}" -mib "$FLOOD" -pid "$lg")
	ngf=$(pinned "$LOAD_CPU" "$TMP/bin/wsbench" -mode flood -addr "127.0.0.1:${ports[2]}" -mib "$FLOOD" -pid "$worker")
	mkdir -p "$OUT"
	{
		echo "WebSocket tunnels, $(date -u '+%Y-%m-%d %H:%M UTC'): kernel $(uname -r), $CONNS tunnels, ${SECONDS_PER_RUN}s runs," \
			"nginx $(nginx_version) (1 worker), Loopgate 1 loop, $PINNING, load average $(load_average)."
		echo
		echo "| proxy | round | round trips/s | CPU µs per message |"
		echo "|---|---|---|---|"
		for ((r = 0; r < ROUNDS; r++)); do
			read -r n us <<<"${lgr[r]}"
			echo "| loopgate | $((r + 1)) | $((n / SECONDS_PER_RUN)) | $us |"
			read -r n us <<<"${ngr[r]}"
			echo "| nginx | $((r + 1)) | $((n / SECONDS_PER_RUN)) | $us |"
		done
		echo
		echo "| proxy | idle tunnels open | failed | RSS before | RSS open | RSS per tunnel |"
		echo "|---|---|---|---|---|---|"
		read -r open failed _ before after per <<<"$lgi"
		echo "| loopgate | $open | $failed | $((before >> 20)) MiB | $((after >> 20)) MiB | $per B |"
		read -r open failed _ before after per <<<"$ngi"
		echo "| nginx (worker) | $open | $failed | $((before >> 20)) MiB | $((after >> 20)) MiB | $per B |"
		echo
		echo "| proxy | $FLOOD MiB to a 1 MiB/s reader: seconds | RSS before | peak RSS | growth |"
		echo "|---|---|---|---|---|"
		read -r secs before peak <<<"$lgf"
		echo "| loopgate | $secs | $((before >> 10)) KiB | $((peak >> 10)) KiB | $(((peak - before) >> 10)) KiB |"
		read -r secs before peak <<<"$ngf"
		echo "| nginx (worker) | $secs | $((before >> 10)) KiB | $((peak >> 10)) KiB | $(((peak - before) >> 10)) KiB |"
	} | tee "$OUT/ws.md"
}

main "$@"
