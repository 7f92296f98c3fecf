# Shared helpers for bench/run.sh and bench/idle.sh: tools, ports, process
# lifetime, readiness probes, CPU accounting and the config writers.
# Sourced, never run. Callers use `set -euo pipefail` and call bench_init first.

# bench_init sets ROOT, TMP and the process registry, and installs the trap
# that kills everything started through start_pinned when the script exits.
bench_init() {
	ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
	TMP=$(mktemp -d "${TMPDIR:-/tmp}/loopgate-bench.XXXXXX")
	# nginx workers drop to an unprivileged user when started as root; they
	# must be able to reach their temp paths under $TMP.
	chmod 755 "$TMP"
	STARTED_PIDS=()
	trap bench_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	cd "$ROOT"
}

# bench_cleanup stops every started process tree: TERM first, KILL after 3 s.
bench_cleanup() {
	local rc=$? pid all=() i
	trap - EXIT INT TERM
	for pid in "${STARTED_PIDS[@]}"; do
		# Collect descendants before the parent goes, so orphans are found too.
		all+=($(process_tree "$pid"))
	done
	for pid in "${STARTED_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for i in $(seq 30); do
		local alive=0
		for pid in "${all[@]}"; do
			kill -0 "$pid" 2>/dev/null && alive=1
		done
		((alive)) || break
		sleep 0.1
	done
	for pid in "${all[@]}"; do
		kill -KILL "$pid" 2>/dev/null || true
	done
	for pid in "${STARTED_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$TMP"
	exit "$rc"
}

# log writes a progress line to stderr, keeping stdout for the report.
log() {
	printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2
}

# ensure_wrk installs wrk through apt when it is missing (fresh CI machines).
ensure_wrk() {
	command -v wrk >/dev/null 2>&1 && return 0
	log "wrk not found; installing it with apt-get"
	local apt=(env DEBIAN_FRONTEND=noninteractive apt-get)
	[[ $(id -u) -eq 0 ]] || apt=(sudo "${apt[@]}")
	"${apt[@]}" install -y wrk >&2 ||
		{ "${apt[@]}" update >&2 && "${apt[@]}" install -y wrk >&2; }
	command -v wrk >/dev/null 2>&1 || { log "wrk is still missing; cannot benchmark"; exit 1; }
}

# build_tools builds the helper commands into $TMP/bin.
build_tools() {
	mkdir -p "$TMP/bin"
	go build -o "$TMP/bin/" ./bench/cmd/freeport ./bench/cmd/backend ./bench/cmd/idleconns ./bench/cmd/tlsload
}

# free_ports N prints N distinct free loopback ports, one per line.
free_ports() {
	"$TMP/bin/freeport" -n "$1"
}

# build_base builds BASE's cmd/loopgate into $TMP/bin/loopgate-base from a
# detached worktree, keeps its bench/lib.sh as $TMP/base-lib.sh (its own
# config writer, for a schema that changed since) and removes the worktree
# again. It sets BASE_COMMIT and BASE_NAME.
build_base() {
	BASE_COMMIT=$(git rev-parse --verify --quiet "$BASE^{commit}") ||
		{ log "BASE '$BASE' is not a commit in this repository"; exit 2; }
	BASE_NAME="$BASE ($(git rev-parse --short "$BASE_COMMIT"))"
	local src=$TMP/base-src
	log "building $BASE_NAME in a temporary worktree"
	git worktree add --detach --quiet "$src" "$BASE_COMMIT"
	local rc=0
	(cd "$src" && go build -o "$TMP/bin/loopgate-base" ./cmd/loopgate) || rc=$?
	[[ -f $src/bench/lib.sh ]] && cp "$src/bench/lib.sh" "$TMP/base-lib.sh"
	git worktree remove --force "$src"
	((rc == 0)) || { log "building $BASE_NAME failed"; exit 1; }
}

