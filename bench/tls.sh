#!/usr/bin/env bash
# tls.sh: the HTTPS rows of `make bench`. Loopgate against nginx (OpenSSL),
# both serving the same ECDSA P-256 certificate made here with openssl:
#
#   keepalive  keep-alive HTTPS, wrk -t1 -c64: CPU per request
#   full13     a new connection per request, full TLS 1.3 handshakes
#              (X25519: the client offers X25519, P-256 and P-384, as an
#              OpenSSL 3.0 client such as curl does): CPU per handshake
#   resumed13  the same, every handshake resuming (TLS 1.3 PSK)
#   full12     full TLS 1.2 handshakes (ECDHE-ECDSA, X25519)
#   resumed12  TLS 1.2 handshakes resuming a ticket
#   pq13       full TLS 1.3, the client offering Go's default key exchanges
#              (X25519MLKEM768 first); nginx's OpenSSL 3.0 picks X25519
#   upstream   plain keep-alive clients, TLS to the backend: CPU per request
#   flood      the p99 of 16 keep-alive HTTPS connections at a fixed rate,
#              alone and while a flood of full handshakes runs; Loopgate
#              at the default tls.handshake_priority (normal), and at nice
#              (loopgate-nice) and low (loopgate-low)
#
# New connections come from bench/cmd/tlsload (wrk resumes no session per
# connection). Rows are interleaved in rounds; the tables show medians. See
# bench/README.md. Output: stdout and bench/out/tls.md.
#
# Environment: BENCH_DURATION, BENCH_ROUNDS and LOOPGATE_BIN as for run.sh;
# TLS_SCENARIOS (default all of the above) runs a subset; TLS_HS_CONNS
# (default 16) new-connection workers; TLS_PROBE_RATE (default 2000)
# requests a second of the flood row's probe; TLS_FLOOD_CONNS (default 64)
# workers of the flood; TLS_FLOOD_RATE (default 0: as fast as they go) caps
# the flood's handshakes a second, so that proxies are compared under the
# same flood.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
bench_init

DURATION=${BENCH_DURATION:-10}
ROUNDS=${BENCH_ROUNDS:-3}
WARMUP=2
HS_CONNS=${TLS_HS_CONNS:-16}
PROBE_RATE=${TLS_PROBE_RATE:-2000}
PROBE_CONNS=16
FLOOD_CONNS=${TLS_FLOOD_CONNS:-64}
FLOOD_RATE=${TLS_FLOOD_RATE:-0}
LOOPGATE_BIN=${LOOPGATE_BIN:-$ROOT/bin/loopgate}
OUT=$ROOT/bench/out
RAW=$OUT/raw-tls
[[ $DURATION =~ ^[1-9][0-9]*$ ]] || { log "BENCH_DURATION must be whole seconds, got '$DURATION'"; exit 2; }
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { log "BENCH_ROUNDS must be a positive integer, got '$ROUNDS'"; exit 2; }
[[ $FLOOD_RATE =~ ^[0-9]+$ ]] || { log "TLS_FLOOD_RATE must be a whole number of handshakes a second, got '$FLOOD_RATE'"; exit 2; }
[[ -x $LOOPGATE_BIN ]] || { log "${LOOPGATE_BIN#"$ROOT"/} missing (run \`make build\`)"; exit 1; }
command -v nginx >/dev/null 2>&1 || { log "the TLS rows need nginx (backend and baseline)"; exit 1; }
command -v openssl >/dev/null 2>&1 || { log "the TLS rows need openssl (the certificate)"; exit 1; }
command -v curl >/dev/null 2>&1 || { log "the TLS rows need curl (the readiness probe)"; exit 1; }

