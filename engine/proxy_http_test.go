// HTTP semantics through the proxy: pipelining, keep-alive reuse, Connection
// handling, bodiless responses, HTTP/1.0 clients, hop-by-hop headers, Expect.

package engine_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pxOK is a 200 response with a Content-Length body.
func pxOK(body string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// pathHandler answers with the request path, and with the body after it
// when there is one.
var pathHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	io.WriteString(w, r.URL.Path+string(body))
})

func TestProxyPipelinedInOrder(t *testing.T) {
	up := startUpstream(t, pathHandler)
	g := startGateway(t, oneRoute, up)
	c := g.client(t)
	c.send("GET /first HTTP/1.1\r\nHost: test\r\n\r\n" +
		"POST /second HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\n:body" +
		"GET /third HTTP/1.1\r\nHost: test\r\n\r\n" +
		"POST /fourth HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n:ch\r\n0\r\n\r\n" +
		"GET /fifth HTTP/1.1\r\nHost: test\r\n\r\n")
	for _, want := range []string{"/first", "/second:body", "/third", "/fourth:ch", "/fifth"} {
		resp, body := readResponse(t, c.br, "GET")
		if resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, body, want)
		}
	}
	// The connection is still in sync for a sixth request.
	if resp, body := c.get("/sixth"); resp.StatusCode != 200 || string(body) != "/sixth" {
		t.Fatalf("after pipeline: %d %q", resp.StatusCode, body)
	}
}

func TestProxyPipelinedWith404(t *testing.T) {
	up := startUpstream(t, pathHandler)
	g := startGateway(t, `
upstreams:
  - name: backend
    nodes: ["%s"]
routes:
  - id: exact
    path: /one
    upstream: backend
  - id: pre
    prefix: /p/
    upstream: backend
`, up)
	c := g.client(t)
	c.send("GET /p/a HTTP/1.1\r\nHost: test\r\n\r\n" +
		"GET /nomatch HTTP/1.1\r\nHost: test\r\n\r\n" +
		"GET /one HTTP/1.1\r\nHost: test\r\n\r\n" +
		"GET /one/more HTTP/1.1\r\nHost: test\r\n\r\n" +
		"GET /p/b HTTP/1.1\r\nHost: test\r\n\r\n")
	resp, body := readResponse(t, c.br, "GET")
	if resp.StatusCode != 200 || string(body) != "/p/a" {
		t.Fatalf("first: %d %q", resp.StatusCode, body)
	}
	resp, body = readResponse(t, c.br, "GET")
	expectError(t, resp, body, 404, 40401)
	resp, body = readResponse(t, c.br, "GET")
	if resp.StatusCode != 200 || string(body) != "/one" {
		t.Fatalf("third: %d %q", resp.StatusCode, body)
	}
	resp, body = readResponse(t, c.br, "GET")
	expectError(t, resp, body, 404, 40401)
	resp, body = readResponse(t, c.br, "GET")
	if resp.StatusCode != 200 || string(body) != "/p/b" {
		t.Fatalf("fifth: %d %q", resp.StatusCode, body)
	}
}

func TestProxyKeepAliveReusesUpstream(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(func(r *rawRequest) string { return pxOK(r.req.URL.Path) }))
	g := startGateway(t, oneRoute, up.addr)

	const clients, total = 4, 200
	cs := make([]*rawClient, clients)
	for i := range cs {
		cs[i] = g.client(t)
	}
	for i := 0; i < total; i++ { // strictly sequential, round robin over the clients
		path := fmt.Sprintf("/r%d", i)
		resp, body := cs[i%clients].get(path)
		if resp.StatusCode != 200 || string(body) != path {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		if resp.Close {
			t.Fatalf("request %d: gateway asked to close a keep-alive connection", i)
		}
	}
	if n := len(up.requests()); n != total {
		t.Fatalf("upstream saw %d requests, want %d", n, total)
	}
	// Requests are sequential and a pooled connection is returned before the
	// client sees the end of its response, so each loop needs one upstream
	// connection at most.
	const loops = 2 // startGateway
	if n := up.connections(); n < 1 || n > loops {
		t.Fatalf("upstream saw %d connections for %d sequential requests, want 1..%d", n, total, loops)
	}
}

