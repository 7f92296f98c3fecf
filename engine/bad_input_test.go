// Integration tests for hostile or broken client input: limits, malformed
// framing, timeouts and the per-connection buffering cap.

package engine_test

import (
	"bufio"
	"encoding/json"
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

	"github.com/loopgate/loopgate/codec"
)

// bodyReadingHandler reads the whole request body before answering, so a
// request whose body breaks its framing can only be answered by the gateway.
var bodyReadingHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return // the gateway cut the body off; nothing to answer
	}
	io.WriteString(w, "ok")
})

// expectClosedConn asserts the gateway closed c: a read returns EOF (or,
// when allowReset, a connection reset) rather than data or a timeout.
func expectClosedConn(t *testing.T, c net.Conn, br *bufio.Reader, allowReset bool) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
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

// TestBadInputRejected: each case breaks one rule, and the error's message
// names that rule, so a case cannot pass on another rule's 400.
func TestBadInputRejected(t *testing.T) {
	up := startUpstream(t, bodyReadingHandler)
	g := startGateway(t, oneRoute, up)

	bigHeader := "X-Big: " + strings.Repeat("b", 2000) + "\r\n"
	cases := []struct {
		name string
		raw  string
		want *codec.Error
	}{
		{"uri over 8KiB", "GET /" + strings.Repeat("a", 8<<10) + " HTTP/1.1\r\nHost: a\r\n\r\n", codec.ErrURITooLong},
		{"51 header fields", manyHeaders(50), codec.ErrHeadersTooLarge},
		{"head over 16KiB", "GET /x HTTP/1.1\r\nHost: a\r\n" + strings.Repeat(bigHeader, 9) + "\r\n", codec.ErrHeadersTooLarge},
		{"content-length over 10MiB", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 10485761\r\n\r\n", codec.ErrBodyTooLarge},

		{"content-length and transfer-encoding", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", codec.ErrCLandTE},
		{"conflicting content-length", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello", codec.ErrBadContentLength},
		{"content-length abc", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n", codec.ErrBadContentLength},
		{"content-length -1", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", codec.ErrBadContentLength},
		{"content-length +5", "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\nhello", codec.ErrBadContentLength},
		{"bad chunk size", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", codec.ErrBadChunk},
		{"obs-fold", "GET /x HTTP/1.1\r\nHost: a\r\nX-A: b\r\n c\r\n\r\n", codec.ErrObsFold},
		// A name ends at its first non-token byte: a space there is
		// whitespace before the colon, whatever follows it.
		{"space in header name", "GET /x HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n", codec.ErrSpaceBeforeColon},
		{"separator in header name", "GET /x HTTP/1.1\r\nHost: a\r\nX(y): z\r\n\r\n", codec.ErrBadHeaderName},
		{"control byte in header name", "GET /x HTTP/1.1\r\nHost: a\r\nX\x01: y\r\n\r\n", codec.ErrBadHeaderName},
		{"whitespace before colon", "GET /x HTTP/1.1\r\nHost : a\r\n\r\n", codec.ErrSpaceBeforeColon},
		{"transfer-encoding gzip", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", codec.ErrUnknownTransferEncoding},
		{"transfer-encoding chunked, gzip", "POST /x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", codec.ErrUnknownTransferEncoding},
		{"request line without target", "GET\r\n\r\n", codec.ErrBadRequestLine},
		{"request line without version", "GET / \r\n\r\n", codec.ErrBadVersion},
		{"version HTTP/2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", codec.ErrBadVersion},
		{"version HTTP/1.2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", codec.ErrBadVersion},
		{"version HTTP/1.1x", "GET / HTTP/1.1x\r\nHost: a\r\n\r\n", codec.ErrBadVersion},
		{"HTTP/1.1 without Host", "GET /x HTTP/1.1\r\n\r\n", codec.ErrMissingHost},
		{"bare LF line endings", "GET /x HTTP/1.1\nHost: a\n\n", codec.ErrMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := g.client(t)
			resp, body := c.exchange(tc.raw)
			expectError(t, resp, body, tc.want.Status, tc.want.Code)
			var e errorBody
			if err := json.Unmarshal(body, &e); err != nil || e.Message != tc.want.Message {
				t.Errorf("message %q, want %q: another rule answered", e.Message, tc.want.Message)
			}
			if !resp.Close {
				t.Errorf("response lacks Connection: close although the gateway closes")
			}
			expectClosedConn(t, c, c.br, false)
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
			resp, body := g.rawExchange(t, tc.raw)
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
	c := g.client(t)

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

	resp, body := readResponse(t, c.br, "POST")
	expectError(t, resp, body, 413, 41301)
	expectClosedConn(t, c, c.br, true) // bytes still arriving make the close a reset
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
	c := g.client(t)
	resp, body := c.get("/not-registered")
	expectError(t, resp, body, 404, 40401)
	// A 404 is not a framing error: the same connection goes on.
	resp, body = c.get("/still-serving")
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("after a 404 the connection served %d %q, want 200 ok", resp.StatusCode, body)
	}
	g.expectServing(t)
}

func TestBadInputHeaderTimeout(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, "timeouts: {header_read: 300ms}\n"+oneRoute, up)

	t.Run("partial head never finished", func(t *testing.T) {
		c := g.client(t)
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		c.send("GET /x HTTP/1.1\r\nHost: a\r\nX-Partial: ")
		resp, body := readResponse(t, c.br, "GET")
		expectError(t, resp, body, 408, 40801)
		expectClosedConn(t, c, c.br, false)
		g.expectServing(t)
	})

	// The second request's head gets its own header_read deadline, not the
	// much longer idle wait the connection was in between requests.
	t.Run("partial head after a served request", func(t *testing.T) {
		c := g.client(t)
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		if resp, body := c.get("/x"); resp.StatusCode != 200 {
			t.Fatalf("first request: %d %q", resp.StatusCode, body)
		}
		c.send("GET /x HTTP/1.1\r\nHo")
		resp, body := readResponse(t, c.br, "GET")
		expectError(t, resp, body, 408, 40801)
		expectClosedConn(t, c, c.br, false)
	})

	t.Run("slowloris trickle", func(t *testing.T) {
		c := g.client(t)
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		c.send("GET /x HTTP/1.1\r\nHost: a\r\nX-Slow: ")
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
		resp, body := readResponse(t, c.br, "GET")
		close(stop)
		wg.Wait()
		expectError(t, resp, body, 408, 40801)
		expectClosedConn(t, c, c.br, true) // a trickled byte may land after the close
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
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
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
	c := g.client(t)
	for range 2 {
		resp, body := c.get("/nope")
		expectError(t, resp, body, 404, 40401)
		note(resp)
	}
	for range 2 {
		resp, body := g.rawExchange(t, "GET /x HTTP/1.1\r\n\r\n")
		expectError(t, resp, body, 400, 40001)
		note(resp)
	}
	g.expectServing(t)
}
