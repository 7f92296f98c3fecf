// Integration tests for hostile or broken client input: limits, malformed
// framing, timeouts and the per-connection buffering cap.

package engine_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// bodyReadingHandler reads the whole request body before answering, so a
// request whose body breaks its framing can only be answered by the gateway.
var bodyReadingHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return // the gateway cut the body off; nothing to answer
	}
	io.WriteString(w, "ok")
})

// badInputSend writes raw on a new connection and reads one response. It
// returns the connection's reader so the caller can check what follows.
func badInputSend(t *testing.T, g *gateway, raw string) (*bufio.Reader, net.Conn, *http.Response, []byte) {
	t.Helper()
	c := g.dial(t)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatalf("writing request: %v", err)
	}
	br := bufio.NewReader(c)
	resp, body := readResponse(t, br, "GET")
	return br, c, resp, body
}

// expectClosedConn asserts the gateway closed c: a read returns EOF (or,
// when allowReset, a connection reset) rather than data or a timeout.
func expectClosedConn(t *testing.T, c net.Conn, br *bufio.Reader, allowReset bool) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := br.ReadByte()
	switch {
	case err == nil:
		t.Fatalf("connection still open: read byte %q after the response", b)
	case errors.Is(err, io.EOF):
	case allowReset && errors.Is(err, syscall.ECONNRESET):
	default:
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection left open after the response (read timed out)")
		}
		t.Fatalf("read after the response: %v, want EOF", err)
	}
}

// manyHeaders builds a GET with Host plus n extra header fields.
func manyHeaders(n int) string {
	var b strings.Builder
	b.WriteString("GET /x HTTP/1.1\r\nHost: a\r\n")
	for i := range n {
		fmt.Fprintf(&b, "X-H%d: v\r\n", i)
	}
	b.WriteString("\r\n")
	return b.String()
}

func TestBadInputRejected(t *testing.T) {
	up := startUpstream(t, bodyReadingHandler)
	g := startGateway(t, oneRoute, up)

	bigHeader := "X-Big: " + strings.Repeat("b", 2000) + "\r\n"
	cases := []struct {
		name         string
		raw          string
		status, code int
	}{
		{"uri over 8KiB", "GET /" + strings.Repeat("a", 8<<10) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414, 41401},
		{"51 header fields", manyHeaders(50), 431, 43101},
		{"head over 16KiB", "GET /x HTTP/1.1\r\nHost: a\r\n" + strings.Repeat(bigHeader, 9) + "\r\n", 431, 43101},
		{"content-length over 10MiB", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10485761\r\n\r\n", 413, 41301},

		{"content-length and transfer-encoding", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400, 40001},
		{"conflicting content-length", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", 400, 40001},
		{"content-length abc", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n", 400, 40001},
		{"content-length -1", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400, 40001},
		{"content-length +5", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nhello", 400, 40001},
		{"bad chunk size", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, 40001},
		{"obs-fold", "GET /x HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", 400, 40001},
		{"space in header name", "GET /x HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n", 400, 40001},
		{"control byte in header name", "GET /x HTTP/1.1\r\nHost: a\r\nX\x01: y\r\n\r\n", 400, 40001},
		{"whitespace before colon", "GET /x HTTP/1.1\r\nHost : a\r\n\r\n", 400, 40001},
		{"transfer-encoding gzip", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 400, 40001},
		{"transfer-encoding chunked, gzip", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", 400, 40001},
		{"request line without target", "GET\r\n\r\n", 400, 40001},
		{"request line without version", "GET / \r\n\r\n", 400, 40001},
		{"version HTTP/2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 400, 40001},
		{"version HTTP/1.2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", 400, 40001},
		{"version HTTP/1.1x", "GET / HTTP/1.1x\r\nHost: a\r\n\r\n", 400, 40001},
		{"HTTP/1.1 without Host", "GET /x HTTP/1.1\r\n\r\n", 400, 40001},
		{"bare LF line endings", "GET /x HTTP/1.1\nHost: a\n\n", 400, 40001},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			br, c, resp, body := badInputSend(t, g, tc.raw)
			expectError(t, resp, body, tc.status, tc.code)
			if !resp.Close {
				t.Errorf("response lacks Connection: close although the gateway closes")
			}
			expectClosedConn(t, c, br, false)
			g.expectServing(t)
		})
	}
}

// TestBadInputLimitBoundaries checks the limits are not off by one: input
// exactly at each limit is proxied.
func TestBadInputLimitBoundaries(t *testing.T) {
	up := startUpstream(t, bodyReadingHandler)
	g := startGateway(t, oneRoute, up)
	cases := []struct{ name, raw string }{
		{"uri of exactly 8KiB", "GET /" + strings.Repeat("a", 8<<10-1) + " HTTP/1.1\r\nHost: a\r\n\r\n"},
		{"exactly 50 header fields", manyHeaders(49)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, _, resp, body := badInputSend(t, g, tc.raw)
			if resp.StatusCode != 200 || string(body) != "ok" {
				t.Fatalf("got %d %q, want 200 ok", resp.StatusCode, body)
			}
		})
	}
}

// TestBadInputChunkedBodyTooLarge streams chunks until the gateway answers:
// the running total of chunk sizes passing 10 MiB must end the request.
func TestBadInputChunkedBodyTooLarge(t *testing.T) {
	up := startUpstream(t, bodyReadingHandler)
	// A large connection buffer keeps the upstream-side queue limit (a
	// 502) out of the picture: only the body limit may answer.
	g := startGateway(t, "limits: {max_conn_buffer: 64MiB}\n"+oneRoute, up)
	c := g.dial(t)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writes until the gateway cuts the connection or the test ends
		defer wg.Done()
		if _, err := io.WriteString(c, "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
			return
		}
		chunk := []byte(fmt.Sprintf("%x\r\n%s\r\n", 64<<10, strings.Repeat("c", 64<<10)))
		for sent := 0; sent < 64<<20; sent += 64 << 10 { // bounded: 64 MiB at most
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); c.Close(); wg.Wait() }()

	br := bufio.NewReader(c)
	resp, body := readResponse(t, br, "POST")
	expectError(t, resp, body, 413, 41301)
	expectClosedConn(t, c, br, true) // bytes still arriving make the close a reset
	g.expectServing(t)
}

// exactRouteOnly routes only the exact path /still-serving.
const exactRouteOnly = `
upstreams:
  - name: backend
    nodes: ["%s"]
routes:
  - id: only
    path: /still-serving
    upstream: backend
`

func TestBadInputNoRoute(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, exactRouteOnly, up)
	c := g.dial(t)
	br := bufio.NewReader(c)
	io.WriteString(c, "GET /not-registered HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, body := readResponse(t, br, "GET")
	expectError(t, resp, body, 404, 40401)
	// A 404 is not a framing error: the same connection goes on.
	io.WriteString(c, "GET /still-serving HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, body = readResponse(t, br, "GET")
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("after a 404 the connection served %d %q, want 200 ok", resp.StatusCode, body)
	}
	g.expectServing(t)
}

func TestBadInputHeaderTimeout(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, "timeouts: {header_read: 300ms}\n"+oneRoute, up)

	t.Run("partial head never finished", func(t *testing.T) {
		c := g.dial(t)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\nX-Partial: ")
		br := bufio.NewReader(c)
		resp, body := readResponse(t, br, "GET")
		expectError(t, resp, body, 408, 40801)
		expectClosedConn(t, c, br, false)
		g.expectServing(t)
	})

	// The second request's head gets its own header_read deadline, not the
	// much longer idle wait the connection was in between requests.
	t.Run("partial head after a served request", func(t *testing.T) {
		c := g.dial(t)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(c)
		io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, body := readResponse(t, br, "GET"); resp.StatusCode != 200 {
			t.Fatalf("first request: %d %q", resp.StatusCode, body)
		}
		io.WriteString(c, "GET /x HTTP/1.1\r\nHo")
		resp, body := readResponse(t, br, "GET")
		expectError(t, resp, body, 408, 40801)
		expectClosedConn(t, c, br, false)
	})

	t.Run("slowloris trickle", func(t *testing.T) {
		c := g.dial(t)
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\nX-Slow: ")
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // one byte per tick: each byte arrives, the head never ends
			defer wg.Done()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := c.Write([]byte{'a'}); err != nil {
						return
					}
				}
			}
		}()
		br := bufio.NewReader(c)
		resp, body := readResponse(t, br, "GET")
		close(stop)
		wg.Wait()
		expectError(t, resp, body, 408, 40801)
		expectClosedConn(t, c, br, true) // a trickled byte may land after the close
		g.expectServing(t)
	})
}

