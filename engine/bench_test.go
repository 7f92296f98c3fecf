// End-to-end hot-path benchmark: one keep-alive client through the gateway
// to a raw upstream, counting allocations of the whole process.

package engine_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/loopgate/loopgate/pool"
)

var (
	benchResponse = []byte("HTTP/1.1 200 OK\r\nContent-Length: 12\r\nContent-Type: text/plain\r\n\r\nhello world\n")
	benchRequest  = []byte("GET /api/echo HTTP/1.1\r\nHost: bench\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
)

// rawBenchUpstream answers every request head with benchResponse, without
// allocating per request.
func rawBenchUpstream(c net.Conn) { rawBenchServe(c, benchResponse) }

// rawBenchServe answers every request head on c with resp, skipping a
// Content-Length body, without allocating per request.
func rawBenchServe(c net.Conn, resp []byte) {
	buf := make([]byte, 64<<10)
	pending, skip := 0, 0 // skip: body bytes still to come
	for {
		n, err := c.Read(buf[pending:])
		if err != nil {
			return
		}
		pending += n
		for {
			if skip > 0 {
				k := min(skip, pending)
				copy(buf, buf[k:pending])
				pending -= k
				if skip -= k; skip > 0 {
					break
				}
			}
			i := bytes.Index(buf[:pending], []byte("\r\n\r\n"))
			if i < 0 {
				break
			}
			if _, err := c.Write(resp); err != nil {
				return
			}
			skip = contentLength(buf[:i])
			copy(buf, buf[i+4:pending])
			pending -= i + 4
		}
	}
}

// contentLength reads a Content-Length field from a raw head, 0 if none.
func contentLength(head []byte) int {
	cl := bytes.Index(head, []byte("Content-Length: "))
	if cl < 0 {
		return 0
	}
	n := 0
	for _, d := range head[cl+16:] {
		if d < '0' || d > '9' {
			break
		}
		n = n*10 + int(d-'0')
	}
	return n
}

func BenchmarkProxyKeepAlive(b *testing.B) { benchmarkProxy(b, oneRoute, benchRequest) }

// BenchmarkProxyMetricsOff is BenchmarkProxyKeepAlive without the
// per-request route series: the cost metrics add is the difference.
func BenchmarkProxyMetricsOff(b *testing.B) {
	benchmarkProxy(b, metricsOff+oneRoute, benchRequest)
}

// BenchmarkProxyAccessLog is BenchmarkProxyKeepAlive with the access log
// written to a file: the loop's record, the writer's JSON and its writes.
func BenchmarkProxyAccessLog(b *testing.B) {
	benchmarkProxy(b, accessLogTo(filepath.Join(b.TempDir(), "access.log"))+oneRoute, benchRequest)
}

// BenchmarkProxyPlain is the bench's plain row: no filters, no
// per-request series.
func BenchmarkProxyPlain(b *testing.B) {
	benchmarkProxy(b, "filters: []\n"+metricsOff+oneRoute, benchRequest)
}

// BenchmarkProxyTraceContext is the plain row with trace_context on: the
// request carries no traceparent, so each gets a new trace (the bench's
// "trace context" row). The difference from BenchmarkProxyPlain is its
// cost.
func BenchmarkProxyTraceContext(b *testing.B) {
	benchmarkProxy(b, "filters: []\n"+metricsOff+"trace_context: {}\n"+oneRoute, benchRequest)
}

const metricsOff = "metrics: {per_request: false}\n"

// accessLogTo is the config line that turns the access log on.
func accessLogTo(path string) string { return fmt.Sprintf("access_log: {path: %q}\n", path) }

// defaultChain is the bench's default filter chain: request ID, IP allow
// list, JWT auth with a warm cache, forwarded headers.
const defaultChain = `
filters: [request_id, ip_access, forwarded]
ip_allow: ["127.0.0.0/8"]
auth:
  jwt: {hs256_secret: bench-secret, issuer: loopgate-bench, audience: api}
upstreams:
  - name: backend
    nodes: ["%s"]
routes:
  - {id: all, prefix: /, upstream: backend, auth: required}
`

// benchJWT is signed with "bench-secret" and expires in 2100.
const benchJWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJiZW5jaC11c2VyIiwiaXNzIjoibG9vcGdhdGUtYmVuY2giLCJhdWQiOiJhcGkiLCJleHAiOjQxMDI0NDQ4MDAsInJvbGVzIjpbInVzZXIiXX0.8v9qgL5WcrLLxZFFc8kuCEN-Lc_u_nQVxxwrOYJK170"

func BenchmarkProxyDefaultChain(b *testing.B) {
	req := []byte("GET /api/echo HTTP/1.1\r\nHost: bench\r\nUser-Agent: wrk\r\nAccept: */*\r\nAuthorization: Bearer " + benchJWT + "\r\n\r\n")
	benchmarkProxy(b, defaultChain, req)
}

// benchmarkProxy measures keep-alive round trips through a gateway running
// config, counting the allocations of the whole process (gateway, raw
// upstream and client: the last two allocate nothing per request).
func benchmarkProxy(b *testing.B, config string, request []byte) {
	benchmarkProxyWith(b, rawBenchUpstream, config, request)
}

// BenchmarkProxyChunked: a small chunked request body with an extension,
// held whole and sent with a Content-Length, and a chunked response with an
// extension, re-chunked canonically on the way out. Both at 0 allocations.
func BenchmarkProxyChunked(b *testing.B) {
	resp := []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=1\r\nhello\r\n7\r\n world\n\r\n0\r\n\r\n")
	req := []byte("POST /api/echo HTTP/1.1\r\nHost: bench\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\n\r\n")
	benchmarkProxyWith(b, func(c net.Conn) { rawBenchServe(c, resp) }, oneRoute, req)
}

func benchmarkProxyWith(b *testing.B, upstream func(net.Conn), config string, request []byte) {
	// Leak tracking records a stack per buffer; measure the real hot path.
	pool.SetLeakDetection(false)
	defer pool.SetLeakDetection(true)
	up := startRawUpstream(b, upstream)
	g := startGateway(b, config, up)
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4096)
	// The first response tells the size of every response.
	if _, err := c.Write(request); err != nil {
		b.Fatal(err)
	}
	want, err := c.Read(buf)
	if err != nil || !bytes.HasPrefix(buf, []byte("HTTP/1.1 200")) {
		b.Fatalf("first response %q: %v", buf[:want], err)
	}
	roundTrip := func() {
		if _, err := c.Write(request); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadAtLeast(c, buf, want); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 1000; i++ { // warm pools and free lists
		roundTrip()
	}
	b.ReportAllocs()
	b.ResetTimer()
	before := cpuTime()
	for i := 0; i < b.N; i++ {
		roundTrip()
	}
	b.ReportMetric(float64(cpuTime()-before)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the CPU time the whole process (gateway, upstream and client)
// has used, in nanoseconds: wall time per op hides how much work a round
// trip costs, since most of it is spent waiting.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}
