// HTTP semantics through the proxy: pipelining, keep-alive reuse, Connection
// handling, bodiless responses, HTTP/1.0 clients, hop-by-hop headers, Expect.

package engine_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// pxRawHandler answers one request read by a raw upstream. conn numbers the
// upstream connection (from 0), seq the request on it (from 0). It returns
// the whole response as it goes on the wire, and whether to close after it.
type pxRawHandler func(conn, seq int, r *http.Request, body []byte) (resp string, closeAfter bool)

// startRawHTTPUpstream runs a raw upstream that parses requests with
// net/http but writes whatever fn returns, byte for byte. It returns the
// address and a counter of accepted connections.
func startRawHTTPUpstream(t *testing.T, fn pxRawHandler) (string, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	addr := startRawUpstream(t, func(c net.Conn) {
		id := int(conns.Add(1) - 1)
		br := bufio.NewReader(c)
		for seq := 0; ; seq++ {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			resp, closeAfter := fn(id, seq, r, body)
			if _, err := io.WriteString(c, resp); err != nil || closeAfter {
				return
			}
		}
	})
	return addr, &conns
}

// pxOK is a 200 response with a Content-Length body.
func pxOK(body string) string {
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// pxDial opens a raw connection with its reader.
func pxDial(t *testing.T, g *gateway) (net.Conn, *bufio.Reader) {
	t.Helper()
	c := g.dial(t)
	return c, bufio.NewReader(c)
}

// pxWrite writes raw bytes or fails the test.
func pxWrite(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		t.Fatalf("write: %v", err)
	}
}

// pxExpectEOF asserts the peer closed the connection with nothing more to read.
func pxExpectEOF(t *testing.T, br *bufio.Reader) {
	t.Helper()
	b, err := br.ReadByte()
	if err == nil {
		rest, _ := br.Peek(br.Buffered())
		t.Fatalf("expected EOF, got more bytes: %q", append([]byte{b}, rest...))
	}
	if !errors.Is(err, io.EOF) {
		t.Fatalf("expected EOF, got %v", err)
	}
}

// pxGet sends a GET on a raw connection and reads the response.
func pxGet(t *testing.T, c net.Conn, br *bufio.Reader, path string) (*http.Response, []byte) {
	t.Helper()
	pxWrite(t, c, "GET "+path+" HTTP/1.1\r\nHost: test\r\n\r\n")
	return readResponse(t, br, "GET")
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
	c, br := pxDial(t, g)
	pxWrite(t, c, "GET /first HTTP/1.1\r\nHost: test\r\n\r\n"+
		"POST /second HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\n:body"+
		"GET /third HTTP/1.1\r\nHost: test\r\n\r\n"+
		"POST /fourth HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n:ch\r\n0\r\n\r\n"+
		"GET /fifth HTTP/1.1\r\nHost: test\r\n\r\n")
	for _, want := range []string{"/first", "/second:body", "/third", "/fourth:ch", "/fifth"} {
		resp, body := readResponse(t, br, "GET")
		if resp.StatusCode != 200 || string(body) != want {
			t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, body, want)
		}
	}
	// The connection is still in sync for a sixth request.
	if resp, body := pxGet(t, c, br, "/sixth"); resp.StatusCode != 200 || string(body) != "/sixth" {
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
	c, br := pxDial(t, g)
	pxWrite(t, c, "GET /p/a HTTP/1.1\r\nHost: test\r\n\r\n"+
		"GET /nomatch HTTP/1.1\r\nHost: test\r\n\r\n"+
		"GET /one HTTP/1.1\r\nHost: test\r\n\r\n"+
		"GET /one/more HTTP/1.1\r\nHost: test\r\n\r\n"+
		"GET /p/b HTTP/1.1\r\nHost: test\r\n\r\n")
	resp, body := readResponse(t, br, "GET")
	if resp.StatusCode != 200 || string(body) != "/p/a" {
		t.Fatalf("first: %d %q", resp.StatusCode, body)
	}
	resp, body = readResponse(t, br, "GET")
	expectError(t, resp, body, 404, 40401)
	resp, body = readResponse(t, br, "GET")
	if resp.StatusCode != 200 || string(body) != "/one" {
		t.Fatalf("third: %d %q", resp.StatusCode, body)
	}
	resp, body = readResponse(t, br, "GET")
	expectError(t, resp, body, 404, 40401)
	resp, body = readResponse(t, br, "GET")
	if resp.StatusCode != 200 || string(body) != "/p/b" {
		t.Fatalf("fifth: %d %q", resp.StatusCode, body)
	}
}