read -r -a SCENARIOS <<<"${TLS_SCENARIOS:-keepalive full13 resumed13 full12 resumed12 pq13 upstream flood}"
PROXIES=(nginx loopgate)
# The flood row also runs Loopgate with tls.handshake_priority nice and low.
FLOOD_PROXIES=(nginx loopgate loopgate-nice loopgate-low)
declare -A TITLE=(
	[keepalive]="keep-alive HTTPS (TLS 1.3), wrk -c64 | µs/req"
	[full13]="new connection per request, full TLS 1.3 handshake (X25519) | µs/handshake"
	[resumed13]="new connection per request, TLS 1.3 resumed (PSK) | µs/handshake"
	[full12]="new connection per request, full TLS 1.2 handshake (ECDHE-ECDSA) | µs/handshake"
	[resumed12]="new connection per request, TLS 1.2 resumed (ticket) | µs/handshake"
	[pq13]="full TLS 1.3, client offers X25519MLKEM768 first (Go's default) | µs/handshake"
	[upstream]="TLS to the upstream (plain clients), wrk -c64 | µs/req"
)
declare -A PORT=() PID=()
NOTES=()
FAILED=0

# target_of SCENARIO: the proxy set a scenario runs against: tls (HTTPS
# listener, plain backend) or up (plain listener, TLS backend).
target_of() { if [[ $1 == upstream ]]; then echo up; else echo tls; fi; }

# start_targets: the plain and the TLS backend on LOAD_CPU, and on
# PROXY_CPU nginx and Loopgate, each as an HTTPS proxy to the plain
# backend (tls) and as a plain proxy to the TLS backend (up).
start_targets() {
	local ports
	mapfile -t ports < <(free_ports 6)
	local plain=${ports[0]} tlsb=${ports[1]}
	write_nginx_backend_conf "$TMP/backend" "$plain"
	start_nginx backend "$TMP/backend" "$LOAD_CPU"
	wait_ready backend "$STARTED_PID" "$plain" || { log "the plain backend failed"; exit 1; }
	write_nginx_tls_backend_conf "$TMP/backend-tls" "$tlsb"
	start_nginx backend-tls "$TMP/backend-tls" "$LOAD_CPU"
	PROBE=probe_https wait_ready backend-tls "$STARTED_PID" "$tlsb" || { log "the TLS backend failed"; exit 1; }

	local port=${ports[2]}
	write_nginx_tls_proxy_conf "$TMP/tls-nginx" "$port" "$plain"
	start_nginx tls-nginx "$TMP/tls-nginx" "$PROXY_CPU"
	PROBE=probe_https register tls-nginx "$port"

	port=${ports[3]}
	write_loopgate_config "$TMP/tls-loopgate.yaml" "$port" "$plain" plain
	loopgate_tls_listener "$TMP/tls-loopgate.yaml"
	start_loopgate tls-loopgate "$TMP/tls-loopgate.yaml" "$PROXY_CPU"
	PROBE=probe_https register tls-loopgate "$port"

	if [[ " ${SCENARIOS[*]} " == *" flood "* ]]; then
		local prio
		for prio in nice low; do
			port=$(free_ports 1)
			write_loopgate_config "$TMP/tls-loopgate-$prio.yaml" "$port" "$plain" plain
			loopgate_tls_listener "$TMP/tls-loopgate-$prio.yaml"
			echo "tls: {handshake_priority: $prio}" >>"$TMP/tls-loopgate-$prio.yaml"
			start_loopgate "tls-loopgate-$prio" "$TMP/tls-loopgate-$prio.yaml" "$PROXY_CPU"
			PROBE=probe_https register "tls-loopgate-$prio" "$port"
			grep -q "handshake_priority: $prio is not available" "$TMP/tls-loopgate-$prio.log" &&
				NOTES+=("loopgate-$prio: this user may not lower a thread's priority and raise it again (CAP_SYS_NICE); it ran at normal priority")
		done
	fi

	port=${ports[4]}
	write_nginx_upstream_tls_conf "$TMP/up-nginx" "$port" "$tlsb"
	start_nginx up-nginx "$TMP/up-nginx" "$PROXY_CPU"
	register up-nginx "$port"

	port=${ports[5]}
	write_loopgate_config "$TMP/up-loopgate.yaml" "$port" "$tlsb" plain
	loopgate_tls_upstream "$TMP/up-loopgate.yaml"
	start_loopgate up-loopgate "$TMP/up-loopgate.yaml" "$PROXY_CPU"
	register up-loopgate "$port"
}

