// The access and error logs through real sockets: requests driven through
// a gateway, then the JSON lines it wrote, parsed and checked field by field.

package engine_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine"
	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// startLoggingGateway is startGateway with the error log sent to errLog.
func startLoggingGateway(t *testing.T, errLog io.Writer, yaml string, args ...any) *gateway {
	t.Helper()
	return startGatewayWith(t, func(s *engine.Server) { s.SetErrorLog(errLog) }, yaml, args...)
}

// logBuffer collects error-log lines while the gateway writes them.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.b.Bytes())
}

type logLine map[string]any

// jsonLines parses every line of b, failing on one that is not JSON.
func jsonLines(t *testing.T, b []byte) []logLine {
	t.Helper()
	var out []logLine
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m logLine
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// waitLines polls read until it yields n lines, and returns them.
func waitLines(t *testing.T, what string, n int, read func() []byte) []logLine {
	t.Helper()
	var lines []logLine
	waitFor(t, fmt.Sprintf("%d %s lines", n, what), func() bool {
		lines = jsonLines(t, read())
		return len(lines) >= n
	})
	return lines
}

// byPath finds the line whose path is p.
func byPath(t *testing.T, lines []logLine, p string) logLine {
	t.Helper()
	for _, l := range lines {
		if l["path"] == p {
			return l
		}
	}
	t.Fatalf("no line for path %s in %v", p, lines)
	return nil
}

// One line per request, whatever became of it: served through a chain of
// filters, unrouted, and failed at the upstream. The fields say what the
// client and the metrics saw.
func TestAccessLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	dead := closedPort(t)
	g := startLoggingGateway(t, io.Discard, `
access_log: {path: %q}
upstreams:
  - {name: backend, nodes: ["%s"]}
  - {name: dead, nodes: ["%s"]}
routes:
  - {id: api, prefix: /api, upstream: backend}
  - {id: down, prefix: /down, upstream: dead, filters: [], disable_filters: [request_id, ip_access, forwarded]}
`, path, up, dead)

	served := fetch(g.url("/api/users?token=secret"))
	if served.err != nil || served.resp.StatusCode != 200 {
		t.Fatalf("GET /api/users: %+v", served)
	}
	for _, p := range []string{"/nowhere", "/down/x"} {
		if r := fetch(g.url(p)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	lines := waitLines(t, "access", 3, func() []byte { b, _ := os.ReadFile(path); return b })

	ok := byPath(t, lines, "/api/users")
	want := logLine{"method": "GET", "status": 200.0, "route": "api", "upstream": up,
		"client_ip": "127.0.0.1", "end": "served", "retries": 0.0,
		"request_id": served.resp.Header.Get("X-Request-Id")}
	for k, v := range want {
		if ok[k] != v {
			t.Errorf("served line: %s = %v, want %v", k, ok[k], v)
		}
	}
	if _, has := ok["code"]; has {
		t.Errorf("served line has a code: %v", ok)
	}
	if in, out := ok["bytes_in"].(float64), ok["bytes_out"].(float64); in < 30 || out < float64(len("hello")) {
		t.Errorf("served line: bytes_in %v, bytes_out %v", in, out)
	}
	if d, u := ok["duration_us"].(float64), ok["upstream_us"]; d <= 0 || u == nil || u.(float64) > d {
		t.Errorf("served line: duration_us %v, upstream_us %v", d, u)
	}
	var names []string
	for _, f := range ok["filters"].([]any) {
		names = append(names, f.(map[string]any)["name"].(string))
	}
	if strings.Join(names, ",") != "request_id,ip_access,forwarded" {
		t.Errorf("served line: filters %v, want the default chain in order", ok["filters"])
	}

	nr := byPath(t, lines, "/nowhere")
	if nr["status"] != 404.0 || nr["code"] != 40401.0 || nr["end"] != "rejected" || nr["route"] != nil {
		t.Errorf("unrouted line: %v", nr)
	}
	down := byPath(t, lines, "/down/x")
	if down["status"] != 502.0 || down["code"] != 50201.0 || down["upstream"] != dead ||
		down["end"] != "upstream_failed" || down["filters"] != nil || down["upstream_us"] != nil {
		t.Errorf("connect failure line: %v", down)
	}

	s := scrapeMetrics(t, g.srv)
	if got := s.get(t, "loopgate_access_log_lines_total"); got < 3 {
		t.Errorf("loopgate_access_log_lines_total %v, want 3", got)
	}
	if got := s.get(t, "loopgate_access_log_dropped_total"); got != 0 {
		t.Errorf("loopgate_access_log_dropped_total %v", got)
	}
}

// Behind a trusted proxy the access log names the client the proxy
// reports, on a route without filters as on one with them.
func TestAccessLogClientBehindTrustedProxy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	g := startLoggingGateway(t, io.Discard, `
access_log: {path: %q}
trusted_proxies: ["127.0.0.1/32"]
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: filtered, prefix: /filtered, upstream: backend}
  - {id: bare, prefix: /bare, upstream: backend, filters: [], disable_filters: [request_id, ip_access, forwarded]}
`, path, up)
	for _, p := range []string{"/filtered", "/bare"} {
		req, _ := http.NewRequest("GET", g.url(p), nil)
		req.Header.Set("X-Forwarded-For", "203.0.113.9")
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// Untrusted hops are not believed: a request without the header is
	// logged with its peer.
	if r := fetch(g.url("/bare/direct")); r.err != nil {
		t.Fatal(r.err)
	}
	lines := waitLines(t, "access", 3, func() []byte { b, _ := os.ReadFile(path); return b })
	for p, want := range map[string]string{"/filtered": "203.0.113.9", "/bare": "203.0.113.9", "/bare/direct": "127.0.0.1"} {
		if got := byPath(t, lines, p)["client_ip"]; got != want {
			t.Errorf("%s: client_ip %v, want %s", p, got, want)
		}
	}
}

// A response the upstream cuts after its head went out cannot become an
// error response: the client's connection is closed. The access log says
// how it ended (upstream_failed, or timeout for a body that stalled) with
// the reason's code, not served; the error log gets a response_cut line
// with the status the client saw, a 5xx included; and the route metrics
// count it under its status, not as an answer the gateway made. The
// upstream writes byte by byte.
func TestLogsSayAResponseWasCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	var errLog logBuffer
	up := startRawUpstream(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		status := "200 OK"
		if strings.Contains(line, "/reset503") {
			status = "503 Service Unavailable"
		}
		for _, b := range []byte("HTTP/1.1 " + status + "\r\nContent-Length: 100\r\n\r\n0123456789") {
			c.Write([]byte{b})
		}
		if strings.Contains(line, "/stall") {
			io.Copy(io.Discard, c) // until the gateway gives up on the body
		}
	})
	g := startLoggingGateway(t, &errLog, `
access_log: {path: %q}
upstreams:
  - {name: backend, nodes: ["%s"], response_timeout: 300ms}
routes:
  - {id: cut, prefix: /, upstream: backend, filters: [], disable_filters: [request_id, ip_access, forwarded]}
`, path, up)
	cases := []struct {
		path, end string
		status    float64
		code      float64
	}{
		{"/reset", "upstream_failed", 200, 50202},
		{"/reset503", "upstream_failed", 503, 50202},
		{"/stall", "timeout", 200, 50401},
	}
	for _, tc := range cases {
		if r := fetch(g.url(tc.path)); r.err == nil && len(r.body) == 100 {
			t.Fatalf("GET %s: the client got a whole response: %+v", tc.path, r)
		}
	}
	lines := waitLines(t, "access", len(cases), func() []byte { b, _ := os.ReadFile(path); return b })
	errs := waitLines(t, "error", len(cases), errLog.Bytes)
	for _, tc := range cases {
		if l := byPath(t, lines, tc.path); l["status"] != tc.status || l["end"] != tc.end || l["code"] != tc.code {
			t.Errorf("%s: access line %v, want status %v, end %s, code %v", tc.path, l, tc.status, tc.end, tc.code)
		}
		if e := byPath(t, errs, tc.path); e["event"] != "response_cut" || e["status"] != tc.status || e["code"] != tc.code {
			t.Errorf("%s: error line %v, want a response_cut with status %v, code %v", tc.path, e, tc.status, tc.code)
		}
	}
	if n := scrapeMetrics(t, g.srv).sum("loopgate_route_rejections_total", `route="cut"`); n != 0 {
		t.Errorf("%v cut responses counted as answers the gateway made", n)
	}
}