# setup_pinning decides the CPUs: proxy on CPU 0, backend and load generator
# on CPU 1. With fewer than two CPUs or no taskset nothing is pinned.
setup_pinning() {
	if command -v taskset >/dev/null 2>&1 && (($(nproc) >= 2)); then
		PROXY_CPU=0
		LOAD_CPU=1
		PINNING="proxy on CPU 0, backend and wrk on CPU 1"
	else
		PROXY_CPU=""
		LOAD_CPU=""
		PINNING="not pinned (needs taskset and 2 CPUs)"
	fi
}

# pinned CPU CMD... runs CMD pinned to CPU, or unpinned when CPU is empty.
pinned() {
	local cpu=$1
	shift
	if [[ -n $cpu ]]; then
		taskset -c "$cpu" "$@"
	else
		"$@"
	fi
}

# start_pinned NAME CPU CMD... starts CMD in the background, output to
# $TMP/NAME.log, and registers it for cleanup. The pid is left in STARTED_PID.
start_pinned() {
	local name=$1 cpu=$2
	shift 2
	local cmd=("$@")
	[[ -z $cpu ]] || cmd=(taskset -c "$cpu" "$@")
	# A simple command, not a function: backgrounded, it is exec'd (and
	# taskset execs the program), so $! is the program itself.
	"${cmd[@]}" >"$TMP/$name.log" 2>&1 &
	STARTED_PID=$!
	STARTED_PIDS+=("$STARTED_PID")
}