# register NAME PORT waits for the target just started and records it.
register() {
	if wait_ready "$1" "$STARTED_PID" "$2"; then
		PORT[$1]=$2
		PID[$1]=$STARTED_PID
	else
		log "$1 failed to start"
		FAILED=1
	fi
}

# tlsload ARGS... runs the load generator on LOAD_CPU.
tlsload() { pinned "$LOAD_CPU" "$TMP/bin/tlsload" "$@"; }

# field NAME FILE prints the value of NAME=value in tlsload's output line.
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" "$2" | head -n 1; }

# cpu_per OPS BEFORE AFTER: CPU µs per operation from clock ticks.
cpu_per() {
	if [[ $1 == NA || $1 -le 0 || $3 -lt $2 ]]; then
		echo NA
	else
		awk -v t=$(($3 - $2)) -v hz="$CLK_TCK" -v n="$1" 'BEGIN { printf "%.2f", t / hz * 1e6 / n }'
	fi
}

# measure ROUND SCENARIO PROXY: one measured run, after a warm-up; appends
# round scenario proxy ops rate p50 p99 cpu_us_per_op errors resumed to
# results.txt.
measure() {
	local round=$1 scen=$2 proxy=$3 key
	key=$(target_of "$scen")-$proxy
	[[ -n ${PID[$key]:-} ]] || return 0
	local port=${PORT[$key]} pid=${PID[$key]} raw="$RAW/round$1-$2-$3.txt" before after
	local ops=NA rate=NA p50=NA p99=NA errs=0 resumed=NA args=()
	case $scen in
	keepalive | upstream)
		local scheme=https
		[[ $scen == upstream ]] && scheme=http
		pinned "$LOAD_CPU" wrk -t1 -c64 -d"${WARMUP}s" "$scheme://127.0.0.1:$port/" >/dev/null 2>&1 || true
		before=$(cpu_ticks "$pid")
		pinned "$LOAD_CPU" wrk -t1 -c64 -d"${DURATION}s" --latency "$scheme://127.0.0.1:$port/" >"$raw" 2>&1 ||
			log "wrk exited non-zero for $scen $proxy (see $raw)"
		after=$(cpu_ticks "$pid")
		local n2 c r w t
		read -r ops rate p50 p99 n2 c r w t < <(parse_wrk "$raw")
		errs=$((n2 + c + r + w + t))
		;;
	*)
		case $scen in
		full13) args=(-tls 1.3) ;;
		resumed13) args=(-tls 1.3 -resume) ;;
		full12) args=(-tls 1.2) ;;
		resumed12) args=(-tls 1.2 -resume) ;;
		pq13) args=(-tls 1.3 -curves default) ;;
		esac
		tlsload -mode handshake -addr "127.0.0.1:$port" -c "$HS_CONNS" -d 1s "${args[@]}" >/dev/null 2>&1 || true
		before=$(cpu_ticks "$pid")
		tlsload -mode handshake -addr "127.0.0.1:$port" -c "$HS_CONNS" -d "${DURATION}s" "${args[@]}" >"$raw" 2>&1 ||
			log "tlsload exited non-zero for $scen $proxy (see $raw)"
		after=$(cpu_ticks "$pid")
		ops=$(field handshakes "$raw")
		rate=$(field rate "$raw")
		errs=$(field errors "$raw")
		resumed=$(field resumed "$raw")
		;;
	esac
	: "${ops:=NA}" "${rate:=NA}" "${errs:=1}" "${resumed:=NA}"
	if ! kill -0 "$pid" 2>/dev/null; then
		NOTES+=("$key died during round $round")
		FAILED=1
	fi
	local cpu
	cpu=$(cpu_per "$ops" "$before" "$after")
	echo "$round $scen $proxy $ops $rate $p50 $p99 $cpu $errs $resumed" >>"$RAW/results.txt"
	log "round $round $scen $proxy: $ops ops, $rate/s, CPU $cpu µs/op, errors $errs, resumed $resumed"
}

