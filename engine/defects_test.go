// Regressions from outside testing: sub-request answers split across reads,
// and requests parked by a filter that never resumes them.

package engine_test

import (
	"fmt"
	"strings"
	"testing"
)

// externalAuth is a route behind external auth; %s are the fail_open
// option, the auth timeout, the backend and the auth service.
const externalAuth = `
timeouts: {suspend: %s}
auth:
  external: {upstream: authsvc, path: /check, timeout: %s%s}
upstreams:
  - {name: backend, nodes: ["%s"]}
  - {name: authsvc, nodes: ["%s"]}
routes:
  - {id: ext, prefix: /, upstream: backend, external_auth: true}
`

// A 401 from the auth service written a byte at a time must still be a 401.
// When the split head was thrown away, fail_open turned it into an allow.
func TestExternalAuthSplitAnswer(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	for _, sizes := range splitSizes {
		authSvc := startScriptedUpstream(t, serveEach(func(*rawRequest) string {
			return "HTTP/1.1 401 Unauthorized\r\nContent-Length: 6\r\nX-Why: no\r\n\r\ndenied"
		}, sizes...))
		g := startGateway(t, externalAuth, "5s", "2s", ", fail_open: true", up.addr, authSvc.addr)
		resp, body := g.client(t).get("/x")
		expectError(t, resp, body, 401, 40101) // no credentials were sent
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("a denied request reached the backend %d times", n)
	}
}

// A request parked on a filter that never answers gets 504/50401 after
// timeouts.suspend, even when the filter's own deadline is longer.
func TestParkedRequestHasADeadline(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	authSvc := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.read(); err != nil {
			return
		}
		<-release // never answers while the test runs
	})
	g := startGateway(t, externalAuth, "300ms", "30s", "", up.addr, authSvc.addr)
	c := g.client(t)
	resp, body := c.get("/x")
	expectError(t, resp, body, 504, 50401)
	// The connection serves the next request (which parks and times out too).
	resp, body = c.get("/y")
	expectError(t, resp, body, 504, 50401)
	if n := len(up.requests()); n != 0 {
		t.Fatalf("the backend saw %d requests", n)
	}
}

// After a burst of large bodies the buffers go back to the OS once their
// connections close, rather than holding RSS at the burst's peak.
func TestMemoryReturnedAfterBurst(t *testing.T) {
	stall := make(chan struct{})
	up := startScriptedUpstream(t, func(c *upConn) { <-stall }) // never reads
	g := startGateway(t, "limits: {request_buffer_bytes: 0}\n"+oneRoute, up.addr)
	chunk := strings.Repeat("x", 64<<10)
	var clients []*rawClient
	for i := 0; i < 8; i++ {
		c := g.client(t)
		clients = append(clients, c)
		c.send("POST /x HTTP/1.1\r\nHost: test\r\nContent-Length: 10485760\r\n\r\n")
		go func() {
			for j := 0; j < 160; j++ {
				if _, err := c.Write([]byte(chunk)); err != nil {
					return
				}
			}
		}()
	}
	waitFor(t, "a 32MiB burst of stalled bodies", func() bool { return g.srv.BufferedBytes() >= 32<<20 })
	for _, c := range clients {
		c.Close()
	}
	close(stall)
	waitFor(t, "the buffers to be released", func() bool { return g.srv.BufferedBytes() == 0 })
	waitFor(t, "memory to be returned to the OS", func() bool { return g.srv.MemoryReturns() > 0 })
}

// A reload leaves the last version's compiled state behind: once the
// applies pause, a collection hands it back, without any burst of bodies.
func TestMemoryReturnedAfterApply(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, oneRoute, up)
	before := g.srv.MemoryReturns()
	if _, err := g.srv.Reload(parseTestConfig(t, oneRoute+"  - {id: other, path: /other, upstream: backend}\n", up)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "memory to be returned to the OS after the reload", func() bool { return g.srv.MemoryReturns() > before })
}