# probe_http PORT succeeds when GET / on the port answers 200 with the
# benchmark body, so a proxy that answers fast but wrongly is caught here.
probe_http() {
	local port=$1 fd reply
	# The group scopes the 2>/dev/null; on exec itself it would silence the script.
	{ exec {fd}<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null || return 1
	printf 'GET / HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n' "$port" "$BENCH_JWT" >&"$fd"
	reply=$(timeout 2 cat <&"$fd" 2>/dev/null || true)
	exec {fd}>&-
	[[ $reply == HTTP/1.?" 200"* && $reply == *"hello world"* ]]
}

# wait_ready NAME PID PORT [SECONDS] waits up to SECONDS (default 10) for
# the process to answer the probe (probe_http, or the function named by
# PROBE, such as probe_https). On failure it prints the tail of the process
# log and returns 1.
wait_ready() {
	local name=$1 pid=$2 port=$3 secs=${4:-10} i probe=${PROBE:-probe_http}
	for i in $(seq $((secs * 10))); do
		if ! kill -0 "$pid" 2>/dev/null; then
			log "$name exited during startup; log tail:"
			tail -n 20 "$TMP/$name.log" >&2 || true
			return 1
		fi
		"$probe" "$port" && return 0
		sleep 0.1
	done
	log "$name did not answer 200 \"hello world\" on port $port within $secs s; log tail:"
	tail -n 20 "$TMP/$name.log" >&2 || true
	return 1
}

# process_tree PID prints PID and all its descendants, if PID is alive.
# Plain bash, not awk: processes exit while /proc is read, and mawk gives up
# on the first file it cannot open.
process_tree() {
	local root=$1 f line pid ppid grew
	local -A parent=() in_tree=()
	for f in /proc/[0-9]*/stat; do
		{ read -r line <"$f"; } 2>/dev/null || continue
		pid=${line%% *}
		read -r _ ppid _ <<<"${line##*) }" # comm may hold spaces and parens
		parent[$pid]=$ppid
	done
	[[ -n ${parent[$root]:-} ]] || return 0
	in_tree[$root]=1
	grew=1
	while ((grew)); do
		grew=0
		for pid in "${!parent[@]}"; do
			if [[ -z ${in_tree[$pid]:-} && -n ${in_tree[${parent[$pid]}]:-} ]]; then
				in_tree[$pid]=1
				grew=1
			fi
		done
	done
	printf '%s\n' "${!in_tree[@]}"
}

# cpu_ticks PID prints utime+stime in clock ticks of PID and its descendants.
# /proc/PID/stat already totals all threads of a process; descendants matter
# for nginx, whose worker is a child of the master.
cpu_ticks() {
	local total=0 pid line fields
	for pid in $(process_tree "$1"); do
		{ read -r line <"/proc/$pid/stat"; } 2>/dev/null || continue
		line=${line##*) }
		read -r -a fields <<<"$line"
		# After the comm field: [0]=state ... [11]=utime [12]=stime.
		total=$((total + fields[11] + fields[12]))
	done
	echo "$total"
}

# version lines for the report header; empty when the tool is absent.
nginx_version() { command -v nginx >/dev/null 2>&1 && nginx -v 2>&1 | sed -n 's|.*nginx/||p' || true; }
haproxy_version() { command -v haproxy >/dev/null 2>&1 && haproxy -v 2>/dev/null | awk 'NR==1 {print $3}' || true; }
wrk_version() { wrk -v 2>&1 | awk 'NR==1 {print $2}' || true; }

# write_nginx_dirs DIR creates an nginx prefix with private temp paths.
write_nginx_dirs() {
	mkdir -p "$1/logs" "$1/tmp"
}

# nginx_common DIR prints the main-context lines shared by both nginx roles.
nginx_common() {
	local dir=$1
	cat <<EOF
worker_processes 1;
daemon off;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
events { worker_connections 4096; }
EOF
}

# nginx_http_common DIR prints the http-context lines shared by both roles.
nginx_http_common() {
	local dir=$1
	cat <<EOF
    access_log off;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
EOF
}

# write_nginx_backend_conf DIR PORT: one worker answering 12 bytes, and
# the 4 KiB JSON of bench/cmd/backend at /json.
write_nginx_backend_conf() {
	local dir=$1 port=$2
	write_nginx_dirs "$dir"
	mkdir -p "$dir/www" && "$TMP/bin/backend" -print-json >"$dir/www/json"
	{
		nginx_common "$dir"
		echo "http {"
		nginx_http_common "$dir"
		cat <<EOF
    server {
        listen 127.0.0.1:$port;
        location / {
            default_type text/plain;
            return 200 "hello world\n";
        }
        location = /json {
            root $dir/www;
            default_type application/json;
        }
    }
}
EOF
	} >"$dir/nginx.conf"
}

# write_nginx_proxy_conf DIR PORT BACKEND_PORT: one worker, keep-alive
# upstream, tuned as an operator would: reuseport on the listener and an
# upstream pool of 128 idle connections (the usual recommendation; with 64
# a -c64 load can find the pool momentarily short and dial).
write_nginx_proxy_conf() {
	local dir=$1 port=$2 backend=$3
	write_nginx_dirs "$dir"
	{
		nginx_common "$dir"
		echo "http {"
		nginx_http_common "$dir"
		cat <<EOF
    upstream backend {
        server 127.0.0.1:$backend;
        keepalive 128;
        keepalive_requests 10000000;
        keepalive_timeout 300s;
    }
    server {
        listen 127.0.0.1:$port reuseport;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
	} >"$dir/nginx.conf"
}

# start_nginx NAME DIR CPU starts nginx on a config written by the writers above.
start_nginx() {
	local name=$1 dir=$2 cpu=$3
	start_pinned "$name" "$cpu" nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/logs/error.log"
}

# write_haproxy_conf FILE PORT BACKEND_PORT: one thread, connection reuse, no logs.
write_haproxy_conf() {
	local file=$1 port=$2 backend=$3
	cat >"$file" <<EOF
global
    nbthread 1
    maxconn 4096

defaults
    mode http
    option http-keep-alive
    http-reuse always
    timeout connect 5s
    timeout client 300s
    timeout server 300s
    timeout http-keep-alive 300s

frontend bench
    bind 127.0.0.1:$port
    default_backend backend

backend backend
    http-reuse always
    server s1 127.0.0.1:$backend maxconn 64
EOF
}

# BENCH_JWT is an HS256 token (secret "bench-secret", exp 2100) that every
# wrk run sends, so all proxies see the same request bytes and the default
# chain's auth check passes from its warm cache.
BENCH_JWT=eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJiZW5jaC11c2VyIiwiaXNzIjoibG9vcGdhdGUtYmVuY2giLCJhdWQiOiJhcGkiLCJleHAiOjQxMDI0NDQ4MDAsInJvbGVzIjpbInVzZXIiXX0.8v9qgL5WcrLLxZFFc8kuCEN-Lc_u_nQVxxwrOYJK170

# write_loopgate_config FILE PORT BACKEND_PORT SETUP writes a Loopgate config
# for one bench row. SETUP is one of:
#   plain      no filters, per-request metrics off: the bare proxy path
#   metrics    plain with the per-request route metrics on (the default)
#   accesslog  plain with the access log written to $TMP/access-PORT.log
#   default    the default filter chain, metrics on
#   ratelimit  plain with a local rate limit on ip, far above the load
#   resilience plain with a circuit breaker and slow-call isolation on every
#              route (the one line that enables each)
#   cluster    plain with a cluster rate limit on global through Redis on
#              $REDIS_PORT, leased, far above the load
#   respbody   plain with response_body masking two fields (one in every
#              item), removing one and wrapping the body
#   trace      plain with trace_context on: wrk sends no traceparent, so
#              every request starts a sampled trace (two header edits)
write_loopgate_config() {
	local file=$1 port=$2 backend=$3 setup=$4
	cat >"$file" <<EOF
# Written by bench/lib.sh write_loopgate_config (setup: $setup).
listen: 127.0.0.1:$port
admin: "off"
loops: 1
pin: false
upstreams:
  - name: backend
    nodes: ["127.0.0.1:$backend"]
    max_idle: 64
routes:
  - id: root-exact
    path: /
    upstream: backend
  - id: root-prefix
    prefix: /
    upstream: backend
EOF
	case $setup in
	plain)
		printf 'filters: []\nmetrics: {per_request: false}\n' >>"$file"
		;;
	metrics)
		echo "filters: []" >>"$file"
		;;
	accesslog)
		printf 'filters: []\nmetrics: {per_request: false}\naccess_log: {path: %s}\n' "$TMP/access-$port.log" >>"$file"
		;;
	default)
		# The default chain: request ID, forwarded headers, IP allow list and
		# a JWT check (warm cache: wrk repeats one token, BENCH_JWT).
		sed -i 's/^    upstream: backend$/    upstream: backend\n    auth: required/' "$file"
		cat >>"$file" <<EOF