# measure_flood ROUND PROXY: the probe alone, then the probe while a flood
# of full TLS 1.3 handshakes runs. The flood runs at nice 19 so that on the
# shared load CPU the probe and the backend go first: what is measured is
# the proxy's scheduling, not the load generator's. Appends two lines,
# scenarios quiet and flood (ops = probe requests, rate = flood handshakes/s;
# the flood's CPU is the proxy's per flood handshake, the probe included).
measure_flood() {
	local round=$1 proxy=$2 key=tls-$2
	[[ -n ${PID[$key]:-} ]] || return 0
	local port=${PORT[$key]} pid=${PID[$key]} q="$RAW/round$1-quiet-$2.txt" f="$RAW/round$1-flood-$2.txt"
	local probe=(-mode latency -addr "127.0.0.1:$port" -c "$PROBE_CONNS" -rate "$PROBE_RATE" -d "${DURATION}s")
	local before after
	before=$(cpu_ticks "$pid")
	tlsload "${probe[@]}" >"$q" 2>&1 || log "the quiet probe failed for $proxy (see $q)"
	after=$(cpu_ticks "$pid")
	echo "$round quiet $proxy $(field requests "$q") NA $(field p50_ms "$q") $(field p99_ms "$q")" \
		"$(cpu_per "$(field requests "$q")" "$before" "$after") $(field errors "$q") NA" >>"$RAW/results.txt"

	before=$(cpu_ticks "$pid")
	pinned "$LOAD_CPU" nice -n 19 "$TMP/bin/tlsload" -mode handshake -addr "127.0.0.1:$port" -c "$FLOOD_CONNS" \
		-hsrate "$FLOOD_RATE" -d "$((DURATION + 2))s" -tls 1.3 >"$f.flood" 2>&1 &
	local flood=$!
	sleep 1 # the flood at full strength before the probe starts
	tlsload "${probe[@]}" >"$f" 2>&1 || log "the flood probe failed for $proxy (see $f)"
	wait "$flood" || log "the flood failed for $proxy (see $f.flood)"
	after=$(cpu_ticks "$pid")
	echo "$round flood $proxy $(field requests "$f") $(field rate "$f.flood") $(field p50_ms "$f") $(field p99_ms "$f")" \
		"$(cpu_per "$(field handshakes "$f.flood")" "$before" "$after") $(($(field errors "$f") + 0)) NA" >>"$RAW/results.txt"
	log "round $round flood $proxy: p99 $(field p99_ms "$q") ms quiet, $(field p99_ms "$f") ms under $(field rate "$f.flood") handshakes/s" \
		"($(awk -v a="$(field p99_ms "$f")" -v b="$(field p99_ms "$q")" 'BEGIN { if (a > 0 && b > 0) printf "%.2f×", a / b; else print "NA" }'))"
}

# round_ratios PROXY: the p99 flood / quiet ratio of each round, in order.
round_ratios() {
	awk -v p="$1" '$3 == p && $2 == "quiet" { q[$1] = $7 } $3 == p && $2 == "flood" { f[$1] = $7 }
		END { for (i = 1; i in q || i in f; i++) printf "%s%s", (i > 1 ? " " : ""), (q[i] > 0 && f[i] > 0 ? sprintf("%.2f", f[i] / q[i]) : "NA") }' "$RAW/results.txt"
}