func TestProxyClientConnectionClose(t *testing.T) {
	up := startUpstream(t, pathHandler)
	g := startGateway(t, oneRoute, up)
	c := g.client(t)
	c.send("GET /bye HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
	resp, body := readResponse(t, c.br, "GET")
	if resp.StatusCode != 200 || string(body) != "/bye" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if !resp.Close { // net/http takes "Connection: close" out of the header into Close
		t.Fatalf("response lacks Connection: close; header %q", resp.Header)
	}
	expectClosedConn(t, c, c.br, false)
}

func TestProxyUpstreamConnectionClose(t *testing.T) {
	var reused atomic.Int64
	up := startScriptedUpstream(t, serveEach(func(r *rawRequest) string {
		if r.seq > 0 { // the gateway sent a request on a connection we said we would close
			reused.Add(1)
			return "HTTP/1.1 500 Reused\r\nContent-Length: 6\r\n\r\nreused"
		}
		// Say close but keep the socket open: a gateway that ignores the
		// header would send its next request here.
		return "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: " +
			fmt.Sprint(len(r.req.URL.Path)) + "\r\n\r\n" + r.req.URL.Path
	}))
	g := startGateway(t, oneRoute, up.addr)
	c := g.client(t)
	const n = 5
	for i := 0; i < n; i++ {
		path := fmt.Sprintf("/n%d", i)
		resp, body := c.get(path)
		if resp.StatusCode != 200 || string(body) != path {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		if resp.Close || resp.Header.Get("Connection") != "" {
			t.Fatalf("request %d: upstream's Connection header reached the client: %q", i, resp.Header.Values("Connection"))
		}
	}
	if r := reused.Load(); r != 0 {
		t.Fatalf("gateway reused an upstream connection after Connection: close, %d times", r)
	}
	if got := up.connections(); got != n {
		t.Fatalf("upstream saw %d connections for %d requests, want one each", got, n)
	}
}

// bodilessUpstream answers by path with responses that have no body, some
// of them announcing one anyway.
func bodilessUpstream(t *testing.T) string {
	up := startScriptedUpstream(t, serveEach(func(r *rawRequest) string {
		switch r.req.URL.Path {
		case "/head":
			// A correct HEAD answer: the length of the body GET would get.
			return "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nX-Kind: head\r\n\r\n"
		case "/204":
			return "HTTP/1.1 204 No Content\r\nX-Kind: 204\r\n\r\n"
		case "/204-lying":
			// Announces a body a 204 cannot have, and sends it.
			return "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\nX-Kind: 204\r\n\r\njunk!"
		case "/304":
			return "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\nETag: \"v1\"\r\nX-Kind: 304\r\n\r\n"
		}
		return pxOK("next:" + r.req.URL.Path)
	}))
	return up.addr
}

func TestProxyBodilessResponsesKeepFraming(t *testing.T) {
	g := startGateway(t, oneRoute, bodilessUpstream(t))
	cases := []struct {
		method, path string
		status       int
		kind         string
	}{
		{"HEAD", "/head", 200, "head"},
		{"GET", "/204", 204, "204"},
		{"GET", "/204-lying", 204, "204"},
		{"GET", "/304", 304, "304"},
		{"HEAD", "/304", 304, "304"},
	}
	for _, tc := range cases {
		t.Run(tc.method+tc.path, func(t *testing.T) {
			c := g.client(t)
			for round := 0; round < 2; round++ {
				c.send(tc.method + " " + tc.path + " HTTP/1.1\r\nHost: test\r\n\r\n")
				resp, body := readResponse(t, c.br, tc.method)
				if resp.StatusCode != tc.status || resp.Header.Get("X-Kind") != tc.kind || len(body) != 0 {
					t.Fatalf("round %d: %d kind %q body %q", round, resp.StatusCode, resp.Header.Get("X-Kind"), body)
				}
				if tc.path == "/head" && resp.Header.Get("Content-Length") != "1234" {
					t.Fatalf("HEAD lost its Content-Length: %q", resp.Header)
				}
				if resp.Header.Get("Transfer-Encoding") != "" || len(resp.TransferEncoding) != 0 {
					t.Fatalf("bodiless response got Transfer-Encoding: %q", resp.TransferEncoding)
				}
				// Any byte the gateway forwarded as a body would break this.
				resp, body = c.get("/after")
				if resp.StatusCode != 200 || string(body) != "next:/after" {
					t.Fatalf("round %d: request after %s %s: %d %q", round, tc.method, tc.path, resp.StatusCode, body)
				}
			}
		})
	}
}

// chunkedHandler streams its answer in flushed pieces, without a length,
// so net/http sends it chunked.
var chunkedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	for _, piece := range []string{"alpha-", "beta-", "gamma"} {
		io.WriteString(w, piece)
		w.(http.Flusher).Flush()
	}
})

