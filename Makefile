# Loopgate: `make run` starts the gateway on its embedded config with a demo
# upstream; `make test` is the whole test suite (what CI runs).

GO        ?= go
FUZZTIME  ?= 30s

.PHONY: build run test vet redis browser screenshots bench bench-ab bench-tls bench-instructions bench-reload bench-isolation bench-idle bench-ws bench-ws-slow bench-ws-instructions bench-clientlimit bench-go pgo fuzz clean

build:
	$(GO) build -o bin/loopgate ./cmd/loopgate

run: build
	bin/loopgate -demo-upstream 127.0.0.1:9001

# The suite under the race detector, then the allocation tests (named
# *Allocs*) in a build without it, where their counts mean something; under
# -race they skip themselves (pooltest.SkipAllocsUnderRace). The second step
# builds only the packages that have such a test.
test: vet redis browser
	$(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -count=1 -run Allocs $$(grep -rlE --include='*_test.go' '^func Test[[:alnum:]_]*Allocs' . | xargs -r dirname | sort -u)

# The real peers the tests use, installed when missing (Debian/Ubuntu, as
# root): redis-server for the cluster rate-limit and config-sync tests,
# promtool (Debian's prometheus package) for the /metrics page, and a
# WebSocket server and client (python3-websockets, node-ws) for the
# tunnel tests. If that cannot be done those tests skip themselves.
TEST_PACKAGES = redis-server prometheus python3-websockets node-ws

redis:
	@(command -v redis-server && command -v promtool && /usr/bin/python3 -c 'import websockets' && test -d /usr/share/nodejs/ws) >/dev/null 2>&1 || \
		(apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y $(TEST_PACKAGES)) || true

# The dashboard test (cmd/loopgate TestDashboardInBrowser) drives Debian's
# chromium, headless, with puppeteer-core from the checked-in lock file.
# Install them when missing; if chromium cannot be installed the test
# skips itself.
browser:
	@command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium) || true
	@command -v npm >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm) || true
	@if command -v npm >/dev/null && ! test -d cmd/loopgate/testdata/browser/node_modules/puppeteer-core; then \
		cd cmd/loopgate/testdata/browser && npm ci --no-audit --no-fund; fi

# The dashboard's screenshots under docs/ (the whole page and each main
# view), taken by its browser test from a gateway it runs.
screenshots: browser
	DASHBOARD_SCREENSHOTS=$(CURDIR)/docs $(GO) test -count=1 -run TestDashboardInBrowser ./cmd/loopgate/

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...

# Proxy benchmark: Loopgate vs nginx vs haproxy on one backend, the HTTPS
# rows, then the WebSocket echo row against nginx (see bench/README.md).
bench: build
	bash bench/run.sh
	bash bench/churn.sh
	bash bench/tls.sh
	WS_PARTS=echo bash bench/ws.sh

# The HTTPS rows alone: keep-alive, handshakes full and resumed, TLS to the upstream, a handshake flood.
bench-tls: build
	bash bench/tls.sh

# The current build against BASE (a tag or commit, built in a temporary
# worktree) and nginx, interleaved: make bench-ab BASE=v0.1 [ROUNDS=5].
bench-ab: build
	BASE='$(BASE)' ROUNDS='$(or $(ROUNDS),5)' bash bench/ab.sh

# Live reload under wrk -c64: a reload every 250 ms, POST /reload and SIGHUP.
# Instructions per request against BASE, with cachegrind (deterministic
# on a busy machine): make bench-instructions BASE=v0.1.
bench-instructions: build
	BASE='$(BASE)' bash bench/instructions.sh

# The CPU profile cmd/loopgate is built with (go build's -pgo=auto reads
# cmd/loopgate/default.pgo): the gateway under wrk on the plain, default
# chain and HTTPS keep-alive rows, merged. Refresh it after a change that
# moves the hot path (see bench/README.md), then rebuild.
pgo:
	bash bench/pgo.sh

bench-reload: build
	bash bench/reload.sh

# The config API at 30,000 routes: VmRSS per route, and one route written at a time.
bench-scale: build
	bash bench/scale.sh

# Slow-call isolation with the defaults: a 2 s route under 3,000 clients beside wrk -c32 on a fast route, on separate upstreams and on one shared upstream.
bench-isolation: build
	bash bench/isolation.sh

# Memory cost of 10,000 idle keep-alive client connections.
bench-idle: build
	bash bench/idle.sh

# WebSocket echo (CPU per message), 10,000 idle tunnels and a 64 MiB slow reader, Loopgate vs nginx.
bench-ws: build
	bash bench/ws.sh

# One WebSocket echo message counted, not timed (readable on a busy machine):
# instructions (cachegrind), syscalls and context switches per message, the
# current build against nginx, and BASE when given: make bench-ws-instructions BASE=v0.1.
bench-ws-instructions: build
	BASE='$(BASE)' bash bench/ws-instructions.sh

# Per-client cluster limits: 10,000 users over two gateways and one redis-server.
bench-clientlimit: redis
	bash bench/clientlimit.sh

# 1 GiB through one tunnel to a 1 MiB/s reader (about 17 minutes, little CPU):
# Loopgate's peak RSS growth, a VmRSS sample a second in bench/out/ws-slow-rss.txt.
bench-ws-slow: build
	WS_PARTS=flood WS_PROXIES='$(or $(PROXIES),loopgate)' WS_FLOOD_MIB='$(or $(MIB),1024)' WS_RSS_LOG=bench/out/ws-slow-rss.txt bash bench/ws.sh

# Hot-path micro-benchmarks with allocs/op.
bench-go:
	$(GO) test -run='^$$' -bench=. -benchmem ./codec/ ./pool/ ./engine/... ./filters/... ./upstream/

# Every fuzz target, FUZZTIME each; a failing input is minimised for at
# most 5s and kept under the package's testdata/fuzz.
FUZZ = $(GO) test -run='^$$' -fuzztime=$(FUZZTIME) -fuzzminimizetime=5s

fuzz:
	$(FUZZ) -fuzz='^FuzzParseRequest$$' ./codec/
	$(FUZZ) -fuzz='^FuzzParseResponse$$' ./codec/
	$(FUZZ) -fuzz='^FuzzChunkedDecoder$$' ./codec/
	$(FUZZ) -fuzz='^FuzzNormalizePath$$' ./codec/
	$(FUZZ) -fuzz='^FuzzNormalizeHost$$' ./codec/
	$(FUZZ) -fuzz='^FuzzValidValue$$' ./codec/
	$(FUZZ) -fuzz='^FuzzParseAddr$$' ./filters/access/
	$(FUZZ) -fuzz='^FuzzNormalise$$' ./engine/router/

clean:
	rm -rf bin bench/out