# med SCENARIO PROXY N: the median of column N of the scenario's lines.
med() { awk -v s="$1" -v p="$2" -v n="$3" '$2 == s && $3 == p { print $n }' "$RAW/results.txt" | median; }

report() {
	local scen proxy title unit
	echo "Loopgate TLS bench, $(date -u '+%Y-%m-%d %H:%M UTC'): kernel $(uname -r) × $(nproc) CPUs," \
		"nginx $(nginx_version), $(openssl version | awk '{print $1, $2}'), wrk $(wrk_version); $PINNING." \
		"One ECDSA P-256 certificate; proxy CPU from /proc per operation; median of $ROUNDS interleaved rounds of ${DURATION} s." \
		"New connections: bench/cmd/tlsload -c$HS_CONNS, each a handshake and one request." \
		"Load average (1 min): $LOAD_START at start, $(load_average) at end."
	echo
	echo "| scenario | unit | nginx ops/s | nginx CPU | loopgate ops/s | loopgate CPU | loopgate / nginx CPU |"
	echo "|---|---|---:|---:|---:|---:|---:|"
	declare -gA CPU=()
	for scen in "${SCENARIOS[@]}"; do
		[[ $scen == flood ]] && continue
		title=${TITLE[$scen]}
		local row="| $title"
		for proxy in "${PROXIES[@]}"; do
			CPU[$scen-$proxy]=$(med "$scen" "$proxy" 8)
			local errs
			errs=$(awk -v s="$scen" -v p="$proxy" '$2 == s && $3 == p { n += $9 } END { print n + 0 }' "$RAW/results.txt")
			local mark=""
			[[ $errs == 0 ]] || mark=" ⚠ $errs errors"
			row+=" | $(fmt %.0f "$(med "$scen" "$proxy" 5)")$mark | $(fmt %.1f "${CPU[$scen-$proxy]}")"
		done
		local ratio=NA
		[[ ${CPU[$scen-nginx]} == NA || ${CPU[$scen-loopgate]} == NA ]] ||
			ratio=$(awk -v a="${CPU[$scen-loopgate]}" -v b="${CPU[$scen-nginx]}" 'BEGIN { printf "%.2f", a / b }')
		echo "$row | $(fmt '%s×' "$ratio") |"
	done
	echo
	targets
	if [[ " ${SCENARIOS[*]} " == *" flood "* ]]; then
		echo
		echo "Flood: $PROBE_CONNS keep-alive HTTPS connections at $PROBE_RATE requests/s in all (latency from each" \
			"request's scheduled time), alone and while tlsload -c$FLOOD_CONNS makes full TLS 1.3 handshakes" \
			"($( ((FLOOD_RATE > 0)) && echo "at most $FLOOD_RATE a second, " )nice 19 on the load CPU)."
		echo
		echo "| proxy | p50 ms quiet | p99 ms quiet | p50 ms flood | p99 ms flood | flood handshakes/s | CPU µs/flood handshake | p99 flood / quiet | per round |"
		echo "|---|---:|---:|---:|---:|---:|---:|---:|---|"
		local -A ratio=()
		for proxy in "${FLOOD_PROXIES[@]}"; do
			# Each round's quiet and flood runs went back to back: the ratio
			# is taken within a round, then the median over rounds.
			local rounds r
			rounds=$(round_ratios "$proxy")
			r=$(tr ' ' '\n' <<<"$rounds" | median)
			[[ $r == NA ]] || r=$(awk -v r="$r" 'BEGIN { printf "%.2f", r }')
			ratio[$proxy]=$r
			echo "| $proxy | $(fmt %.2f "$(med quiet "$proxy" 6)") | $(fmt %.2f "$(med quiet "$proxy" 7)") | $(fmt %.2f "$(med flood "$proxy" 6)")" \
				"| $(fmt %.2f "$(med flood "$proxy" 7)") | $(fmt %.0f "$(med flood "$proxy" 5)") | $(fmt %.0f "$(med flood "$proxy" 8)") | $(fmt '%s×' "$r") | ${rounds// /, } |"
		done
		echo
		for proxy in "${FLOOD_PROXIES[@]}"; do
			[[ ${ratio[$proxy]:-NA} == NA ]] ||
				awk -v p="$proxy" -v r="${ratio[$proxy]}" 'BEGIN { printf "- FLOOD %s: p99 under the flood %s× its quiet p99 (median of rounds; target ≤ 2×: %s).\n", p, r, (r <= 2 ? "met" : "missed") }'
		done
		awk -v a="$LOAD_START" -v b="$(load_average)" -v n="$(nproc)" 'BEGIN { if (a > n / 2 || b > n / 2)
			printf "- The load average (%s at start, %s at end, %d CPUs) says other processes ran: the flood figures measure them too.\n", a, b, n }'

	fi
	local line
	for line in "${NOTES[@]}"; do
		echo "- $line"
	done
}