// The auth service judges the path the upstream will be sent, not the raw
// target: "/pub/../admin/x" must reach it as "/admin/x".
func TestExternalAuthSeesNormalisedTarget(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	authSvc := startScriptedUpstream(t, serveEach(func(*rawRequest) string {
		return "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	}))
	g := startGateway(t, externalAuth, "5s", "2s", "", up.addr, authSvc.addr)
	if resp, body := g.client(t).get("/pub/..//%61dmin/./x?q=%2F.."); resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	got := authSvc.requests()[0].req.Header.Get("X-Forwarded-Uri")
	if got != "/admin/x?q=%2F.." {
		t.Fatalf("auth service judged %q, want the normalised /admin/x?q=%%2F..", got)
	}
	if line := string(up.requests()[0].head); !strings.HasPrefix(line, "GET /admin/x?q=%2F.. HTTP/1.1\r\n") {
		t.Fatalf("upstream got %q", line)
	}
}

// Pipelined requests reuse the upstream connection the previous response
// arrived on: it goes back to the pool inside the read that completed it,
// and the bytes of that read are not "unread bytes" that forbid reuse.
func TestPipelinedRequestsReuseUpstream(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(func(r *rawRequest) string {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(r.req.URL.Path), r.req.URL.Path)
	}))
	g := startGateway(t, "loops: 1\n"+oneRoute, up.addr)
	c := g.client(t)
	var b strings.Builder
	const n = 20
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "GET /p%d HTTP/1.1\r\nHost: t\r\n\r\n", i)
	}
	c.send(b.String())
	for i := 0; i < n; i++ {
		resp, body := readResponse(t, c.br, "GET")
		if resp.StatusCode != 200 || string(body) != fmt.Sprintf("/p%d", i) {
			t.Fatalf("response %d: %d %q", i, resp.StatusCode, body)
		}
	}
	if got := up.connections(); got != 1 {
		t.Fatalf("%d pipelined requests used %d upstream connections, want 1", n, got)
	}
}

// A chunked body held whole is checked against its route's max_body_bytes
// before any upstream is asked.
func TestBufferedChunkedBodyOverRouteLimit(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: small, prefix: /, upstream: backend, limits: {max_body_bytes: 10}}
`, up.addr)
	resp, body := g.rawExchange(t, "POST /x HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n01234567\r\n8\r\n01234567\r\n0\r\n\r\n")
	expectError(t, resp, body, 413, 41301)
	if n := up.connections(); n != 0 {
		t.Fatalf("a body over the route limit reached the upstream (%d connections)", n)
	}
}

// An upstream that never stops sending interim responses cannot queue bytes
// without bound: past 16 the request fails with a 502.
func TestEndlessInterimResponses(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(func(*rawRequest) string {
		return strings.Repeat("HTTP/1.1 102 Processing\r\n\r\n", 40) + "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	}))
	g := startGateway(t, oneRoute, up.addr)
	c := g.client(t)
	c.send("GET /x HTTP/1.1\r\nHost: test\r\n\r\n")
	for i := 0; ; i++ {
		resp, body := readResponse(t, c.br, "GET")
		if resp.StatusCode == 102 {
			if i >= 16 {
				t.Fatalf("more than 16 interim responses forwarded")
			}
			continue
		}
		expectError(t, resp, body, 502, 50202)
		return
	}
}

// The split-offset probe of the response-framing issue: a 50-byte response
// written in two pieces, cut at every offset, always reaches the client as
// one 200 with its body.
func TestFiftyByteResponseSplitAtEveryOffset(t *testing.T) {
	const resp = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world"
	if len(resp) != 50 {
		t.Fatalf("probe is %d bytes", len(resp))
	}
	up := startScriptedUpstream(t, func(c *upConn) {
		for {
			r, err := c.read()
			if err != nil {
				return
			}
			var cut int
			fmt.Sscanf(r.req.URL.Path, "/cut/%d", &cut)
			// Two writes, cut at the offset.
			if c.writeSplit(resp, cut, len(resp)) != nil {
				return
			}
		}
	})
	g := startGateway(t, "loops: 1\n"+oneRoute, up.addr)
	c := g.client(t)
	bad := 0
	for cut := 1; cut < len(resp); cut++ {
		r, body := c.get(fmt.Sprintf("/cut/%d", cut))
		if r.StatusCode != 200 || string(body) != "hello world" {
			bad++
			t.Errorf("cut at %d: %d %q", cut, r.StatusCode, body)
		}
	}
	t.Logf("%d offsets, %d non-200", len(resp)-1, bad)
}

// A gateway-made answer is an ordinary response: the route's response
// header edits apply to it as to a proxied one, beside the rejection's own
// headers.
func TestLocalRepliesCarryRouteResponseHeaders(t *testing.T) {
	g := startGateway(t, `
