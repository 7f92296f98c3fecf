// Safety nets: the behaviours that keep one client's bytes from being read
// as another request, one upstream's bytes from reaching the wrong client,
// and a stalled peer from holding a connection forever. Each test here fails
// when its safety net is removed (see issue 12 for the mutations).

package engine_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// safetyGateway is the shared config of TestSafetyNets: one loop (so a
// client's requests share one pool per node), no default filters (every
// route but sticky takes the no-filter path), and one upstream per
// misbehaviour.
const safetyGateway = `
loops: 1
filters: []
upstreams:
  - {name: echo, nodes: ["%s"]}
  - {name: early, nodes: ["%s"]}
  - {name: failing, nodes: ["%s"]}
  - {name: stale, nodes: ["%s"]}
  - {name: switch, nodes: ["%s"]}
  - {name: stall, nodes: ["%s"], response_timeout: 300ms}
  - {name: trailing, nodes: ["%s"]}
  - {name: badchunk, nodes: ["%s"]}
  - {name: chatty, nodes: ["%s"]}
  - {name: held, nodes: ["%s"]}
  - {name: down, nodes: ["%s"]}
  - {name: many, nodes: ["%s", "%s", "%s"]}
routes:
  - {id: echo, prefix: /echo/, upstream: echo}
  - {id: early, prefix: /early/, upstream: early}
  - {id: failing, prefix: /failing/, upstream: failing}
  - {id: stale, prefix: /stale/, upstream: stale}
  - {id: switch, prefix: /switch/, upstream: switch}
  - {id: stall, prefix: /stall/, upstream: stall}
  - {id: trailing, prefix: /trailing/, upstream: trailing}
  - {id: badchunk, prefix: /badchunk/, upstream: badchunk}
  - {id: chatty, prefix: /chatty/, upstream: chatty}
  - {id: held, prefix: /held/, upstream: held}
  - {id: down, prefix: /down/, upstream: down}
  - {id: sticky, prefix: /sticky/, upstream: many, hash: {header: X-Key}}
`

// smuggle is a complete request for path, to hide in a request body: if
// the gateway ever parses a body as the next request, the echo upstream
// sees path.
func smuggle(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n" }

// bigBody is over the default request_buffer_bytes (64KiB), so it streams.
const bigBody = 70000

// pathReply answers with the request path as the body.
func pathReply(r *rawRequest) string {
	p := r.req.URL.Path
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(p), p)
}

// sawPath reports whether the upstream received a request for path.
func sawPath(up *rawUpstream, path string) int {
	n := 0
	for _, r := range up.requests() {
		if r.req.URL.Path == path {
			n++
		}
	}
	return n
}

// backlogFull is a listener whose accept queue is full, so the kernel drops
// new SYNs and a dial to it completes only when the client retransmits its
// SYN (after one second) once the queue has room: a dial that finishes late,
// deterministically.
type backlogFull struct {
	ln net.Listener
	// closedEmpty gets each accepted connection's close when no request
	// byte arrived on it first.
	closedEmpty chan struct{}
}

func startBacklogFull(t *testing.T) *backlogFull {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) { lerr = syscall.Listen(int(fd), 0) }); err != nil || lerr != nil {
		t.Fatalf("listen backlog 0: %v %v", err, lerr)
	}
	// Backlog 0 holds one connection; the filler takes it and is not
	// accepted until free.
	filler, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { filler.Close() })
	return &backlogFull{ln: ln, closedEmpty: make(chan struct{}, 4)}
}

// free accepts the filler, making room for one late dial, and serves every
// connection after it: a request gets 200, a close before any request is
// reported on closedEmpty.
func (b *backlogFull) free(t *testing.T) {
	c, err := b.ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	go func() {
		for {
			c, err := b.ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					if _, err := readHead(br); err != nil {
						b.closedEmpty <- struct{}{}
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nlate")
				}
			}()
		}
	}()
}