// Issue 18 item 15: a response under way that the gateway itself cuts,
// because the upstream stopped taking the request body past the response
// timeout or because the client's body broke its framing, was logged as
// client_gone with no error line. The access line now ends
// upstream_stalled or bad_request_body with the reason's code, and the
// error log gets a response_cut line saying why. The upstream writes its
// head byte by byte, the client its bad chunk too.
func TestLogsSayTheGatewayCutAResponse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	var errLog logBuffer
	done := testDone(t)
	up := startRawUpstream(t, func(c net.Conn) {
		line, _ := bufio.NewReader(c).ReadString('\n')
		for _, b := range []byte("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n0123456789") {
			c.Write([]byte{b})
		}
		if !strings.Contains(line, "/stall") {
			io.Copy(io.Discard, c) // until the gateway closes
			return
		}
		// Read nothing more, but keep the response alive: a byte every
		// 20 ms, well inside the response timeout, so only the stalled
		// request body can end it. This paces the peer; it synchronises
		// nothing.
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if _, err := c.Write([]byte{'x'}); err != nil {
					return
				}
			}
		}
	})
	g := startLoggingGateway(t, &errLog, `
access_log: {path: %q}
limits: {max_conn_buffer: 64KiB, max_body_bytes: 64MiB, request_buffer_bytes: 0}
upstreams:
  - {name: backend, nodes: ["%s"], response_timeout: 1s}
routes:
  - {id: cut, prefix: /, upstream: backend, filters: [], disable_filters: [request_id, ip_access, forwarded]}
`, path, up)
	// readHead reads the response head the gateway forwarded.
	readHead := func(c *rawClient) {
		t.Helper()
		if line, err := c.br.ReadString('\n'); err != nil || line != "HTTP/1.1 200 OK\r\n" {
			t.Fatalf("status line %q (%v)", line, err)
		}
		for {
			line, err := c.br.ReadString('\n')
			if err != nil {
				t.Fatalf("reading the head: %v", err)
			}
			if line == "\r\n" {
				return
			}
		}
	}
	// expectClosed reads until the gateway closes the connection, short of
	// the whole body.
	expectClosed := func(c *rawClient, what string) {
		t.Helper()
		if n, _ := io.Copy(io.Discard, c.br); n >= 100000 {
			t.Fatalf("%s: the client got the whole body", what)
		}
	}

	// The upstream stops reading a 40 MiB upload after answering its head.
	c := g.client(t)
	const size = 40 << 20
	fmt.Fprintf(c, "POST /stall HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", size)
	go func(c *rawClient) { // c is reassigned below while this may still run
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}(c)
	readHead(c)
	expectClosed(c, "stalled upload")

	// A chunked upload breaks its framing once the response is under way.
	c = g.client(t)
	c.send("POST /badbody HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
	readHead(c)
	for _, b := range []byte("zz\r\n") {
		if _, err := c.Write([]byte{b}); err != nil {
			break // the first 'z' is enough: the gateway closed already
		}
	}
	expectClosed(c, "bad chunk")

	cases := []struct {
		path, end string
		code      float64
		message   string
	}{
		{"/stall", "upstream_stalled", 50401, "upstream stopped reading the request body"},
		{"/badbody", "bad_request_body", 40001, ""},
	}
	lines := waitLines(t, "access", len(cases), func() []byte { b, _ := os.ReadFile(path); return b })
	for _, tc := range cases {
		if l := byPath(t, lines, tc.path); l["status"] != 200.0 || l["end"] != tc.end || l["code"] != tc.code {
			t.Errorf("%s: access line %v, want status 200, end %s, code %v", tc.path, l, tc.end, tc.code)
		}
	}
	errs := waitLines(t, "error", len(cases), errLog.Bytes)
	for _, tc := range cases {
		e := byPath(t, errs, tc.path)
		if e["event"] != "response_cut" || e["status"] != 200.0 || e["code"] != tc.code || e["message"] == nil ||
			tc.message != "" && e["message"] != tc.message {
			t.Errorf("%s: error line %v, want a response_cut with status 200, code %v and why", tc.path, e, tc.code)
		}
	}
	if n := scrapeMetrics(t, g.srv).sum("loopgate_route_rejections_total", `route="cut"`); n != 0 {
		t.Errorf("%v cut responses counted as answers the gateway made", n)
	}
}

