// The Call state machine on the in-memory loop: exchanges, retries, and
// every way an upstream can break a response.

package upstream

import (
	"io"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

var getOpts = Options{Retryable: true, ResponseTimeout: time.Second}

// exchange runs one GET on p to completion on its (new or idle) connection
// and returns that connection.
func (tl *testLoop) exchange(p *Pool) (*Conn, *fakeConn) {
	tl.t.Helper()
	c, r := newCall()
	idle := p.Idle() > 0
	var uc *Conn
	var fc *fakeConn
	if idle {
		uc = p.idle[len(p.idle)-1]
		fc = uc.gc.(*fakeConn)
		c.Start(p, head(getHead), getOpts)
	} else {
		c.Start(p, head(getHead), getOpts)
		uc, fc = tl.open()
	}
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	if c.State() != Done || r.body.String() != "ok" || r.err != nil {
		tl.t.Fatalf("exchange: state %s, body %q, err %v", c.State(), r.body.String(), r.err)
	}
	return uc, fc
}

func TestCallExchangeThenReuse(t *testing.T) {
	addr := listenAddr(t)
	tl := newTestLoop(t, testPool, addr)
	p := tl.pool(0)

	c, r := newCall()
	if c.Node() != "" || c.State() != Init {
		t.Fatalf("new call: node %q, state %s", c.Node(), c.State())
	}
	c.Start(p, head(getHead), getOpts) // no ConnectTimeout: the pool's applies
	if c.connectTimeout != testPool.ConnectTimeout {
		t.Fatalf("connect timeout %s, want the pool's %s", c.connectTimeout, testPool.ConnectTimeout)
	}
	uc, fc := tl.open()
	if fc.sent() != getHead || c.State() != Sent || r.ready != 1 || c.Node() != addr {
		t.Fatalf("after open: sent %q, state %s, ready %d, node %q", fc.sent(), c.State(), r.ready, c.Node())
	}
	// The head arrives alone, then the body: split across reads.
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n")
	deliver(uc, fc, "\r\no")
	if c.State() != Received || r.status != 200 || r.done {
		t.Fatalf("mid-body: state %s, status %d, done %v", c.State(), r.status, r.done)
	}
	deliver(uc, fc, "k")
	if c.State() != Done || r.body.String() != "ok" || !r.done || p.Idle() != 1 || fc.closed {
		t.Fatalf("done: state %s, body %q, idle %d, closed %v", c.State(), r.body.String(), p.Idle(), fc.closed)
	}

	c2, _ := newCall()
	c2.Start(p, head(getHead), getOpts)
	if p.stats.Reuses.Load() != 1 || !c2.reusedConn || c2.conn != uc {
		t.Fatalf("second call did not reuse the idle connection: reuses %d", p.stats.Reuses.Load())
	}
	c2.Abort()
	if !fc.closed || c2.State() != Failed {
		t.Fatalf("Abort mid-exchange: closed %v, state %s", fc.closed, c2.State())
	}
}

// Failing to write the request head on a reused connection: an idempotent
// request goes again on a fresh connection, anything else fails.
func TestCallHeadWriteFails(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)

	_, fc := tl.exchange(p)
	fc.writeErr = errWrite
	c, r := newCall()
	c.Start(p, head(getHead), getOpts)
	if !fc.closed || c.State() != Init || c.dialing == nil {
		t.Fatalf("GET after a failed head write: closed %v, state %s, dialing %v", fc.closed, c.State(), c.dialing != nil)
	}
	uc2, fc2 := tl.open()
	if fc2.sent() != getHead {
		t.Fatalf("retry sent %q", fc2.sent())
	}
	deliver(uc2, fc2, "HTTP/1.1 204 No Content\r\n\r\n")
	if c.State() != Done || r.status != 204 || r.err != nil {
		t.Fatalf("retried GET: state %s, status %d, err %v", c.State(), r.status, r.err)
	}

	fc2.writeErr = errWrite
	post, pr := newCall()
	post.Start(p, head("POST / HTTP/1.1\r\nHost: x\r\n\r\n"), Options{ResponseTimeout: time.Second})
	if pr.err != ErrReset || post.State() != Failed || !fc2.closed || len(tl.el.enrolls) != 0 {
		t.Fatalf("POST after a failed head write: err %v, state %s, closed %v", pr.err, post.State(), fc2.closed)
	}
}

// A reused connection closed before any response byte: GET is resent once,
// POST is not.
func TestCallStaleConnection(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)

	uc, _ := tl.exchange(p)
	c, r := newCall()
	c.Start(p, head(getHead), getOpts)
	uc.Closed(io.EOF)
	if !c.retried || c.State() != Init {
		t.Fatalf("GET on a stale connection: retried %v, state %s", c.retried, c.State())
	}
	uc2, fc2 := tl.open()
	if fc2.sent() != getHead {
		t.Fatalf("the retry sent %q", fc2.sent())
	}
	uc2.Closed(io.EOF) // the fresh connection fails too: no second retry
	if r.err != ErrReset || c.State() != Failed {
		t.Fatalf("second failure: err %v, state %s", r.err, c.State())
	}

	uc3, _ := tl.exchange(p)
	post, pr := newCall()
	post.Start(p, head("POST / HTTP/1.1\r\nHost: x\r\n\r\n"), Options{ResponseTimeout: time.Second})
	uc3.Closed(io.EOF)
	if pr.err != ErrReset || post.retried {
		t.Fatalf("bodiless POST on a stale connection: err %v, retried %v", pr.err, post.retried)
	}
}