func TestProxyHTTP10Client(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			chunkedHandler(w, r)
			return
		}
		io.WriteString(w, "plain:"+r.URL.Path)
	}))
	closeUp := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.read(); err == nil {
			io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\nuntil-close")
		}
	})
	g := startGateway(t, `
upstreams:
  - name: backend
    nodes: ["%s"]
  - name: close
    nodes: ["%s"]
routes:
  - prefix: /close
    upstream: close
  - prefix: /
    upstream: backend
`, up, closeUp.addr)

	// readToEOF reads one HTTP/1.0-style exchange: the whole stream until
	// the gateway closes, which must hold exactly one response.
	readToEOF := func(t *testing.T, raw string) (*http.Response, []byte) {
		t.Helper()
		c := g.client(t)
		c.send(raw)
		all, err := io.ReadAll(c.br)
		if err != nil {
			t.Fatalf("reading until close: %v (got %q)", err, all)
		}
		br := bufio.NewReader(bytes.NewReader(all))
		resp, body := readResponse(t, br, "GET")
		if br.Buffered() > 0 {
			rest, _ := br.Peek(br.Buffered())
			t.Fatalf("bytes after the response: %q", rest)
		}
		return resp, body
	}

	for _, host := range []string{"Host: test\r\n", ""} {
		name := "with-host"
		if host == "" {
			name = "no-host"
		}
		t.Run(name+"/length", func(t *testing.T) {
			resp, body := readToEOF(t, "GET /p HTTP/1.0\r\n"+host+"\r\n")
			if resp.StatusCode != 200 || string(body) != "plain:/p" {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
		})
		t.Run(name+"/chunked-upstream", func(t *testing.T) {
			resp, body := readToEOF(t, "GET /chunked HTTP/1.0\r\n"+host+"\r\n")
			if resp.StatusCode != 200 || string(body) != "alpha-beta-gamma" {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			if len(resp.TransferEncoding) != 0 || resp.Header.Get("Transfer-Encoding") != "" {
				t.Fatalf("HTTP/1.0 client got Transfer-Encoding %q", resp.TransferEncoding)
			}
			if resp.ContentLength != -1 {
				t.Fatalf("decoded body carries Content-Length %d", resp.ContentLength)
			}
		})
	}

	t.Run("close-delimited-upstream", func(t *testing.T) {
		resp, body := readToEOF(t, "GET /close HTTP/1.0\r\nHost: test\r\nConnection: keep-alive\r\n\r\n")
		if resp.StatusCode != 200 || string(body) != "until-close" {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
		if len(resp.TransferEncoding) != 0 || !resp.Close {
			t.Fatalf("framing %q, close %v: want a body ended by close", resp.TransferEncoding, resp.Close)
		}
	})

	t.Run("keep-alive", func(t *testing.T) {
		c := g.client(t)
		for i := 0; i < 2; i++ {
			c.send("GET /ka HTTP/1.0\r\nHost: test\r\nConnection: keep-alive\r\n\r\n")
			resp, body := readResponse(t, c.br, "GET")
			if resp.StatusCode != 200 || string(body) != "plain:/ka" {
				t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
			}
			if !strings.EqualFold(resp.Header.Get("Connection"), "keep-alive") {
				t.Fatalf("request %d: Connection %q, want keep-alive", i, resp.Header.Get("Connection"))
			}
		}
		// A chunked upstream answer cannot be framed for HTTP/1.0 without
		// a close, so the keep-alive ends here.
		c.send("GET /chunked HTTP/1.0\r\nHost: test\r\nConnection: keep-alive\r\n\r\n")
		resp, body := readResponse(t, c.br, "GET")
		if resp.StatusCode != 200 || string(body) != "alpha-beta-gamma" {
			t.Fatalf("chunked: %d %q", resp.StatusCode, body)
		}
		expectClosedConn(t, c, c.br, false)
	})
}

func TestProxyHopByHopHeaders(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(func(*rawRequest) string {
		return "HTTP/1.1 200 OK\r\n" +
			"Content-Length: 2\r\n" +
			"Keep-Alive: timeout=5, max=100\r\n" +
			"Connection: X-Internal\r\n" +
			"X-Internal: secret\r\n" +
			"Proxy-Connection: keep-alive\r\n" +
			"X-Public: yes\r\n" +
			"\r\nok"
	}))
	g := startGateway(t, oneRoute, up.addr)
	c := g.client(t)
	c.send("GET /h?q=1 HTTP/1.1\r\n" +
		"Host: Example.COM:8080\r\n" +
		"Connection: X-Secret\r\n" +
		"X-Secret: 1\r\n" +
		"Keep-Alive: timeout=9\r\n" +
		"Proxy-Authorization: Basic Zm9vOmJhcg==\r\n" +
		"Proxy-Connection: keep-alive\r\n" +
		"TE: trailers\r\n" +
		"Upgrade: foo\r\n" +
		"X-Kept: yes\r\n" +
		"\r\n")
	resp, body := readResponse(t, c.br, "GET")
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	r := up.requests()[0].req
	if r.Host != "example.com:8080" { // normalised: what the route was chosen by
		t.Errorf("upstream Host %q, want example.com:8080", r.Host)
	}
	if r.URL.RequestURI() != "/h?q=1" {
		t.Errorf("upstream target %q", r.URL.RequestURI())
	}
	for _, name := range []string{"Connection", "X-Secret", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection", "Te", "Upgrade"} {
		if v, ok := r.Header[name]; ok {
			t.Errorf("upstream got hop-by-hop %s: %q", name, v)
		}
	}
	if r.Header.Get("X-Kept") != "yes" {
		t.Errorf("end-to-end header lost: %q", r.Header)
	}
	for _, name := range []string{"Keep-Alive", "Connection", "X-Internal", "Proxy-Connection"} {
		if v, ok := resp.Header[name]; ok {
			t.Errorf("client got hop-by-hop %s: %q", name, v)
		}
	}
	if resp.Header.Get("X-Public") != "yes" {
		t.Errorf("end-to-end response header lost: %q", resp.Header)
	}
}

func TestProxyAbsoluteFormHost(t *testing.T) {
	// Heads are taken raw: net/http would refuse a second Host before the
	// test could count it.
	heads := make(chan []byte, 1)
	up := startScriptedUpstream(t, serveHeads(func(head []byte) string {
		heads <- head
		return pxOK(strings.Fields(string(head))[1]) // the request target
	}))
	g := startGateway(t, oneRoute, up.addr)
	// RFC 9112 3.2.2: the target's authority replaces the Host header, and
	// the upstream must see the host the request was routed by.
	for _, tc := range []struct{ raw, host string }{
		{"GET http://target.example/abs?x=1 HTTP/1.1\r\nHost: other.example\r\n\r\n", "target.example"},
		{"GET HTTP://Target.Example:8080/abs?x=1 HTTP/1.1\r\nHost: other.example\r\n\r\n", "target.example:8080"},
		{"GET http://target.example/abs?x=1 HTTP/1.0\r\n\r\n", "target.example"},
	} {
		resp, body := g.rawExchange(t, tc.raw)
		if resp.StatusCode != 200 || string(body) != "/abs?x=1" {
			t.Fatalf("%q: got %d %q", tc.raw, resp.StatusCode, body)
		}
		if hosts := hostLines(<-heads); len(hosts) != 1 || hosts[0] != tc.host {
			t.Fatalf("%q: upstream Host lines %q, want exactly %q", tc.raw, hosts, tc.host)
		}
	}
}

func TestProxyExpectContinueRaw(t *testing.T) {
	up := startUpstream(t, pathHandler)
	g := startGateway(t, oneRoute, up)
	c := g.client(t)
	const payload = "expected body"
	c.send(fmt.Sprintf("POST /exp HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", len(payload)))
	// The body is withheld until the upstream's 100 Continue comes through.
	interim, err := http.ReadResponse(c.br, &http.Request{Method: "POST"})
	if err != nil {
		t.Fatalf("reading interim response: %v", err)
	}
	if interim.StatusCode != 100 {
		t.Fatalf("got %d before the body was sent, want 100 Continue", interim.StatusCode)
	}
	c.send(payload)
	resp, body := readResponse(t, c.br, "POST")
	if resp.StatusCode != 200 || string(body) != "/exp"+payload {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if resp, body := c.get("/next"); resp.StatusCode != 200 || string(body) != "/next" {
		t.Fatalf("after 100-continue: %d %q", resp.StatusCode, body)
	}
}

func TestProxyExpectContinueGoClient(t *testing.T) {
	var sawExpect atomic.Bool
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawExpect.Store(r.Header.Get("Expect") == "100-continue")
		pathHandler(w, r)
	}))
	g := startGateway(t, oneRoute, up)
	// A long wait: without the 100 Continue the client would stall for it.
	tr := &http.Transport{ExpectContinueTimeout: time.Minute}
	defer tr.CloseIdleConnections()
	payload := strings.Repeat("0123456789", 10000)
	req, err := http.NewRequest("PUT", g.url("/put"), strings.NewReader(payload))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Expect", "100-continue")
	var interim atomic.Bool
	trace := &httptrace.ClientTrace{Got100Continue: func() { interim.Store(true) }}
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
	resp, err := (&http.Client{Transport: tr, Timeout: testClient.Timeout}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || string(body) != "/put"+payload {
		t.Fatalf("got %d, %d bytes", resp.StatusCode, len(body))
	}
	if !interim.Load() {
		t.Fatal("client never saw 100 Continue")
	}
	// The gateway answered the Expect itself (as nginx and Envoy do); the
	// upstream must not get it, or an upstream that ignores Expect would
	// make the gateway's own body stream wait on a 100 it never sends.
	if sawExpect.Load() {
		t.Fatal("the upstream got the Expect header the gateway already answered")
	}
}