// A line is never waited for: with a two-slot ring, lines the writer could
// not take in time are dropped and counted, and every request is either
// logged or counted as dropped.
func TestAccessLogFullRingDrops(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	up := startRawUpstream(t, rawBenchUpstream)
	g := startLoggingGateway(t, io.Discard, `
loops: 1
access_log: {path: %q, ring_size: 2}
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: all, prefix: /, upstream: backend}
`, path, up)
	c := g.dial(t)
	const n = 300
	var pipelined bytes.Buffer
	for i := 0; i < n; i++ {
		pipelined.Write(benchRequest)
	}
	if _, err := c.Write(pipelined.Bytes()); err != nil {
		t.Fatal(err)
	}
	want := n * len(benchResponse)
	got := 0
	buf := make([]byte, 64<<10)
	for got < want {
		k, err := c.Read(buf)
		if err != nil {
			t.Fatalf("after %d of %d response bytes: %v", got, want, err)
		}
		got += k
	}
	var dropped float64
	waitFor(t, "every request logged or dropped", func() bool {
		s := scrapeMetrics(t, g.srv)
		dropped = s.get(t, "loopgate_access_log_dropped_total")
		return s.get(t, "loopgate_access_log_lines_total")+dropped == n
	})
	// 300 exchanges finish in far less than the writer's 10 ms between
	// passes over a two-slot ring.
	if dropped == 0 {
		t.Error("nothing dropped: the ring held more than two records")
	}
}