filters: [request_id, ip_access, forwarded]
ip_allow: ["127.0.0.0/8"]
auth:
  jwt: {hs256_secret: bench-secret, issuer: loopgate-bench, audience: api}
EOF
		;;
	ratelimit)
		sed -i 's/^    upstream: backend$/    upstream: backend\n    rate_limits: [{key: ip, rate: 10000000, burst: 1000000}]/' "$file"
		printf 'filters: []\nmetrics: {per_request: false}\n' >>"$file"
		;;
	resilience)
		printf 'filters: []\nmetrics: {per_request: false}\ncircuit_breaker: {}\nisolation: {}\n' >>"$file"
		;;
	respbody)
		sed -i 's/^    upstream: backend$/    upstream: backend\n    response_body: {mask: [{path: $.user.phone, keep_last: 4}, {path: "$.items[*].card", keep_last: 4}], remove: [$.user.email], envelope: '"'"'{"code":0,"data":<body>}'"'"'}/' "$file"
		printf 'filters: []\nmetrics: {per_request: false}\n' >>"$file"
		;;
	cluster)
		sed -i 's/^    upstream: backend$/    upstream: backend\n    rate_limits: [{key: global, rate: 1000000, burst: 1000000, scope: cluster}]/' "$file"
		printf 'filters: []\nmetrics: {per_request: false}\nredis: {addrs: ["127.0.0.1:%s"]}\ncluster: {node_id: bench}\n' "$REDIS_PORT" >>"$file"
		;;
	trace)
		printf 'filters: [trace_context]\nmetrics: {per_request: false}\ntrace_context: {}\n' >>"$file"
		;;
	*)
		log "write_loopgate_config: unknown setup '$setup'"
		return 1
		;;
	esac
}