// TestBadInputConnBufferCap pipelines far more than max_conn_buffer behind a
// request whose upstream never answers: the gateway must cut the connection
// instead of buffering without bound.
func TestBadInputConnBufferCap(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, "ok")
	}))
	g := startGateway(t, "limits: {max_conn_buffer: 256KiB}\n"+oneRoute, up)
	t.Cleanup(func() { once.Do(func() { close(release) }) }) // runs before the gateway's cleanup

	c := g.dial(t)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET /block HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	pipelined := strings.Repeat("GET /x HTTP/1.1\r\nHost: a\r\n\r\n", (300<<10)/30)
	_, _ = io.WriteString(c, pipelined) // may fail once the gateway cuts the connection

	buf := make([]byte, 512)
	n, err := c.Read(buf)
	if n > 0 {
		t.Fatalf("got %q, want the connection closed without a response", buf[:n])
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection still open with %d KiB pipelined over a 256 KiB cap", len(pipelined)>>10)
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read: %v, want EOF or reset", err)
	}
	g.expectServing(t)
}

// TestBadInputRequestIDsDiffer: every error carries its own request ID, on
// one connection (one loop, so the per-loop counter must move) and across
// connections.
func TestBadInputRequestIDsDiffer(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, exactRouteOnly, up)
	seen := map[string]bool{}
	note := func(resp *http.Response) {
		id := resp.Header.Get("X-Request-Id")
		if seen[id] {
			t.Fatalf("request ID %q used twice", id)
		}
		seen[id] = true
	}
	c := g.dial(t)
	br := bufio.NewReader(c)
	for range 2 {
		io.WriteString(c, "GET /nope HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, body := readResponse(t, br, "GET")
		expectError(t, resp, body, 404, 40401)
		note(resp)
	}
	for range 2 {
		_, _, resp, body := badInputSend(t, g, "GET /x HTTP/1.1\r\n\r\n")
		expectError(t, resp, body, 400, 40001)
		note(resp)
	}
	g.expectServing(t)
}