// With the access log off, gateway-made errors still reach the error log:
// a connect failure names the node, and a 404 (the client's mistake) is not
// an error. Lines the rate limit held back are counted, so lines plus
// suppressed equal the failures.
func TestErrorLogWithoutAccessLog(t *testing.T) {
	var errLog logBuffer
	dead := closedPort(t)
	g := startLoggingGateway(t, &errLog, `
loops: 1
upstreams:
  - {name: dead, nodes: ["%s"]}
routes:
  - {id: down, prefix: /down, upstream: dead}
`, dead)
	if r := fetch(g.url("/nowhere")); r.err != nil || r.resp.StatusCode != 404 {
		t.Fatalf("GET /nowhere: %+v", r)
	}
	const failures = 25
	var ids []string
	for i := 0; i < failures; i++ {
		r := fetch(g.url(fmt.Sprintf("/down/%d", i)))
		if r.err != nil || r.resp.StatusCode != 502 {
			t.Fatalf("GET /down: %+v", r)
		}
		ids = append(ids, r.resp.Header.Get("X-Request-Id"))
	}
	var lines []logLine
	waitFor(t, "error lines and suppressed count to add up", func() bool {
		lines = jsonLines(t, errLog.Bytes())
		s := scrapeMetrics(t, g.srv)
		return float64(len(lines))+s.get(t, "loopgate_error_log_suppressed_total") == failures
	})
	first := lines[0]
	want := logLine{"level": "error", "event": "upstream_connect_failed", "status": 502.0, "code": 50201.0,
		"upstream": dead, "route": "down", "path": "/down/0", "method": "GET", "request_id": ids[0],
		"message": "upstream connect failed"}
	for k, v := range want {
		if first[k] != v {
			t.Errorf("error line: %s = %v, want %v (line %v)", k, first[k], v, first)
		}
	}
	for _, l := range lines {
		if l["status"] == 404.0 {
			t.Errorf("a 404 reached the error log: %v", l)
		}
	}
}