// synSent counts the sockets in SYN-SENT towards addr's port, from
// /proc/net/tcp (Linux): a dial that has sent its SYN and waits.
func synSent(addr *net.TCPAddr) (int, error) {
	data, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	port := fmt.Sprintf(":%04X", addr.Port)
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		// sl local_address rem_address st ...; st 02 is SYN-SENT
		if f := strings.Fields(line); len(f) > 3 && strings.HasSuffix(f[2], port) && f[3] == "02" {
			n++
		}
	}
	return n, nil
}

func TestSafetyNets(t *testing.T) {
	echo := startScriptedUpstream(t, serveEach(pathReply))
	// early answers as soon as it has the head, without reading the body.
	early := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.readHead(); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nearly")
		io.Copy(io.Discard, c.br)
	})
	// failing hangs up as soon as it has the head.
	failing := startScriptedUpstream(t, func(c *upConn) {
		c.readHead()
	})
	// stale serves one request per connection, then takes the next request
	// and hangs up without a byte, like a server whose keep-alive timeout
	// ran out just as the request arrived.
	stale := startScriptedUpstream(t, func(c *upConn) {
		r, err := c.read()
		if err != nil {
			return
		}
		if c.writeSplit(pathReply(r)) != nil {
			return
		}
		c.read()
	})
	switchUp := startScriptedUpstream(t, serveEach(func(*rawRequest) string {
		return "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
	}))
	// stall sends the head and part of the body in two reads, then nothing.
	stall := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.read(); err != nil {
			return
		}
		c.writeSplit("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n0123456789abcdefghij", 50, 10)
		io.Copy(io.Discard, c) // until the gateway gives up
	})
	// trailing sends more than its Content-Length in one write.
	trailingClosed := make(chan int, 4)
	trailing := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.read(); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA")
		if _, err := c.read(); err != nil {
			trailingClosed <- c.id
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nreuse")
	})
	// badchunk breaks its chunked framing after the first chunk.
	badchunk := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.read(); err != nil {
			return
		}
		c.writeSplit("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n", 57)
		io.Copy(io.Discard, c)
	})
	// chatty sends bytes on its connection after the exchange is over, when
	// the test says so (once the connection is idle in the pool).
	chattyGo := make(chan struct{})
	chattyClosed := make(chan struct{}, 1)
	chatty := startScriptedUpstream(t, func(c *upConn) {
		r, err := c.read()
		if err != nil || c.writeSplit(pathReply(r)) != nil {
			return
		}
		if c.id > 0 {
			io.Copy(io.Discard, c)
			return
		}
		<-chattyGo
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nextra")
		if _, err := c.read(); err != nil {
			chattyClosed <- struct{}{}
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nwrong")
	})
	var chattyOnce sync.Once
	t.Cleanup(func() { chattyOnce.Do(func() { close(chattyGo) }) })
	// held takes a request and never answers.
	heldEntered := make(chan struct{}, 1)
	held := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.read(); err != nil {
			return
		}
		heldEntered <- struct{}{}
		io.Copy(io.Discard, c) // returns when the gateway closes
	})
	var nodes [3]*rawUpstream
	for i := range nodes {
		name := fmt.Sprintf("node%d", i)
		nodes[i] = startScriptedUpstream(t, serveEach(func(*rawRequest) string {
			return "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n" + name
		}))
	}
	g := startGateway(t, safetyGateway, echo.addr, early.addr, failing.addr, stale.addr, switchUp.addr,
		stall.addr, trailing.addr, badchunk.addr, chatty.addr, held.addr, closedPort(t), nodes[0].addr, nodes[1].addr, nodes[2].addr)

	// Behaviour 1: a request answered before its body was read closes the
	// connection, so the body is never parsed as the next request.
	t.Run("404 before a streamed body closes the connection", func(t *testing.T) {
		c := g.client(t)
		hidden := smuggle("/echo/smuggled-404-streamed")
		body := hidden + strings.Repeat("z", bigBody-len(hidden))
		io.WriteString(c, fmt.Sprintf("POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", bigBody, body))
		resp, rb := readResponse(t, c.br, "POST")
		expectError(t, resp, rb, 404, 40401)
		if !resp.Close {
			t.Error("404 with an unread body lacks Connection: close")
		}
		expectClosedConn(t, c, c.br, true)
		if n := sawPath(echo, "/echo/smuggled-404-streamed"); n != 0 {
			t.Fatalf("a request body was parsed as a request: the upstream saw it %d times", n)
		}
	})
	t.Run("404 before a buffered body never parses the body", func(t *testing.T) {
		c := g.client(t)
		hidden := smuggle("/echo/smuggled-404-buffered")
		c.send(fmt.Sprintf("POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(hidden), hidden))
		resp, rb := readResponse(t, c.br, "POST")
		expectError(t, resp, rb, 404, 40401)
		// Consumed or closed, either is safe; what comes next must be the
		// answer to the next request, or nothing.
		io.WriteString(c, "GET /echo/after HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp.Close {
			expectClosedConn(t, c, c.br, true)
		} else if _, next := readResponse(t, c.br, "GET"); string(next) != "/echo/after" {
			t.Fatalf("the request after the 404 got %q", next)
		}
		if n := sawPath(echo, "/echo/smuggled-404-buffered"); n != 0 {
			t.Fatalf("a request body was parsed as a request: the upstream saw it %d times", n)
		}
	})
	// Behaviours 1 and 2: an upstream that answers before it has the body.
	t.Run("early upstream answer says Connection: close and closes", func(t *testing.T) {
		c := g.client(t)
		c.send(fmt.Sprintf("POST /early/x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", bigBody, strings.Repeat("z", 1000)))
		raw := string(c.rawResponse("POST"))
		if !strings.HasPrefix(raw, "HTTP/1.1 200 ") || !strings.HasSuffix(raw, "\r\n\r\nearly") {
			t.Fatalf("early answer: %q", raw)
		}
		if !strings.Contains(raw, "\r\nConnection: close\r\n") {
			t.Fatalf("early answer with the body unread lacks Connection: close:\n%s", raw)
		}
		// The rest of the body, a request in it, arrives after the answer.
		hidden := smuggle("/echo/smuggled-early")
		io.WriteString(c, hidden+strings.Repeat("z", bigBody-1000-len(hidden))) // may fail: the gateway may have closed already
		expectClosedConn(t, c, c.br, true)
		if n := sawPath(echo, "/echo/smuggled-early"); n != 0 {
			t.Fatalf("the rest of a body was parsed as a request: the upstream saw it %d times", n)
		}
	})
	t.Run("upstream failure before the body closes the connection", func(t *testing.T) {
		c := g.client(t)
		c.send(fmt.Sprintf("POST /failing/x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", bigBody, strings.Repeat("z", 1000)))
		resp, rb := readResponse(t, c.br, "POST")
		expectError(t, resp, rb, 502, 50202)
		if !resp.Close {
			t.Error("502 with the body unread lacks Connection: close")
		}
		io.WriteString(c, smuggle("/echo/smuggled-failing"))
		expectClosedConn(t, c, c.br, true)
	})

	t.Run("upstream failure before a held body is sent closes the connection", func(t *testing.T) {
		// The small body is held whole, then the dial fails: the body was
		// never taken from the client's input.
		c := g.client(t)
		hidden := smuggle("/echo/smuggled-down")
		c.send(fmt.Sprintf("POST /down/x HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(hidden), hidden))
		resp, rb := readResponse(t, c.br, "POST")
		expectError(t, resp, rb, 502, 50201)
		if resp.Close {
			expectClosedConn(t, c, c.br, true)
		} else if _, next := c.get("/echo/after-down"); string(next) != "/echo/after-down" {
			t.Fatalf("the request after the 502 got %q", next)
		}
		if n := sawPath(echo, "/echo/smuggled-down"); n != 0 {
			t.Fatalf("a request body was parsed as a request: the upstream saw it %d times", n)
		}
	})

	// Behaviour 3: only idempotent bodiless requests are resent after a
	// reused connection closed without answering.
	t.Run("bodiless POST on a stale connection is not resent", func(t *testing.T) {
		for _, method := range []string{"POST", "DELETE"} {
			c := g.client(t)
			if _, b := c.get("/stale/warm-" + method); string(b) != "/stale/warm-"+method {
				t.Fatalf("warm-up got %q", b)
			}
			path := "/stale/" + method
			c.send(method + " " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, rb := readResponse(t, c.br, method)
			expectError(t, resp, rb, 502, 50202)
			if n := sawPath(stale, path); n != 1 {
				t.Fatalf("bodiless %s reached the upstream %d times, want exactly 1", method, n)
			}
		}
	})
	t.Run("GET on a stale connection is retried once on a fresh one", func(t *testing.T) {
		c := g.client(t)
		if _, b := c.get("/stale/warm-GET"); string(b) != "/stale/warm-GET" {
			t.Fatalf("warm-up got %q", b)
		}
		resp, rb := c.get("/stale/GET")
		if resp.StatusCode != 200 || string(rb) != "/stale/GET" {
			t.Fatalf("GET after a stale connection: %d %q", resp.StatusCode, rb)
		}
		var tries []rawRequest
		for _, r := range stale.requests() {
			if r.req.URL.Path == "/stale/GET" {
				tries = append(tries, r)
			}
		}
		if len(tries) != 2 || tries[0].seq != 1 || tries[1].seq != 0 || tries[0].conn == tries[1].conn {
			t.Fatalf("want the GET once on the stale connection and once on a fresh one, got %d tries", len(tries))
		}
	})

	// Behaviour 4: a 101 nobody asked for is a broken upstream.
	t.Run("unrequested 101 becomes 502", func(t *testing.T) {
		c := g.client(t)
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		resp, rb := c.get("/switch/x")
		expectError(t, resp, rb, 502, 50202)
	})

	// Behaviour 6: one Content-Length goes upstream, however many the
	// client sent.
	t.Run("duplicate Content-Length goes upstream once", func(t *testing.T) {
		c := g.client(t)
		c.send("POST /echo/cl HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello")
		if resp, rb := readResponse(t, c.br, "POST"); resp.StatusCode != 200 || string(rb) != "/echo/cl" {
			t.Fatalf("%d %q", resp.StatusCode, rb)
		}
		for _, r := range echo.requests() {
			if r.req.URL.Path != "/echo/cl" {
				continue
			}
			if n := strings.Count(strings.ToLower(string(r.head)), "\r\ncontent-length:"); n != 1 || string(r.body) != "hello" {
				t.Fatalf("upstream got %d Content-Length fields and body %q:\n%s", n, r.body, r.head)
			}
			return
		}
		t.Fatal("the request never reached the upstream")
	})

	// Behaviour 8: the response timeout is re-armed after every body read.
	t.Run("upstream stalling mid-body closes the client connection", func(t *testing.T) {
		c := g.client(t)
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		c.send("GET /stall/x HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(c.br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("stalled body: still waiting after 20s with %q; the response timeout was not re-armed", got)
		}
		if err == nil || string(got) != "0123456789abcdefghij" {
			t.Fatalf("stalled body: %q, %v; want the 20 bytes sent and a cut connection", got, err)
		}
	})

	// More bytes than the Content-Length: the connection is not reused.
	t.Run("trailing bytes after a response retire the connection", func(t *testing.T) {
		c := g.client(t)
		if _, b := c.get("/trailing/1"); string(b) != "ok" {
			t.Fatalf("got %q", b)
		}
		select {
		case <-trailingClosed:
		case <-time.After(20 * time.Second):
			t.Fatal("the gateway kept an upstream connection that sent more than its Content-Length")
		}
		if _, b := c.get("/trailing/2"); string(b) != "ok" {
			t.Fatalf("second request got %q", b)
		}
		if n := trailing.connections(); n != 2 {
			t.Fatalf("upstream connections %d, want 2", n)
		}
	})
	t.Run("malformed chunk after the head cuts the client connection", func(t *testing.T) {
		c := g.client(t)
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		c.send("GET /badchunk/x HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(c.br, &http.Request{Method: "GET"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("malformed chunk: body %q, %v; want a cut connection", got, err)
		}
	})

	// Behaviour 5: bytes on an idle pooled connection retire it, or the
	// next client would read them as its response.
	t.Run("bytes on an idle upstream connection close it", func(t *testing.T) {
		if _, b := g.client(t).get("/chatty/1"); string(b) != "/chatty/1" {
			t.Fatalf("got %q", b)
		}
		// The client has its response, so the connection is idle in the
		// pool (the call releases it before the body goes to the client).
		chattyOnce.Do(func() { close(chattyGo) })
		select {
		case <-chattyClosed:
		case <-time.After(20 * time.Second):
			t.Fatal("the gateway kept an idle upstream connection that sent unsolicited bytes")
		}
		if _, b := g.client(t).get("/chatty/2"); string(b) != "/chatty/2" {
			t.Fatalf("the next client got %q", b)
		}
	})

	// Behaviour 9: consistent hashing spreads keys over the nodes, and
	// keeps each key on its node.
	t.Run("consistent hashing spreads keys", func(t *testing.T) {
		c := g.client(t)
		owner := map[string]string{}
		used := map[string]int{}
		for i := 0; i < 30; i++ {
			key := fmt.Sprintf("user-%d", i)
			for j := 0; j < 2; j++ {
				c.send("GET /sticky/x HTTP/1.1\r\nHost: x\r\nX-Key: " + key + "\r\n\r\n")
				_, b := readResponse(t, c.br, "GET")
				if prev, ok := owner[key]; ok && prev != string(b) {
					t.Fatalf("key %s moved from %s to %s", key, prev, b)
				}
				owner[key] = string(b)
			}
			used[owner[key]]++
		}
		if len(used) != 3 {
			t.Fatalf("30 keys landed on %d of 3 nodes: %v", len(used), used)
		}
	})

	// The no-filter fast path: with filters: [] the echo route has no
	// chain, so nothing adds X-Request-Id or X-Forwarded-For.
	t.Run("no-filter route forwards untouched", func(t *testing.T) {
		c := g.client(t)
		resp, b := c.get("/echo/plain")
		if resp.StatusCode != 200 || string(b) != "/echo/plain" {
			t.Fatalf("%d %q", resp.StatusCode, b)
		}
		if id := resp.Header.Get("X-Request-Id"); id != "" {
			t.Errorf("response got X-Request-Id %q without the request_id filter", id)
		}
		for _, r := range echo.requests() {
			if r.req.URL.Path == "/echo/plain" {
				if h := r.req.Header; h.Get("X-Request-Id") != "" || h.Get("X-Forwarded-For") != "" {
					t.Errorf("upstream got filter headers on a route without filters:\n%s", r.head)
				}
			}
		}
	})

	// Last, as it stops the gateway: when Shutdown's context ends first,
	// the request still in flight is cut off and Shutdown says why.
	t.Run("shutdown past its deadline cuts the in-flight request", func(t *testing.T) {
		c := g.client(t)
		c.send("GET /held/x HTTP/1.1\r\nHost: x\r\n\r\n")
		select {
		case <-heldEntered:
		case <-time.After(10 * time.Second):
			t.Fatal("the request never reached the upstream")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- g.srv.Shutdown(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Shutdown past its deadline returned %v, want %v", err, context.DeadlineExceeded)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Shutdown did not return after its context ended")
		}
		// Cut off: closed, or at most a gateway error when the upstream
		// side was closed first; never a hang.
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := c.br.Peek(1); err == nil {
			resp, b := readResponse(t, c.br, "GET")
			expectError(t, resp, b, 502, 50202)
		}
		expectClosedConn(t, c, c.br, true)
	})
}

// TestSlowPeers: a silent client, between requests or mid-body, does not
// hold its connection (behaviour 7, and the body-read 408), and a dial that
// finishes after its client left neither leaks nor breaks the pool. The
// subtests only wait out deadlines, so they run side by side.
func TestSlowPeers(t *testing.T) {
	up := startScriptedUpstream(t, func(c *upConn) {
		for {
			head, err := c.readHead()
			if err != nil {
				return
			}
			if strings.HasPrefix(string(head), "POST ") {
				io.Copy(io.Discard, c.br) // a body that never ends
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	slow := startBacklogFull(t)  // freed once the client left: the dial completes late
	never := startBacklogFull(t) // never freed: the dial fails after the client left
	g := startGateway(t, `
loops: 1
limits: {request_buffer_bytes: 0}
timeouts: {idle: 300ms, header_read: 400ms}
upstreams:
  - {name: backend, nodes: ["%s"]}
  - {name: late, nodes: ["%s"], connect_timeout: 10s, idle_timeout: 200ms}
  - {name: doomed, nodes: ["%s"], connect_timeout: 300ms}
routes:
  - {id: late, prefix: /late/, upstream: late}
  - {id: doomed, prefix: /doomed/, upstream: doomed}
  - {id: all, prefix: /, upstream: backend}
`, up.addr, slow.ln.Addr(), never.ln.Addr())

	t.Run("keep-alive connection closed after idle", func(t *testing.T) {
		t.Parallel()
		c := g.client(t)
		if resp, b := c.get("/x"); resp.StatusCode != 200 || resp.Close {
			t.Fatalf("%d %q close=%v", resp.StatusCode, b, resp.Close)
		}
		expectClosedConn(t, c, c.br, true)
	})
	t.Run("silent new connection closed after header_read", func(t *testing.T) {
		t.Parallel()
		c := g.client(t)
		expectClosedConn(t, c, c.br, true)
	})
	t.Run("streamed body that stops gets 408", func(t *testing.T) {
		t.Parallel()
		c := g.client(t)
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		c.send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789")
		resp, b := readResponse(t, c.br, "POST")
		expectError(t, resp, b, 408, 40801)
		if !resp.Close {
			t.Error("408 with the body unread lacks Connection: close")
		}
		expectClosedConn(t, c, c.br, true)
	})
	// The clients leave while their dials wait on a full backlog; then one
	// dial completes (on the SYN retransmit, ~1s later) and the other times
	// out. The late connection must go to the pool (and expire there after
	// idle_timeout) or be closed: not be left open, nor break the route.
	t.Run("dials finishing after their clients left", func(t *testing.T) {
		t.Parallel()
		slowAddr := slow.ln.Addr().(*net.TCPAddr)
		if _, err := synSent(slowAddr); err != nil {
			t.Skipf("cannot watch dials: %v", err)
		}
		before := g.srv.Requests()
		for _, path := range []string{"/late/x", "/doomed/x"} {
			c := g.dial(t)
			io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
			c.Close() // the gateway reads the request (and dials) before it sees the FIN
		}
		waitFor(t, "the gateway to take both requests", func() bool { return g.srv.Requests() >= before+2 })
		waitFor(t, "the late dial's SYN", func() bool { n, _ := synSent(slowAddr); return n > 0 })
		// No client is left once these two are gone (the other subtests'
		// clients only wait to be closed).
		waitFor(t, "the gateway to see the clients leave", func() bool { return g.srv.Clients() == 0 })
		slow.free(t)
		select {
		case <-slow.closedEmpty:
		case <-time.After(10 * time.Second):
			t.Fatal("the connection dialed for a departed client was neither pooled-and-expired nor closed")
		}
		if _, b := g.client(t).get("/late/y"); string(b) != "late" {
			t.Fatalf("after a late dial the route answers %q", b)
		}
	})
}