func TestProxyKeepAliveReusesUpstream(t *testing.T) {
	var newConns, requests atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	us := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			io.WriteString(w, r.URL.Path)
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				newConns.Add(1)
			}
		},
	}
	go us.Serve(ln)
	t.Cleanup(func() { us.Close() })
	g := startGateway(t, oneRoute, ln.Addr().String())

	const clients, total = 4, 200
	type client struct {
		c  net.Conn
		br *bufio.Reader
	}
	cs := make([]client, clients)
	for i := range cs {
		cs[i].c, cs[i].br = pxDial(t, g)
	}
	for i := 0; i < total; i++ { // strictly sequential, round robin over the clients
		cl := cs[i%clients]
		path := fmt.Sprintf("/r%d", i)
		resp, body := pxGet(t, cl.c, cl.br, path)
		if resp.StatusCode != 200 || string(body) != path {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		if resp.Close {
			t.Fatalf("request %d: gateway asked to close a keep-alive connection", i)
		}
	}
	if n := requests.Load(); n != total {
		t.Fatalf("upstream saw %d requests, want %d", n, total)
	}
	// Requests are sequential and a pooled connection is returned before the
	// client sees the end of its response, so each loop needs one upstream
	// connection at most.
	const loops = 2 // startGateway
	if n := newConns.Load(); n < 1 || n > loops {
		t.Fatalf("upstream saw %d connections for %d sequential requests, want 1..%d", n, total, loops)
	}
}