// GET /errors on a real admin port answers the error log's last lines,
// newest last: a 502 to a closed port shows there as the line the log wrote.
func TestAdminErrorsEndpoint(t *testing.T) {
	var errLog logBuffer
	dead := closedPort(t)
	g := startLoggingGateway(t, &errLog, `
loops: 1
upstreams:
  - {name: dead, nodes: ["%s"]}
routes:
  - {id: down, prefix: /down, upstream: dead}
`, dead)
	base := adminPort(t, g)
	var got struct {
		Lines []logLine `json:"lines"`
	}
	get := func() {
		r := fetch(base + "/errors")
		if r.err != nil || r.resp.StatusCode != 200 || r.resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("GET /errors: %+v", r)
		}
		got.Lines = nil
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatalf("GET /errors: %v\n%s", err, r.body)
		}
	}
	r := fetch(g.url("/down/x"))
	if r.err != nil || r.resp.StatusCode != 502 {
		t.Fatalf("GET /down/x: %+v", r)
	}
	id := r.resp.Header.Get("X-Request-Id")
	waitFor(t, "the 502's error line in GET /errors", func() bool {
		get()
		return len(got.Lines) > 0 && got.Lines[len(got.Lines)-1]["request_id"] == id
	})
	last := got.Lines[len(got.Lines)-1]
	if last["code"] != 50201.0 || last["route"] != "down" || last["status"] != 502.0 {
		t.Fatalf("newest line %v, want the 502's", last)
	}
	if written := jsonLines(t, errLog.Bytes()); len(written) == 0 || written[len(written)-1]["request_id"] != id {
		t.Fatalf("GET /errors has a line the error log did not end with: %v", written)
	}
}

// A request head that never completes gets 408 and an error line, though
// no exchange began.
func TestErrorLogHeadTimeout(t *testing.T) {
	var errLog logBuffer
	g := startLoggingGateway(t, &errLog, `
loops: 1
timeouts: {header_read: 100ms}
`)
	c := g.dial(t)
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n")
	b, _ := io.ReadAll(c)
	if !bytes.HasPrefix(b, []byte("HTTP/1.1 408")) {
		t.Fatalf("answer to a slow head: %q", b)
	}
	lines := waitLines(t, "error", 1, errLog.Bytes)
	if l := lines[0]; l["status"] != 408.0 || l["code"] != 40801.0 || l["event"] != "gateway_error" {
		t.Errorf("408 line: %v", l)
	}
}

// A keep-alive round trip allocates nothing in the whole process, with
// the per-request metrics off, on, and with the access log written to a
// file too. The writer's one allocation per batch of lines (sonic's) stays
// far below one per request.
func TestProxyAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	for _, tc := range []struct{ name, config string }{
		{"metrics off", metricsOff + oneRoute},
		{"metrics on", oneRoute},
		{"access log", accessLogTo(filepath.Join(t.TempDir(), "access.log")) + oneRoute},
		{"access log format", "access_log: {path: " + filepath.Join(t.TempDir(), "f.log") +
			", format: \"$time $request_id $client_ip $method $path $status $route $upstream $duration_us $filters\"}\n" + oneRoute},
		{"trace context", "trace_context: {}\naccess_log: {path: " + filepath.Join(t.TempDir(), "t.log") +
			", format: \"$request_id $trace_id $status\"}\n" + oneRoute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			roundTrip := keepAliveClient(t, tc.config, benchRequest)
			for i := 0; i < 1000; i++ { // warm pools and free lists
				roundTrip()
			}
			if n := testing.AllocsPerRun(2000, roundTrip); n != 0 {
				t.Errorf("%v allocations per round trip", n)
			}
		})
	}
}

