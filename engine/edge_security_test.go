// What the gateway checks is what the upstream acts on: path and Host
// normalisation, method-restricted routes, headers an upstream can fold,
// canonical request bodies, and bodies validated before any upstream sees
// them.

package engine_test

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// authAndPublic is an admin prefix behind auth beside a public catch-all,
// the layout every bypass below tries to walk around.
const authAndPublic = `
auth:
  jwt: {hs256_secret: "0123456789abcdef0123456789abcdef"}
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: admin, prefix: /admin/, upstream: backend, auth: required}
  - {id: secret, path: /m/secret, methods: [GET, POST], upstream: backend, auth: required}
  - {id: host-admin, prefix: /, host: admin.test, upstream: backend, auth: required}
  - {id: public, prefix: /, upstream: backend}
`

func okRaw(*rawRequest) string { return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" }

func TestPathNormalisedBeforeRouting(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, authAndPublic, up.addr)
	cases := []struct {
		target       string
		status, code int
	}{
		{"//admin/x", 401, 40101},
		{"/./admin/x", 401, 40101},
		{"/pub/../admin/x", 401, 40101},
		{"/%61dmin/x", 401, 40101},
		{"/%2e/admin/x", 401, 40101},
		{"/ADMIN/x", 401, 40101},
		{"/admin;x/y", 401, 40101},
		{"/admin%2fx", 400, 40001},
		{"/admin%5Cx", 400, 40001},
		{"/\\admin/x", 400, 40001},
		{"/a%00b", 400, 40001},
		{"/../admin/x", 400, 40001},
		{"/a/%2e%2e/%2e%2e/admin", 400, 40001},
		{"/a%zzb", 400, 40001},
	}
	for _, tc := range cases {
		c := g.client(t)
		c.send("GET " + tc.target + " HTTP/1.1\r\nHost: test\r\n\r\n")
		resp, body := readResponse(t, c.br, "GET")
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: status %d, want %d (%s)", tc.target, resp.StatusCode, tc.status, body)
			continue
		}
		expectError(t, resp, body, tc.status, tc.code)
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("the upstream saw %d of these requests: %q", n, up.requests()[0].head)
	}

	// The upstream gets the normalised path it was routed by, query intact.
	c := g.client(t)
	resp, _ := c.get("//pub/./a/../b%7e/%7Bc%7d?q=%2F..")
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	got := up.requests()[0].head
	if want := "GET /pub/b~/%7Bc%7D?q=%2F.. HTTP/1.1\r\n"; !strings.HasPrefix(string(got), want) {
		t.Fatalf("upstream request line %q, want %q", got, want)
	}
}

func TestEscapedSlashesKeptWhenRouteAllows(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: files, prefix: /files/, upstream: backend, escaped_slashes: keep}
  - {id: rest, prefix: /, upstream: backend}