# start_redis PORT starts redis-server pinned to LOAD_CPU, without
# persistence, for the cluster rate-limit row. Fails when it is not
# installed or does not come up.
start_redis() {
	local port=$1 i
	command -v redis-server >/dev/null 2>&1 || return 1
	start_pinned redis "$LOAD_CPU" redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no
	for i in $(seq 50); do
		redis-cli -p "$port" ping 2>/dev/null | grep -q PONG && return 0
		sleep 0.1
	done
	return 1
}

# start_loopgate NAME CONFIG CPU starts bin/loopgate (or $LOOPGATE_BIN).
start_loopgate() {
	local name=$1 config=$2 cpu=$3
	start_pinned "$name" "$cpu" "$LOOPGATE_BIN" -config "$config" -loops 1
}

# start_backend PORT starts the benchmark backend pinned to LOAD_CPU: nginx
# when installed and working, else bench/cmd/backend. Sets BACKEND_KIND and
# BACKEND_PID.
start_backend() {
	local port=$1
	if command -v nginx >/dev/null 2>&1; then
		write_nginx_backend_conf "$TMP/nginx-backend" "$port"
		start_nginx nginx-backend "$TMP/nginx-backend" "$LOAD_CPU"
		BACKEND_PID=$STARTED_PID
		if wait_ready nginx-backend "$BACKEND_PID" "$port"; then
			BACKEND_KIND="nginx $(nginx_version) (1 worker)"
			return 0
		fi
		log "nginx backend failed; falling back to bench/cmd/backend"
		kill -TERM "$BACKEND_PID" 2>/dev/null || true
		wait "$BACKEND_PID" 2>/dev/null || true
	fi
	start_pinned go-backend "$LOAD_CPU" "$TMP/bin/backend" -addr "127.0.0.1:$port"
	BACKEND_PID=$STARTED_PID
	wait_ready go-backend "$BACKEND_PID" "$port" || { log "no working backend"; exit 1; }
	BACKEND_KIND="bench/cmd/backend (Go, raw TCP)"
}

# parse_wrk FILE prints: requests req/s p50_ms p99_ms non2xx and the socket
# errors connect read write timeout
# (NA for a figure wrk did not print).
parse_wrk() {
	awk '
		function ms(v,   n, u) {
			n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
			if (u == "us") return n / 1000
			if (u == "ms") return n
			if (u == "s")  return n * 1000
			if (u == "m")  return n * 60000
			if (u == "h")  return n * 3600000
			return "NA"
		}
		function or_na(v) { return v == "" ? "NA" : v }
		$1 == "50%"              { p50 = ms($2) }
		$1 == "99%"              { p99 = ms($2) }
		/ requests in /          { req = $1 }
		$1 == "Requests/sec:"    { rps = $2 }
		/Socket errors:/         { sc = $4 + 0; sr = $6 + 0; sw = $8 + 0; st = $10 + 0 }
		/Non-2xx or 3xx/         { non2xx = $NF }
		END {
			printf "%s %s %s %s %d %d %d %d %d\n", or_na(req), or_na(rps), or_na(p50), or_na(p99),
				non2xx, sc, sr, sw, st
		}
	' "$1"
}

# load_average prints the 1-minute load average: how busy the shared machine was.
load_average() {
	cut -d' ' -f1 /proc/loadavg
}

# median reads numbers (one per line, NA ignored) and prints their median.
median() {
	{ grep -v '^NA$' || true; } | sort -g | awk '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print "NA"; exit }
			print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		}'
}

# column KEY N prints field N of every results line for KEY.
column() {
	awk -v k="$1" -v n="$2" '$2 == k { print $n }' "$RAW/results.txt"
}

# fmt FORMAT VALUE formats a number, passing NA through as a dash.
fmt() {
	if [[ $2 == NA ]]; then echo "—"; else printf "$1" "$2"; fi
}