# targets prints the issue's targets against the medians: keep-alive and
# upstream ≤ 1.0× nginx, full handshakes ≤ 1.2×, resumed well under full.
targets() {
	local scen limit
	for scen in keepalive upstream full13 full12; do
		[[ ${CPU[$scen-loopgate]:-NA} != NA && ${CPU[$scen-nginx]:-NA} != NA ]] || continue
		limit=1.0
		[[ $scen == full* ]] && limit=1.2
		awk -v s="$scen" -v a="${CPU[$scen-loopgate]}" -v b="${CPU[$scen-nginx]}" -v l="$limit" 'BEGIN {
			printf "- %s: loopgate CPU %.2f× nginx (target ≤ %.1f×: %s).\n", s, a / b, l, (a / b <= l ? "met" : "missed") }'
	done
	for scen in 13 12; do
		[[ ${CPU[resumed$scen-loopgate]:-NA} != NA && ${CPU[full$scen-loopgate]:-NA} != NA ]] || continue
		awk -v s="$scen" -v a="${CPU[resumed$scen-loopgate]}" -v b="${CPU[full$scen-loopgate]}" 'BEGIN {
			printf "- TLS 1.%s resumed: loopgate %.2f× its full handshake.\n", substr(s, 2), a / b }'
	done
	local n r
	for scen in resumed13 resumed12; do
		for proxy in "${PROXIES[@]}"; do
			n=$(med "$scen" "$proxy" 4)
			r=$(med "$scen" "$proxy" 10)
			[[ $n != NA && $r != NA ]] || continue
			# Each worker's first connection is a full handshake.
			awk -v n="$n" -v r="$r" -v c="$HS_CONNS" 'BEGIN { exit !(r < n - c) }' || continue
			echo "- $scen $proxy: only $r of $n handshakes resumed (median)."
		done
	done
}

main() {
	ensure_wrk
	setup_pinning
	CLK_TCK=$(getconf CLK_TCK)
	LOAD_START=$(load_average)
	build_tools
	write_bench_cert
	rm -rf "$RAW"
	mkdir -p "$RAW"
	: >"$RAW/results.txt"
	start_targets
	log "targets: ${!PID[*]}; $PINNING"
	local round scen proxy i
	for round in $(seq "$ROUNDS"); do
		for scen in "${SCENARIOS[@]}"; do
			# Rotate which proxy goes first, round by round.
			if [[ $scen == flood ]]; then
				for i in "${!FLOOD_PROXIES[@]}"; do
					measure_flood "$round" "${FLOOD_PROXIES[$(((i + round) % ${#FLOOD_PROXIES[@]}))]}"
				done
				continue
			fi
			for i in 0 1; do
				measure "$round" "$scen" "${PROXIES[$(((i + round) % 2))]}"
			done
		done
	done
	report | tee "$OUT/tls.md"
	log "report written to bench/out/tls.md; raw output in ${RAW#"$ROOT"/}/"
	return "$FAILED"
}

main "$@"