func TestProxyClientConnectionClose(t *testing.T) {
	up := startUpstream(t, pathHandler)
	g := startGateway(t, oneRoute, up)
	c, br := pxDial(t, g)
	pxWrite(t, c, "GET /bye HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
	resp, body := readResponse(t, br, "GET")
	if resp.StatusCode != 200 || string(body) != "/bye" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if !resp.Close { // net/http takes "Connection: close" out of the header into Close
		t.Fatalf("response lacks Connection: close; header %q", resp.Header)
	}
	pxExpectEOF(t, br)
}

func TestProxyUpstreamConnectionClose(t *testing.T) {
	var reused atomic.Int64
	up, conns := startRawHTTPUpstream(t, func(conn, seq int, r *http.Request, body []byte) (string, bool) {
		if seq > 0 { // the gateway sent a request on a connection we said we would close
			reused.Add(1)
			return "HTTP/1.1 500 Reused\r\nContent-Length: 6\r\n\r\nreused", false
		}
		// Say close but keep the socket open: a gateway that ignores the
		// header would send its next request here.
		return "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: " +
			fmt.Sprint(len(r.URL.Path)) + "\r\n\r\n" + r.URL.Path, false
	})
	g := startGateway(t, oneRoute, up)
	c, br := pxDial(t, g)
	const n = 5
	for i := 0; i < n; i++ {
		path := fmt.Sprintf("/n%d", i)
		resp, body := pxGet(t, c, br, path)
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
	if got := conns.Load(); got != n {
		t.Fatalf("upstream saw %d connections for %d requests, want one each", got, n)
	}
}

// bodilessUpstream answers by path with responses that have no body, some
// of them announcing one anyway.
func bodilessUpstream(t *testing.T) string {
	up, _ := startRawHTTPUpstream(t, func(conn, seq int, r *http.Request, body []byte) (string, bool) {
		switch r.URL.Path {
		case "/head":
			// A correct HEAD answer: the length of the body GET would get.
			return "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nX-Kind: head\r\n\r\n", false
		case "/204":
			return "HTTP/1.1 204 No Content\r\nX-Kind: 204\r\n\r\n", false
		case "/204-lying":
			// Announces a body a 204 cannot have, and sends it.
			return "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\nX-Kind: 204\r\n\r\njunk!", false
		case "/304":
			return "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\nETag: \"v1\"\r\nX-Kind: 304\r\n\r\n", false
		}
		return pxOK("next:" + r.URL.Path), false
	})
	return up
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
			c, br := pxDial(t, g)
			for round := 0; round < 2; round++ {
				pxWrite(t, c, tc.method+" "+tc.path+" HTTP/1.1\r\nHost: test\r\n\r\n")
				resp, body := readResponse(t, br, tc.method)
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
				resp, body = pxGet(t, c, br, "/after")
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
	closeUp := startRawUpstream(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
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
`, up, closeUp)

	// readToEOF reads one HTTP/1.0-style exchange: the whole stream until
	// the gateway closes, which must hold exactly one response.
	readToEOF := func(t *testing.T, raw string) (*http.Response, []byte) {
		t.Helper()
		c := g.dial(t)
		pxWrite(t, c, raw)
		all, err := io.ReadAll(c)
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
		c, br := pxDial(t, g)
		for i := 0; i < 2; i++ {
			pxWrite(t, c, "GET /ka HTTP/1.0\r\nHost: test\r\nConnection: keep-alive\r\n\r\n")
			resp, body := readResponse(t, br, "GET")
			if resp.StatusCode != 200 || string(body) != "plain:/ka" {
				t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
			}
			if !strings.EqualFold(resp.Header.Get("Connection"), "keep-alive") {
				t.Fatalf("request %d: Connection %q, want keep-alive", i, resp.Header.Get("Connection"))
			}
		}
		// A chunked upstream answer cannot be framed for HTTP/1.0 without
		// a close, so the keep-alive ends here.
		pxWrite(t, c, "GET /chunked HTTP/1.0\r\nHost: test\r\nConnection: keep-alive\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		if resp.StatusCode != 200 || string(body) != "alpha-beta-gamma" {
			t.Fatalf("chunked: %d %q", resp.StatusCode, body)
		}
		pxExpectEOF(t, br)
	})
}

func TestProxyHopByHopHeaders(t *testing.T) {
	heads := make(chan *http.Request, 1)
	up, _ := startRawHTTPUpstream(t, func(conn, seq int, r *http.Request, body []byte) (string, bool) {
		heads <- r
		return "HTTP/1.1 200 OK\r\n" +
			"Content-Length: 2\r\n" +
			"Keep-Alive: timeout=5, max=100\r\n" +
			"Connection: X-Internal\r\n" +
			"X-Internal: secret\r\n" +
			"Proxy-Connection: keep-alive\r\n" +
			"X-Public: yes\r\n" +
			"\r\nok", false
	})
	g := startGateway(t, oneRoute, up)
	c, br := pxDial(t, g)
	pxWrite(t, c, "GET /h?q=1 HTTP/1.1\r\n"+
		"Host: Example.COM:8080\r\n"+
		"Connection: X-Secret\r\n"+
		"X-Secret: 1\r\n"+
		"Keep-Alive: timeout=9\r\n"+
		"Proxy-Authorization: Basic Zm9vOmJhcg==\r\n"+
		"Proxy-Connection: keep-alive\r\n"+
		"TE: trailers\r\n"+
		"Upgrade: foo\r\n"+
		"X-Kept: yes\r\n"+
		"\r\n")
	resp, body := readResponse(t, br, "GET")
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	r := <-heads
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
	// http.ReadRequest fails on a second Host header, so one Host arrives.
	hosts := make(chan string, 1)
	up, _ := startRawHTTPUpstream(t, func(conn, seq int, r *http.Request, body []byte) (string, bool) {
		hosts <- r.Host
		return pxOK(r.URL.RequestURI()), false
	})
	g := startGateway(t, oneRoute, up)
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
		if got := <-hosts; got != tc.host {
			t.Fatalf("%q: upstream Host %q, want %q", tc.raw, got, tc.host)
		}
	}
}

func TestProxyExpectContinueRaw(t *testing.T) {
	up := startUpstream(t, pathHandler)
	g := startGateway(t, oneRoute, up)
	c, br := pxDial(t, g)
	const payload = "expected body"
	pxWrite(t, c, fmt.Sprintf("POST /exp HTTP/1.1\r\nHost: test\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", len(payload)))
	// The body is withheld until the upstream's 100 Continue comes through.
	interim, err := http.ReadResponse(br, &http.Request{Method: "POST"})
	if err != nil {
		t.Fatalf("reading interim response: %v", err)
	}
	if interim.StatusCode != 100 {
		t.Fatalf("got %d before the body was sent, want 100 Continue", interim.StatusCode)
	}
	pxWrite(t, c, payload)
	resp, body := readResponse(t, br, "POST")
	if resp.StatusCode != 200 || string(body) != "/exp"+payload {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	if resp, body := pxGet(t, c, br, "/next"); resp.StatusCode != 200 || string(body) != "/next" {
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
	resp, err := tr.RoundTrip(req)
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
	if !sawExpect.Load() {
		t.Fatal("upstream did not get the Expect header")
	}
}