// keepAliveClient starts a gateway on config in front of the raw bench
// upstream and returns a function that sends request on one keep-alive
// connection and reads its whole response, allocating nothing.
func keepAliveClient(t *testing.T, config string, request []byte) func() {
	t.Helper()
	pool.SetLeakDetection(false) // leak tracking records a stack per buffer
	t.Cleanup(func() { pool.SetLeakDetection(true) })
	g := startGateway(t, config, startRawUpstream(t, rawBenchUpstream))
	c := g.dial(t)
	buf := make([]byte, 4096)
	if _, err := c.Write(request); err != nil {
		t.Fatal(err)
	}
	want, err := c.Read(buf)
	if err != nil || !bytes.HasPrefix(buf, []byte("HTTP/1.1 200")) {
		t.Fatalf("first response %q: %v", buf[:want], err)
	}
	return func() {
		if _, err := c.Write(request); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAtLeast(c, buf, want); err != nil {
			t.Fatal(err)
		}
	}
}

// access_log.format through a gateway: each line has the chosen fields,
// in order, and nothing else.
func TestAccessLogFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	up := startUpstream(t, okHandler)
	g := startLoggingGateway(t, io.Discard, `
access_log: {path: %q, format: "$time $request_id $route $status $upstream_us $path"}
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: api, prefix: /api, upstream: backend}
`, path, up)
	served := fetch(g.url("/api/x"))
	if served.err != nil || served.resp.StatusCode != 200 {
		t.Fatalf("GET /api/x: %+v", served)
	}
	if r := fetch(g.url("/nowhere")); r.err != nil {
		t.Fatal(r.err)
	}
	lines := waitLines(t, "access", 2, func() []byte { b, _ := os.ReadFile(path); return b })
	raw, _ := os.ReadFile(path)
	for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
		if !bytes.HasPrefix(line, []byte(`{"time":"`)) || !bytes.Contains(line, []byte(`","request_id":"`)) {
			t.Errorf("line not in the format's order: %s", line)
		}
	}
	for _, l := range lines {
		if len(l) != 6 {
			t.Errorf("line has %d fields, want the format's 6: %v", len(l), l)
		}
	}
	ok := byPath(t, lines, "/api/x")
	if ok["route"] != "api" || ok["status"] != 200.0 || ok["request_id"] != served.resp.Header.Get("X-Request-Id") || ok["upstream_us"] == nil {
		t.Errorf("served line: %v", ok)
	}
	nr := byPath(t, lines, "/nowhere")
	if nr["route"] != "" || nr["status"] != 404.0 || nr["upstream_us"] != nil {
		t.Errorf("unrouted line: %v", nr)
	}
}

// error_log: {path, level}: the gateway's errors and the operator notices
// (the standard logger's lines, gnet's) are JSON lines of the one file,
// those below the level left out, and SIGUSR1's ReopenLogs moves them to a
// new file at the path.
func TestErrorLogConfigured(t *testing.T) {
	path := filepath.Join(t.TempDir(), "error.log")
	dead := closedPort(t)
	g := startGateway(t, `
error_log: {path: %q, level: warn}
upstreams:
  - {name: dead, nodes: ["%s"]}
routes:
  - {id: down, prefix: /, upstream: dead}
`, path, dead)
	if r := fetch(g.url("/down")); r.err != nil || r.resp.StatusCode != 502 {
		t.Fatalf("GET /down: %+v", r)
	}
	log.Printf("test: an info notice nobody wants")
	log.Printf("test: warning: a notice at warn")
	read := func(p string) func() []byte { return func() []byte { b, _ := os.ReadFile(p); return b } }
	var lines []logLine
	waitFor(t, "the notice and the error in the error log", func() bool {
		b := read(path)()
		lines = jsonLines(t, b)
		return bytes.Contains(b, []byte("a notice at warn")) && bytes.Contains(b, []byte(`"upstream_connect_failed"`))
	})
	for _, l := range lines {
		if strings.Contains(fmt.Sprint(l["message"]), "nobody wants") {
			t.Errorf("an info line with level warn: %v", l)
		}
		if l["message"] == "test: warning: a notice at warn" && (l["level"] != "warn" || l["event"] != "notice" || l["time"] == nil) {
			t.Errorf("notice line: %v", l)
		}
	}

	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	g.srv.ReopenLogs()
	waitFor(t, "a line in the reopened error log", func() bool {
		log.Printf("test: warning: after rotation")
		return bytes.Contains(read(path)(), []byte("after rotation"))
	})
	jsonLines(t, read(path)())
}