func TestCallUnrequested101(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	c, r, uc, fc := tl.getOpen(tl.pool(0))
	deliver(uc, fc, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
	if r.err != ErrBadResponse || len(r.interim) != 0 || !fc.closed || c.State() != Failed {
		t.Fatalf("101: err %v, interim %v, closed %v, state %s", r.err, r.interim, fc.closed, c.State())
	}
}

func TestCallInterimAndReceiverStops(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)

	c, r, uc, fc := tl.getOpen(p)
	deliver(uc, fc, "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	if len(r.interim) != 1 || r.interim[0] != 103 || r.status != 200 || c.State() != Done {
		t.Fatalf("103 then 200: interim %v, status %d, state %s", r.interim, r.status, c.State())
	}

	// The owner aborts the call from each callback in turn; the call stops
	// there and the connection is closed.
	for _, at := range []string{"interim", "head", "body"} {
		c, r := newCall()
		r.stopAt = at
		c.Start(p, head(getHead), getOpts)
		var uc *Conn
		var fc *fakeConn
		if c.conn != nil {
			uc, fc = c.conn, c.conn.gc.(*fakeConn)
		} else {
			uc, fc = tl.open()
		}
		deliver(uc, fc, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nbody")
		if c.State() != Failed || !fc.closed || r.err != nil {
			t.Fatalf("stop at %s: state %s, closed %v, err %v", at, c.State(), fc.closed, r.err)
		}
	}
}

// More bytes than the Content-Length: the response ends at its length and
// the connection is closed, not pooled.
func TestCallTrailingBytesRetireConnection(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	c, r, uc, fc := tl.getOpen(p)
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA")
	if c.State() != Done || r.body.String() != "ok" || !fc.closed || p.Idle() != 0 {
		t.Fatalf("state %s, body %q, closed %v, idle %d", c.State(), r.body.String(), fc.closed, p.Idle())
	}
}

func TestCallMalformedChunkedBody(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	_, r, uc, fc := tl.getOpen(tl.pool(0))
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\nzz\r\n")
	if r.err != ErrBadResponse || r.body.String() != "ok" || !fc.closed {
		t.Fatalf("err %v, body %q, closed %v", r.err, r.body.String(), fc.closed)
	}
}

// Bytes on an idle pooled connection belong to no call: the connection is
// closed at once, so no later call reads them as its response.
func TestCallBytesOnIdleConnection(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	uc, fc := tl.exchange(p)
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nstale")
	if !fc.closed || p.Idle() != 0 || uc.state != connClosed {
		t.Fatalf("closed %v, idle %d, state %s", fc.closed, p.Idle(), uc.state)
	}
}

func TestCallResponseTimeout(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	c, r, uc, fc := tl.getOpen(tl.pool(0))
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
	if !c.timer.(*fakeTimer).armed() {
		t.Fatal("no response timer between body reads")
	}
	tl.advance(2 * getOpts.ResponseTimeout)
	if c.State() != Timeout || r.err != ErrTimeout || !r.err.Timeout() || !fc.closed {
		t.Fatalf("state %s, err %v, closed %v", c.State(), r.err, fc.closed)
	}
}

// A socket dialed on the loop starts with Nagle's algorithm on, as
// nginx's do: a request head is its exchange's first write and never
// waits for an ACK, so GETs on it, new or reused, never pay for the
// setsockopt. The first body write turns TCP_NODELAY on, so no body byte
// waits behind the head for the upstream's delayed ACK.
func TestNagleOffFromTheFirstBodyWrite(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	_, _, uc, fc := tl.getOpen(p)
	if noDelay(t, fc.sock) {
		t.Fatal("a socket dialed on the loop has TCP_NODELAY before any body write")
	}
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	c, _ := newCall()
	c.Start(p, head(getHead), getOpts) // reuses uc
	if c.conn != uc || noDelay(t, fc.sock) {
		t.Fatalf("reused %v; a second GET turned TCP_NODELAY on", c.conn == uc)
	}
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

	for _, send := range []func(*Call) bool{
		func(c *Call) bool { return c.Send([]byte("hello")) },
		func(c *Call) bool { return c.SendChunk([]byte("hello")) },
	} {
		_ = unix.SetsockoptInt(fc.sock, unix.IPPROTO_TCP, unix.TCP_NODELAY, 0)
		uc.noDelay = false
		c, _ := newCall()
		c.Start(p, head("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n"), Options{HasBody: true, ResponseTimeout: time.Second})
		if c.conn != uc || noDelay(t, fc.sock) {
			t.Fatal("TCP_NODELAY on before the body")
		}
		if !send(c) || !noDelay(t, fc.sock) {
			t.Fatal("the first body write left Nagle's algorithm on")
		}
		c.SendDone()
		deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	}
}

// noDelay reads TCP_NODELAY from the socket fd.
func noDelay(t *testing.T, fd int) bool {
	t.Helper()
	v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY)
	if err != nil {
		t.Fatal(err)
	}
	return v != 0
}