`, up.addr)
	c := g.client(t)
	if resp, _ := c.get("/files/a%2fb"); resp.StatusCode != 200 {
		t.Fatalf("escaped slash on a keep route: %d", resp.StatusCode)
	}
	if got := string(up.requests()[0].head); !strings.HasPrefix(got, "GET /files/a%2Fb HTTP/1.1\r\n") {
		t.Fatalf("upstream got %q", got)
	}
	resp, body := c.get("/other/a%2fb")
	expectError(t, resp, body, 400, 40001)
}

func TestHostNormalisedBeforeRouting(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, authAndPublic, up.addr)
	cases := []struct {
		host         string
		status, code int
	}{
		{"admin.test", 401, 40101},
		{"ADMIN.Test", 401, 40101},
		{"admin.test.", 401, 40101},
		{"admin.test.:80", 401, 40101},
		{"admin.test:8080", 401, 40101},
		{"admin.test:80:80", 400, 40001},
		{"admin.test:99999", 400, 40001},
		{"admin.test:8o", 400, 40001},
		{"::1", 400, 40001},
	}
	for _, tc := range cases {
		resp, body := g.rawExchange(t, "GET /x HTTP/1.1\r\nHost: "+tc.host+"\r\n\r\n")
		if resp.StatusCode != tc.status {
			t.Errorf("Host %q: status %d, want %d (%s)", tc.host, resp.StatusCode, tc.status, body)
			continue
		}
		expectError(t, resp, body, tc.status, tc.code)
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("the upstream saw %d of these requests", n)
	}
	// The upstream gets the Host the route was chosen by.
	if resp, _ := g.rawExchange(t, "GET /x HTTP/1.1\r\nHost: WWW.Example.COM.:8080\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	head := string(up.requests()[0].head)
	if strings.Count(strings.ToLower(head), "\r\nhost:") != 1 || !strings.Contains(head, "\r\nHost: www.example.com:8080\r\n") {
		t.Fatalf("upstream head %q", head)
	}
}

func TestMethodRestrictedRouteAnswers405(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, authAndPublic, up.addr)
	for _, m := range []string{"PUT", "DELETE", "PATCH"} {
		resp, body := g.rawExchange(t, m+" /m/secret HTTP/1.1\r\nHost: test\r\n\r\n")
		expectError(t, resp, body, 405, 40501)
		if got := resp.Header.Get("Allow"); got != "GET, HEAD, POST" {
			t.Fatalf("%s: Allow %q", m, got)
		}
	}
	// The status line carries the standard reason, not "405 Error"; the
	// request is written a byte at a time.
	c := g.client(t)
	for _, b := range []byte("PUT /m/secret HTTP/1.1\r\nHost: test\r\n\r\n") {
		c.send(string(b))
	}
	line, err := c.br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 405 Method Not Allowed\r\n" {
		t.Fatalf("status line %q (%v)", line, err)
	}
	// HEAD goes wherever GET does.
	resp, _ := g.rawExchange(t, "HEAD /m/secret HTTP/1.1\r\nHost: test\r\n\r\n")
	if resp.StatusCode != 401 {
		t.Fatalf("HEAD /m/secret: %d, want 401 from the GET route's auth", resp.StatusCode)
	}
	if n := len(up.requests()); n != 0 {
		t.Fatalf("the upstream saw %d requests", n)
	}
}

func TestClientCannotPlantManagedHeaders(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	cfg := `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: public, prefix: /, upstream: backend}
`
	g := startGateway(t, cfg, up.addr)
	c := g.client(t)
	c.send("GET /x HTTP/1.1\r\nHost: test\r\nX_User_Id: u1\r\nX_Real_IP: 1.2.3.4\r\nX_Forwarded_For: 1.2.3.4\r\nX-User-Id: forged\r\nX-User-Roles: admin\r\nX-Keep: yes\r\n\r\n")
	if resp, _ := readResponse(t, c.br, "GET"); resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	head := strings.ToLower(string(up.requests()[0].head))
	for _, name := range []string{"x_user_id", "x_real_ip", "x_forwarded_for", "x-user-id", "x-user-roles"} {
		if strings.Contains(head, "\r\n"+name+":") {
			t.Errorf("client-sent %s reached the upstream: %q", name, head)
		}
	}
	if !strings.Contains(head, "\r\nx-keep: yes\r\n") {
		t.Fatalf("an ordinary header was dropped: %q", head)
	}

	// allow_underscore_headers keeps them (the managed ones still go).
	up2 := startScriptedUpstream(t, serveEach(okRaw))
	g2 := startGateway(t, "allow_underscore_headers: true\n"+cfg, up2.addr)
	c2 := g2.client(t)
	c2.send("GET /x HTTP/1.1\r\nHost: test\r\nX_Trace: t1\r\n\r\n")
	readResponse(t, c2.br, "GET")
	if head := string(up2.requests()[0].head); !strings.Contains(head, "\r\nX_Trace: t1\r\n") {
		t.Fatalf("allow_underscore_headers dropped the field: %q", head)
	}
}

func TestChunkedRequestReachesUpstreamCanonical(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	cases := []struct {
		buffer, framing, body string
	}{
		// Held whole: sent with a Content-Length, as nginx does, so an
		// HTTP/1.0 upstream can read it.
		{"64KiB", "\r\nContent-Length: 11\r\n", "hello world"},
		// Streamed: re-chunked, with bare sizes, no extensions, no trailers.
		{"0", "\r\nTransfer-Encoding: chunked\r\n", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"},
	}
	for _, tc := range cases {
		t.Run("request_buffer_bytes="+tc.buffer, func(t *testing.T) {
			g := startGateway(t, "limits: {request_buffer_bytes: "+tc.buffer+"}\n"+oneRoute, up.addr)
			c := g.client(t)
			before := len(up.requests())
			c.send("POST /x HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n" +
				"5;ext=1;q=\"a b\"\r\nhello\r\n00006\r\n world\r\n0\r\nX-Trailer: t\r\nHost: evil\r\n\r\n")
			if resp, body := readResponse(t, c.br, "POST"); resp.StatusCode != 200 {
				t.Fatalf("status %d %s", resp.StatusCode, body)
			}
			got := up.requests()[before]
			if !strings.Contains(string(got.head), tc.framing) || string(got.body) != tc.body {
				t.Fatalf("upstream got head %q body %q, want %q and body %q", got.head, got.body, tc.framing, tc.body)
			}
			if strings.Contains(string(got.head), "evil") || strings.Contains(string(got.head), "X-Trailer") {
				t.Fatalf("a trailer field reached the upstream head: %q", got.head)
			}
		})
	}
}

func TestBadSmallBodyNeverReachesUpstream(t *testing.T) {
	bodies := []string{
		"a \r\n0123456789\r\n0\r\n\r\n",   // whitespace after the size
		"2;\r\nhi\r\n0\r\n\r\n",           // empty extension
		"5;a=\"abc\r\nhello\r\n0\r\n\r\n", // unbalanced quote
		"5\r\nhello\r\nzz\r\n",            // bad size after a good chunk
		"5\r\nhelloXX0\r\n\r\n",           // missing CRLF after data
	}
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, oneRoute, up.addr)
	for _, b := range bodies {
		c := g.client(t)
		c.send("POST /x HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n" + b)
		resp, body := readResponse(t, c.br, "POST")
		expectError(t, resp, body, 400, 40001)
	}
	if n := up.connections(); n != 0 {
		t.Fatalf("the upstream was connected to %d times for bodies that were bad", n)
	}
	// With the upstream down, a bad body is still the client's 400, not a 502.
	g2 := startGateway(t, oneRoute, closedPort(t))
	resp, body := g2.rawExchange(t, "POST /x HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
	expectError(t, resp, body, 400, 40001)
}

func TestBufferedBodyTimesOut(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, "timeouts: {idle: 300ms}\n"+oneRoute, up.addr)
	c := g.client(t)
	c.send("POST /x HTTP/1.1\r\nHost: test\r\nContent-Length: 10\r\n\r\nabc")
	resp, body := readResponse(t, c.br, "POST")
	expectError(t, resp, body, 408, 40801)
	if up.connections() != 0 {
		t.Fatal("an incomplete small body reached the upstream")
	}
}

func TestHeaderReadCountsFromAccept(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, "timeouts: {header_read: 1s}\n"+oneRoute, up.addr)
	c := g.client(t)
	// The clock runs from the gateway's accept, which under load may come
	// well after the client's dial returned.
	waitFor(t, "the gateway to accept the client", func() bool { return g.srv.Clients() == 1 })
	// The first byte comes 0.8 s after the accept, or later on a loaded
	// machine. A clock restarted there would answer no sooner than 1 s
	// (less a wheel tick) after the byte was sent; one counting from the
	// accept answers at most 0.2 s after it, plus the machine's delays.
	time.Sleep(800 * time.Millisecond) // the client's lateness under test, not synchronisation
	sent := time.Now()
	c.send("G")
	resp, body := readResponse(t, c.br, "GET")
	expectError(t, resp, body, 408, 40801)
	if el := time.Since(sent); el >= 900*time.Millisecond {
		t.Fatalf("408 %v after the first byte: header_read restarted at it", el)
	}
}

func TestUpstreamExtraBytesNeverReachNextClient(t *testing.T) {
	closed := make(chan struct{}, 4)
	up := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.read(); err != nil {
			return
		}
		c.writeSplit("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst")
		pause()
		c.writeSplit("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra")
		// The gateway must drop this connection now: reading sees its close.
		if _, err := c.read(); err != nil {
			closed <- struct{}{}
			return
		}
		c.writeSplit("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nwrong")
	})
	g := startGateway(t, "loops: 1\n"+oneRoute, up.addr)
	c1 := g.client(t)
	if _, body := c1.get("/1"); string(body) != "first" {
		t.Fatalf("first client got %q", body)
	}
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway kept an upstream connection that sent bytes after its response")
	}
	c2 := g.client(t)
	if _, body := c2.get("/2"); string(body) != "first" {
		t.Fatalf("second client got %q", body)
	}
}

func TestResponseHeadLimits(t *testing.T) {
	manyHeaders := func(n int) string {
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, "X-H%d: v\r\n", i)
		}
		return b.String()
	}
	bigCookie := "Set-Cookie: c=" + strings.Repeat("a", 17<<10) + "\r\n"
	up := startScriptedUpstream(t, serveEach(func(r *rawRequest) string {
		extra := ""
		switch r.req.URL.Path {
		case "/60":
			extra = manyHeaders(60)
		case "/cookie":
			extra = bigCookie
		case "/120":
			extra = manyHeaders(120)
		case "/huge":
			extra = strings.Repeat(bigCookie, 4)
		}
		return "HTTP/1.1 200 OK\r\n" + extra + "Content-Length: 2\r\n\r\nok"
	}))
	g := startGateway(t, oneRoute, up.addr)
	c := g.client(t)
	for _, p := range []string{"/60", "/cookie"} {
		if resp, body := c.get(p); resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("%s: %d %q", p, resp.StatusCode, body)
		}
	}
	for _, p := range []string{"/120", "/huge"} {
		resp, body := g.client(t).get(p)
		expectError(t, resp, body, 502, 50203)
	}
}

func TestMaxConnections(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, "loops: 1\nlimits: {max_connections: 2}\n"+oneRoute, up.addr)
	held := []*rawClient{g.client(t), g.client(t)}
	for _, c := range held {
		if resp, _ := c.get("/x"); resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	third := g.client(t)
	third.send("GET /x HTTP/1.1\r\nHost: test\r\n\r\n")
	if b, err := third.br.ReadByte(); err == nil {
		t.Fatalf("a connection past max_connections was served (read %q)", b)
	}
	if g.srv.RefusedConnections() == 0 {
		t.Fatal("the refused connection was not counted")
	}
	held[0].Close()
	waitFor(t, "the closed connection to be forgotten", func() bool { return g.srv.Clients() < 2 })
	if resp, _ := g.client(t).get("/x"); resp.StatusCode != 200 {
		t.Fatalf("after a slot freed: %d", resp.StatusCode)
	}
}

func TestBufferBudgetRejectsNewBodies(t *testing.T) {
	// The upstream never reads request bodies, so they pile up.
	stall := make(chan struct{})
	t.Cleanup(func() { close(stall) })
	up := startScriptedUpstream(t, func(c *upConn) {
		if start, err := c.br.Peek(3); err != nil || string(start) != "GET" {
			<-stall
			return
		}
		serveEach(okRaw)(c)
	})
	g := startGateway(t, "limits: {max_buffered_bytes: 1MiB, request_buffer_bytes: 0}\n"+oneRoute, up.addr)
	big := g.client(t)
	big.send("POST /x HTTP/1.1\r\nHost: test\r\nContent-Length: 10485760\r\n\r\n")
	chunk := strings.Repeat("x", 64<<10)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for i := 0; i < 160; i++ {
			if _, err := big.Write([]byte(chunk)); err != nil {
				return
			}
		}
	}()
	// Once the whole body is written, kernel buffers are full and what the
	// gateway holds can only grow until the upstream times out.
	<-written
	waitFor(t, "the stalled body to fill the budget", func() bool { return g.srv.BufferedBytes() >= 1<<20 })
	c := g.client(t)
	c.send("POST /x HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\nhello")
	resp, body := readResponse(t, c.br, "POST")
	expectError(t, resp, body, 503, 50303)
	if resp.Header.Get("Retry-After") == "" {
		t.Fatal("503/50303 without Retry-After")
	}
	// Requests without a body are still served.
	if resp, _ := g.client(t).get("/x"); resp.StatusCode != 200 {
		t.Fatalf("GET while the budget is spent: %d", resp.StatusCode)
	}
}

// waitFor polls cond until it holds, failing after 30 s (room for a loaded
// machine under -race). It waits for state the test cannot be told about
// (a counter inside the gateway).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
