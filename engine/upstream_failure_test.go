// Integration tests for upstreams that fail: down, hanging, resetting,
// speaking garbage, closing stale connections, and an exhausted pool.

package engine_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// failRoutes routes /still-serving to a healthy upstream "good" (first
// argument) and everything else to the upstream under test "bad" (second
// argument); badOpts are extra YAML lines for "bad", indented 4 spaces.
func failRoutes(badOpts string) string {
	return `
upstreams:
  - name: good
    nodes: ["%s"]
  - name: bad
    nodes: ["%s"]
` + badOpts + `
routes:
  - id: healthy
    path: /still-serving
    upstream: good
  - id: failing
    prefix: /
    upstream: bad
`
}

// testDone returns a channel closed when the test ends (before the gateway
// shuts down), so raw upstream handlers never outlive their test.
func testDone(t *testing.T) <-chan struct{} {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	return done
}

func TestUpstreamDown(t *testing.T) {
	g := startGateway(t, failRoutes(""), startUpstream(t, okHandler), closedPort(t))
	resp, body := g.rawExchange(t, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	expectError(t, resp, body, 502, 50201)
	g.expectServing(t)
}

func TestUpstreamHanging(t *testing.T) {
	hanging := startRawUpstream(t, func(c net.Conn) {
		_, _ = io.Copy(io.Discard, c) // reads everything, answers nothing
	})
	g := startGateway(t, failRoutes("    response_timeout: 300ms\n"), startUpstream(t, okHandler), hanging)
	resp, body := g.rawExchange(t, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	expectError(t, resp, body, 504, 50401)
	g.expectServing(t)
}

// TestUpstreamResetMidBody: once part of a response is out, an upstream
// failure must reach the client as a broken body, never a complete one.
// The upstream cuts only after the client has seen the first bytes, so the
// failure happens mid-body every time.
func TestUpstreamResetMidBody(t *testing.T) {
	payload := strings.Repeat("p", 1000)
	cases := []struct {
		name     string
		head     string // response head and the body bytes sent before the cut
		sent     int    // body bytes the client sees before the cut
		rst      bool   // cut with a reset instead of an orderly close
		complete bool   // the cut ends the response properly (control case)
	}{
		{"content-length, close", "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + payload, 1000, false, false},
		{"content-length, reset", "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + payload, 1000, true, false},
		{"chunked cut mid-chunk", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3e8\r\n" + payload[:500], 500, false, false},
		{"close-delimited, reset", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + payload, 1000, true, false},
		{"close-delimited, orderly close (control)", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n" + payload, 1000, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			done := testDone(t)
			cut := make(chan struct{})
			up := startScriptedUpstream(t, func(c *upConn) {
				if _, err := c.read(); err != nil {
					return
				}
				if _, err := io.WriteString(c, tc.head); err != nil {
					return
				}
				select {
				case <-cut:
				case <-done:
					return
				}
				if tc.rst {
					_ = c.Conn.(*net.TCPConn).SetLinger(0)
				}
			}) // the harness closes c when this returns
			g := startGateway(t, failRoutes(""), startUpstream(t, okHandler), up.addr)

			c := g.client(t)
			c.send("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
			resp, err := http.ReadResponse(c.br, &http.Request{Method: "GET"})
			if err != nil {
				t.Fatalf("reading response head: %v", err)
			}
			if resp.StatusCode != 200 {
				t.Fatalf("status %d, want 200 (the head went out before the cut)", resp.StatusCode)
			}
			first := make([]byte, tc.sent)
			if _, err := io.ReadFull(resp.Body, first); err != nil {
				t.Fatalf("reading the first %d body bytes: %v", tc.sent, err)
			}
			close(cut)
			rest, err := io.ReadAll(resp.Body)
			if tc.complete {
				if err != nil || len(rest) != 0 {
					t.Fatalf("orderly close of a close-delimited body: extra %d bytes, err %v; want a complete body", len(rest), err)
				}
			} else {
				if err != io.ErrUnexpectedEOF {
					t.Fatalf("body after the cut: %d more bytes, err %v; want io.ErrUnexpectedEOF (a truncated body must not look complete)", len(rest), err)
				}
				expectClosedConn(t, c, c.br, false)
			}
			g.expectServing(t)
		})
	}
}

func TestUpstreamGarbage(t *testing.T) {
	up := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.read(); err != nil {
			return
		}
		io.WriteString(c, "NOT HTTP\r\n\r\n")
		_, _ = io.Copy(io.Discard, c.br) // stay open: the verdict must come from the bytes
	})
	g := startGateway(t, failRoutes(""), startUpstream(t, okHandler), up.addr)
	resp, body := g.rawExchange(t, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	expectError(t, resp, body, 502, 50202)
	g.expectServing(t)
}

// staleUpstream answers the first request of every connection with
// "conn N" (N from 0) and keep-alive, then closes the connection on reading
// the next request without answering it, the way a server that timed out an
// idle connection looks to a client whose request crossed the close.
func staleUpstream(c *upConn) {
	for {
		r, err := c.read()
		if err != nil || r.seq > 0 {
			return // a second request: close without a response
		}
		if c.writeSplit(pxOK(fmt.Sprintf("conn %d", r.conn))) != nil {
			return
		}
	}
}

// upstreamSaw lists the upstream's requests as "METHOD conn N".
func upstreamSaw(up *rawUpstream) []string {
	var out []string
	for _, r := range up.requests() {
		out = append(out, fmt.Sprintf("%s conn %d", r.req.Method, r.conn))
	}
	return out
}

func TestUpstreamClosesWithoutResponse(t *testing.T) {
	t.Run("POST on a fresh connection is not retried", func(t *testing.T) {
		up := startScriptedUpstream(t, func(c *upConn) { c.read() })
		g := startGateway(t, failRoutes(""), startUpstream(t, okHandler), up.addr)
		resp, body := g.rawExchange(t, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
		expectError(t, resp, body, 502, 50202)
		if got, want := upstreamSaw(up), []string{"POST conn 0"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("upstream saw %q, want %q (a POST must not be resent)", got, want)
		}
		g.expectServing(t)
	})

	// The failing attempt runs on a reused keep-alive connection, the one
	// case where a blind resend is tempting; a POST must still not be resent.
	t.Run("POST on a reused connection is not retried", func(t *testing.T) {
		up := startScriptedUpstream(t, staleUpstream)
		g := startGateway(t, failRoutes(""), startUpstream(t, okHandler), up.addr)
		c := g.client(t)
		if resp, body := c.get("/x"); resp.StatusCode != 200 || string(body) != "conn 0" {
			t.Fatalf("first request: %d %q, want 200 \"conn 0\"", resp.StatusCode, body)
		}
		resp, body := c.exchange("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
		expectError(t, resp, body, 502, 50202)
		want := []string{"GET conn 0", "POST conn 0"}
		if got := upstreamSaw(up); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("upstream saw %q, want %q (a POST must not be resent)", got, want)
		}
		g.expectServing(t)
	})

	t.Run("GET on a reused connection is retried on a fresh one", func(t *testing.T) {
		up := startScriptedUpstream(t, staleUpstream)
		g := startGateway(t, failRoutes(""), startUpstream(t, okHandler), up.addr)
		c := g.client(t)
		for i, want := range []string{"conn 0", "conn 1"} {
			resp, body := c.get("/x")
			if resp.StatusCode != 200 || string(body) != want {
				t.Fatalf("request %d: %d %q, want 200 %q", i+1, resp.StatusCode, body, want)
			}
		}
		want := []string{"GET conn 0", "GET conn 0", "GET conn 1"}
		if got := upstreamSaw(up); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("upstream saw %q, want %q", got, want)
		}
		g.expectServing(t)
	})
}

// TestUpstreamPoolExhausted: with max_conns 1 per loop and 2 loops, at most
// two of four concurrent requests reach the upstream; the upstream holds
// them until every other request has been answered, so those must time out
// waiting for a connection (503/50302). Released, the held ones succeed.
func TestUpstreamPoolExhausted(t *testing.T) {
	const clients = 4
	arrived := make(chan struct{}, clients)
	release := make(chan struct{})
	var once sync.Once
	releaseAll := func() { once.Do(func() { close(release) }) }
	slow := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			arrived <- struct{}{}
			<-release
		}
		io.WriteString(w, "ok")
	}))
	g := startGateway(t, failRoutes("    max_conns: 1\n    max_idle: 1\n    pool_acquire_timeout: 200ms\n"),
		startUpstream(t, okHandler), slow)
	t.Cleanup(releaseAll)

	results := make(chan fetched, clients)
	for range clients {
		go func() { results <- fetch(g.url("/slow")) }()
	}

	held, rejected := 0, 0
	for held+rejected < clients {
		select {
		case <-arrived:
			held++
		case r := <-results:
			if r.err != nil {
				t.Fatalf("request failed while the upstream held the others: %v", r.err)
			}
			expectError(t, r.resp, r.body, 503, 50302)
			rejected++
		}
	}
	if held > 2 {
		t.Fatalf("%d requests reached the upstream at once; max_conns 1 on 2 loops allows 2", held)
	}
	if rejected < 1 {
		t.Fatalf("no request was rejected with 503")
	}
	releaseAll()
	for range held {
		r := <-results
		if r.err != nil {
			t.Fatalf("held request: %v", r.err)
		}
		if r.resp.StatusCode != 200 || string(r.body) != "ok" {
			t.Fatalf("held request: %d %q, want 200 ok", r.resp.StatusCode, r.body)
		}
	}
	// The pool recovered: the same upstream serves again.
	if r := fetch(g.url("/after")); r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("after the burst: %+v", r)
	}
	g.expectServing(t)
}

// An upstream that stops reading a large request body and never answers
// must not hold the request forever: past the response timeout it is a 504.
func TestUpstreamStopsReadingBody(t *testing.T) {
	accepted := make(chan struct{}, 1)
	done := testDone(t)
	up := startRawUpstream(t, func(c net.Conn) {
		accepted <- struct{}{}
		<-done // read nothing, answer nothing
	})
	g := startGateway(t, `
limits: {max_conn_buffer: 64KiB, max_body_bytes: 64MiB}
timeouts: {idle: 30s}
upstreams:
  - {name: backend, nodes: ["%s"], response_timeout: 500ms}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up)
	c := g.client(t)
	const size = 40 << 20
	fmt.Fprintf(c, "POST /upload HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", size)
	go func() { // the client keeps sending; the gateway must answer anyway
		chunk := make([]byte, 64<<10)
		for sent := 0; sent < size; sent += len(chunk) {
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}()
	<-accepted
	resp, body := readResponse(t, c.br, "POST")
	expectError(t, resp, body, 504, 50401)
}