// Request bodies: Send and SendChunk stream while the call is alive and
// report false once it has failed.
func TestCallSendBody(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	opts := Options{HasBody: true, ResponseTimeout: time.Second}
	post := "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"

	c, r := newCall()
	if c.Send([]byte("x")) || c.SendChunk([]byte("x")) || c.Backlog() != 0 {
		t.Fatal("a call with no connection took body bytes")
	}
	c.Start(p, head(post), opts)
	uc, fc := tl.open()
	if c.State() != Sending || r.ready != 1 {
		t.Fatalf("state %s, ready %d", c.State(), r.ready)
	}
	if !c.SendChunk([]byte("hello")) || !c.Send([]byte("0\r\n\r\n")) || c.Backlog() != 0 {
		t.Fatal("streaming the body failed")
	}
	c.SendDone()
	if want := post + "5\r\nhello\r\n0\r\n\r\n"; fc.sent() != want || c.State() != Sent {
		t.Fatalf("sent %q, state %s", fc.sent(), c.State())
	}
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n\r\n")
	if c.State() != Done || !c.Trailer() {
		t.Fatalf("state %s, trailer %v", c.State(), c.Trailer())
	}

	// A write failure mid-body fails the call; later sends report false.
	for _, chunked := range []bool{false, true} {
		c, r := newCall()
		c.Start(p, head(post), opts)
		fc := c.conn.gc.(*fakeConn)
		fc.writeErr = errWrite
		ok := false
		if chunked {
			ok = c.SendChunk([]byte("hello"))
		} else {
			ok = c.Send([]byte("hello"))
		}
		if ok || r.err != ErrReset || !fc.closed {
			t.Fatalf("chunked %v: send ok %v, err %v, closed %v", chunked, ok, r.err, fc.closed)
		}
		if c.Send([]byte("x")) || c.SendChunk([]byte("x")) {
			t.Fatal("a failed call took more body bytes")
		}
		if chunked {
			break
		}
		_, _ = tl.exchange(p) // a fresh idle connection for the chunked case
	}
}

// The response head arrives while the body is still going out (an early
// answer): the call is Received before SendDone, and the connection is not
// pooled because the request did not go out whole.
func TestCallEarlyResponse(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	c, r := newCall()
	c.Start(p, head("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n"), Options{HasBody: true, ResponseTimeout: time.Second})
	uc, fc := tl.open()
	deliver(uc, fc, "HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n")
	if r.status != 413 || c.State() != Done || !fc.closed || p.Idle() != 0 {
		t.Fatalf("status %d, state %s, closed %v, idle %d", r.status, c.State(), fc.closed, p.Idle())
	}
}

// A close-delimited body ends with the upstream's orderly close; a local
// close (nil error) cuts it.
func TestCallCloseDelimitedBody(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	for _, orderly := range []bool{true, false} {
		c, r, uc, fc := tl.getOpen(p)
		deliver(uc, fc, "HTTP/1.1 200 OK\r\n\r\nuntil close")
		if orderly {
			uc.Closed(io.EOF)
		} else {
			uc.Closed(nil)
		}
		switch {
		case orderly && (c.State() != Done || !r.done || r.body.String() != "until close"):
			t.Fatalf("orderly close: state %s, done %v, body %q", c.State(), r.done, r.body.String())
		case !orderly && (r.err != ErrReset || r.done):
			t.Fatalf("local close: err %v, done %v", r.err, r.done)
		}
	}
}

// A response head over the limits is 502/50203, not a generic bad response,
// every time (the log line about it is rate-limited, the answer is not).
func TestCallResponseHeadTooLarge(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	tl.l.limits.MaxHeaderCount = 2
	for i := 0; i < 2; i++ {
		_, r, uc, fc := tl.getOpen(tl.pool(0))
		deliver(uc, fc, "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n")
		if r.err != ErrHeadTooLarge || !fc.closed {
			t.Fatalf("response %d: err %v, closed %v", i, r.err, fc.closed)
		}
	}
}

func TestCallMalformedHead(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	c, r, uc, fc := tl.getOpen(tl.pool(0))
	if uc.Loop() != tl.l {
		t.Fatal("a connection does not know its loop")
	}
	deliver(uc, fc, "SMTP ready\r\n\r\n")
	if r.err != ErrBadResponse || !fc.closed || c.State() != Failed {
		t.Fatalf("err %v, closed %v, state %s", r.err, fc.closed, c.State())
	}
	// gnet reports the close of a connection already closed here: nothing
	// more happens, and closing it again does nothing.
	fc.closed = false
	uc.Closed(nil)
	uc.closeFor(closeError)
	if fc.closed || r.err != ErrBadResponse {
		t.Fatalf("a second close acted: closed %v, err %v", fc.closed, r.err)
	}
}