# TLS helpers for bench/tls.sh. Every TLS target serves one certificate:
# ECDSA P-256, self-signed for bench.test, made with openssl in $TMP.

# write_bench_cert writes $TMP/bench.pem and $TMP/bench.key (PKCS#8).
write_bench_cert() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes \
		-keyout "$TMP/bench.key" -out "$TMP/bench.pem" -days 90 -subj /CN=bench.test \
		-addext subjectAltName=DNS:bench.test 2>/dev/null
}

# probe_https PORT: as probe_http, over TLS (the certificate is not checked).
probe_https() {
	local reply
	reply=$(curl -sk --max-time 2 --resolve "bench.test:$1:127.0.0.1" "https://bench.test:$1/" 2>/dev/null) || return 1
	[[ $reply == *"hello world"* ]]
}

# nginx_ssl_server_lines prints the TLS lines of an nginx server block: the
# bench certificate, TLS 1.2 and 1.3 with Mozilla's intermediate TLS 1.2
# suites (Loopgate's), and resumption by session cache and tickets.
nginx_ssl_server_lines() {
	cat <<EOF
        ssl_certificate $TMP/bench.pem;
        ssl_certificate_key $TMP/bench.key;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305;
        ssl_session_cache shared:SSL:10m;
        ssl_session_timeout 1d;
        ssl_session_tickets on;
EOF
}

# with_ssl_listener FILE: adds " ssl" to the listen line of an nginx config
# written by the writers above, and the TLS lines after it.
with_ssl_listener() {
	local file=$1 lines
	lines=$(nginx_ssl_server_lines)
	awk -v tls="$lines" '/^        listen / { sub(/ reuseport;$/, " ssl reuseport;"); if ($0 !~ / ssl/) sub(/;$/, " ssl;"); print; print tls; next } { print }' \
		"$file" >"$file.new"
	mv "$file.new" "$file"
}

# write_nginx_tls_proxy_conf DIR PORT BACKEND_PORT: the nginx proxy of
# write_nginx_proxy_conf with an HTTPS listener.
write_nginx_tls_proxy_conf() {
	write_nginx_proxy_conf "$@"
	with_ssl_listener "$1/nginx.conf"
}

# write_nginx_tls_backend_conf DIR PORT: the backend of
# write_nginx_backend_conf, over TLS.
write_nginx_tls_backend_conf() {
	write_nginx_backend_conf "$@"
	with_ssl_listener "$1/nginx.conf"
}

# write_nginx_upstream_tls_conf DIR PORT BACKEND_PORT: the nginx proxy of
# write_nginx_proxy_conf speaking TLS to the backend, verifying it as
# Loopgate does (name bench.test, the bench certificate as the CA) and
# reusing sessions.
write_nginx_upstream_tls_conf() {
	write_nginx_proxy_conf "$@"
	sed -i "s|proxy_pass http://backend;|proxy_pass https://backend;\n            proxy_ssl_server_name on;\n            proxy_ssl_name bench.test;\n            proxy_ssl_verify on;\n            proxy_ssl_trusted_certificate $TMP/bench.pem;\n            proxy_ssl_session_reuse on;|" \
		"$1/nginx.conf"
}

# loopgate_tls_listener FILE turns a write_loopgate_config file's plain
# listener into an HTTPS one with the bench certificate.
loopgate_tls_listener() {
	local file=$1 addr
	addr=$(sed -n 's/^listen: //p' "$file")
	sed -i "s|^listen: .*|listeners:\n  - address: $addr\n    tls:\n      certificates: [{cert: $TMP/bench.pem, key: $TMP/bench.key}]|" "$file"
}

# loopgate_tls_upstream FILE: the upstream of a write_loopgate_config file
# over TLS, verified against the bench certificate as nginx's is.
loopgate_tls_upstream() {
	sed -i "s|^    max_idle: 64$|    max_idle: 64\n    tls: {server_name: bench.test, ca: $TMP/bench.pem}|" "$1"
}