upstreams:
  - {name: dead, nodes: ["%s"]}
routes:
  - id: down
    prefix: /
    upstream: dead
    response_headers: {set: {X-Frame-Options: deny, Content-Type: text/html}, add: {X-Served-By: gw}}
`, closedPort(t))
	resp, body := g.client(t).get("/x")
	expectError(t, resp, body, 502, 50201)
	h := resp.Header
	if h.Get("X-Frame-Options") != "deny" || h.Get("X-Served-By") != "gw" {
		t.Fatalf("the route's response headers are missing from a 502: %v", h)
	}
	if ct := h.Values("Content-Type"); len(ct) != 1 || ct[0] != "application/json" {
		t.Fatalf("Content-Type %q: a route edit must not reframe a gateway error", ct)
	}
}

// A held chunked body that arrives a byte at a time is validated across
// reads: a good one reaches the upstream whole, a bad one never does.
func TestHeldChunkedBodyByteByByte(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, oneRoute, up.addr)
	send := func(body string) *rawClient {
		c := g.client(t)
		c.send("POST /x HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
		for i := 0; i < len(body); i++ {
			if _, err := c.Write([]byte{body[i]}); err != nil {
				break // a rejected body: the gateway answered and closed
			}
			pause()
		}
		return c
	}
	c := send("5;a=b\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n")
	if resp, body := readResponse(t, c.br, "POST"); resp.StatusCode != 200 {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	got := up.requests()[0]
	if !strings.Contains(string(got.head), "\r\nContent-Length: 11\r\n") || string(got.body) != "hello world" {
		t.Fatalf("upstream got head %q body %q", got.head, got.body)
	}
	c = send("5\r\nhello\r\n6 \r\n world\r\n0\r\n\r\n") // whitespace after a size
	resp, body := readResponse(t, c.br, "POST")
	expectError(t, resp, body, 400, 40001)
	if n := len(up.requests()); n != 1 {
		t.Fatalf("the bad body reached the upstream (%d requests)", n)
	}
}

// A rewrite whose result does not normalise (here it climbs above the
// root) is refused with 400, and nothing reaches the upstream.
func TestRewriteResultIsNormalised(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: r, prefix: /r/, upstream: backend, rewrite: {regex: "^/r/(.*)$", replacement: "/a/$1/../../.."}}
  - {id: s, prefix: /s/, upstream: backend, rewrite: {regex: "^/s/(.*)$", replacement: "/a//./$1"}}
`, up.addr)
	resp, body := g.client(t).get("/r/x")
	expectError(t, resp, body, 400, 40001)
	if n := len(up.requests()); n != 0 {
		t.Fatalf("the upstream saw %d requests", n)
	}
	if resp, _ := g.client(t).get("/s/x"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if line := string(up.requests()[0].head); !strings.HasPrefix(line, "GET /a/x HTTP/1.1\r\n") {
		t.Fatalf("a rewritten path went upstream unnormalised: %q", line)
	}
}

// Request heads split anywhere: two pipelined requests sent a byte at a
// time, each piece its own read, are answered in order, and what the
// upstream sees is the normalised request.
func TestRequestHeadsByteByByte(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(func(r *rawRequest) string {
		return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(r.req.URL.Path), r.req.URL.Path)
	}))
	g := startGateway(t, oneRoute, up.addr)
	c := g.client(t)
	raw := "GET //a/./b HTTP/1.1\r\nHost: Test.\r\nX-A: 1\r\n\r\nGET /c%7e HTTP/1.1\r\nHost: test\r\n\r\n"
	for i := 0; i < len(raw); i++ {
		c.send(raw[i : i+1])
		pause()
	}
	for _, want := range []string{"/a/b", "/c~"} {
		if resp, body := readResponse(t, c.br, "GET"); resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, body, want)
		}
	}
	if head := string(up.requests()[0].head); !strings.Contains(head, "\r\nHost: test\r\n") {
		t.Fatalf("upstream head %q", head)
	}
}
