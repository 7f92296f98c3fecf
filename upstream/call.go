// Call: the async client context for one request/response exchange.

package upstream

import (
	"log"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/loopgate/loopgate/pool"
	"github.com/panjf2000/gnet/v2"
)

// Receiver gets a Call's events, always on the call's loop. Each method
// returns whether the receiver still wants the call; false means it aborted
// the call from inside the callback and the call must stop touching it.
type Receiver interface {
	// CallReady: a connection is attached and the request head written. A
	// request with a body streams it now with Send and ends it with SendDone.
	CallReady(c *Call) bool
	// ResponseHead: the response head arrived. r is valid only during the
	// callback. Interim (1xx) heads come here too, before the final one.
	ResponseHead(c *Call, r *codec.Response) bool
	// ResponseBody: wire bytes of the body (raw) and the payload they carry
	// (data). done marks the end of the response.
	ResponseBody(c *Call, raw, data []byte, done bool) bool
	// CallFailed: the call ended without a complete response.
	CallFailed(c *Call, err *Error)
}

// Options are per-call settings, resolved from route and upstream config.
type Options struct {
	ConnectTimeout  time.Duration
	ResponseTimeout time.Duration // to the first response byte, then between reads
	HEAD            bool          // the request is HEAD: the response has no body
	HasBody         bool          // the request streams a body after its head
	Retryable       bool          // idempotent and bodiless: may be resent on a fresh connection
	// Upgrade: the request asked to switch protocols (its Upgrade headers
	// were forwarded), so a 101 is a final answer: ResponseHead gets it
	// and the receiver takes the connection with Detach. Without it a 101
	// fails the call (502, code 50202): no Upgrade was asked for.
	Upgrade bool

	// Tenant, when set, counts the call against Share: the percent of the
	// pool's max_conns the tenant's calls may hold at once (waiting,
	// dialing or attached); past it the call fails with ErrPoolShare.
	Tenant *Tenant
	Share  int
}

// Call is one exchange with an upstream node. The owner keeps it (usually
// embedded) and calls Init once, then Start for every exchange.
// Owned by one loop; not safe for concurrent use.
type Call struct {
	callState // everything an attempt starts afresh: reset whole by Start

	opts      Options // set by every Start; outside callState so the hot accessors stay inlinable
	recv      Receiver
	timer     Timer // acquire, then response deadline; made by the loop's Clock at the first Start
	timerLoop *Loop // the loop timer belongs to

	// Written before they are read in every call, so Start leaves them:
	// the response's chunked decoder (reset by parseHead), and SendChunk's
	// scratch.
	chunked   codec.ChunkedDecoder
	chunkHead [20]byte  // size line of an outgoing request chunk
	vec       [3][]byte // writev scratch for SendChunk
}

// callState is a Call's per-Start state, apart from what it keeps across
// calls (its receiver, its timer) and what is always written before it is
// read: a smaller struct to zero per request (about 40 instructions fewer
// than the whole Call).
type callState struct {
	state      State
	loop       *Loop
	pool       *Pool
	conn       *Conn
	head       *pool.Buffer // request head; kept until the call ends, for a resend or the owner's retry (TakeHead)
	spare      *pool.Buffer // the head of a failed call, while CallFailed runs (see TakeHead)
	waiting    *Pool        // pool whose waiter queue holds the call
	sharedIn   *Pool        // pool whose shares count the call (opts.Tenant)
	dialing    *Conn        // connection being dialed for the call
	retried    bool
	sendDone   bool
	gotBytes   bool // a response byte arrived: never resend after this
	wrote      bool // the request head was handed to a socket: its bytes may have reached the node
	reusedConn bool // the current connection served earlier exchanges

	mode      codec.BodyMode
	remaining int64
	keepAlive bool
	trailer   bool // the raw bytes last handed to ResponseBody are trailer-section bytes

	connectTimeout time.Duration
	started        int64 // loopstat.Now at Start, for the node's histograms
	status         int   // the final response status; 0 before
}

// Init binds the call to its receiver. Call it once. A call may serve any
// number of exchanges, all on one loop.
func (c *Call) Init(recv Receiver) { c.recv = recv }

// Retries returns how many times the request was resent on a fresh
// connection (0 or 1).
func (c *Call) Retries() int {
	if c.retried {
		return 1
	}
	return 0
}

// State returns where the call is.
func (c *Call) State() State { return c.state }

// Node returns the address of the node serving the call.
func (c *Call) Node() string {
	if c.pool == nil {
		return ""
	}
	return c.pool.Addr
}

// Pool returns the node pool of the call's current attempt; nil before
// the first Start.
func (c *Call) Pool() *Pool { return c.pool }

// Start begins an exchange on a node of p. head is the complete request head
// as it goes on the wire; the call owns it from now on and releases it.
func (c *Call) Start(p *Pool, head *pool.Buffer, opts Options) {
	c.spare.SafeRelease() // restarted from CallFailed without TakeHead
	c.leaveShare()        // started again without ending: nothing stays counted
	timer := c.timer
	if c.timerLoop != p.loop { // the first Start (a call stays on its loop)
		c.stopTimer()
		timer = p.loop.clock.NewTimer(c.onTimer)
	}
	c.timer, c.timerLoop, c.opts = timer, p.loop, opts
	c.callState = callState{loop: p.loop, pool: p, head: head,
		connectTimeout: opts.ConnectTimeout, started: p.loop.host.Now()}
	if c.connectTimeout <= 0 {
		c.connectTimeout = p.cfg.ConnectTimeout
	}
	p.acquire(c, false)
}

func (c *Call) setState(s State) { c.state = s }

// attach gives the call its connection and writes the request head.
func (c *Call) attach(uc *Conn) {
	uc.state = connActive
	uc.call = c
	c.conn = uc
	c.reusedConn = uc.served > 0
	c.setState(Sending)
	if uc.write(c.head.B) != nil {
		c.connFailed()
		return
	}
	c.wrote = true
	if !c.opts.HasBody {
		c.SendDone()
	}
	c.recv.CallReady(c)
}

// Send streams request body bytes. It reports false when the call can no
// longer take bytes because it has failed (CallFailed has run).
func (c *Call) Send(p []byte) bool {
	if c.state.Terminal() || c.conn == nil {
		return false
	}
	c.conn.writeMore()
	if err := c.conn.write(p); err != nil {
		c.abort(err)
		return false
	}
	return true
}

// SendChunk streams one request body chunk in canonical form: a bare hex
// size line, the data and CRLF, in one writev. Extensions and the client's
// own size lines never reach the upstream, so its chunk parser sees only
// what Loopgate validated. It reports false like Send.
func (c *Call) SendChunk(data []byte) bool {
	if c.state.Terminal() || c.conn == nil {
		return false
	}
	c.conn.writeMore()
	c.vec[0] = codec.AppendChunkHeader(c.chunkHead[:0], len(data))
	c.vec[1] = data
	c.vec[2] = crlf
	err := c.conn.writev(c.vec[:])
	c.vec[1] = nil
	if err != nil || c.conn == nil || c.conn.state == connClosed {
		c.abort(ErrReset)
		return false
	}
	return true
}

var crlf = []byte("\r\n")

// Trailer reports whether the raw bytes of the latest ResponseBody call are
// part of a chunked body's trailer section (the field lines and the final
// CRLF), for a receiver that forwards or drops trailers.
func (c *Call) Trailer() bool { return c.trailer }

// Backlog is how many sent bytes still wait in the connection's outbound
// buffer. Senders stop feeding the call while it is high: gnet buffers
// without limit, so this is the only flow control there is.
func (c *Call) Backlog() int {
	if c.conn == nil || c.conn.gc == nil {
		return 0
	}
	return c.conn.gc.OutboundBuffered()
}

// SendDone marks the request body complete.
//
// The response deadline starts here: while a body is still streaming, the
// client's read deadline is the one that applies, so a slow upload is not
// mistaken for a slow upstream.
func (c *Call) SendDone() {
	c.sendDone = true
	if c.state == Sending {
		c.state = Sent // not setState: SendDone stays within the inlining budget
		c.timer.Arm(c.opts.ResponseTimeout)
	}
}

// Abort ends the call from the owner's side (the client went away). The
// connection is closed unless the exchange was complete.
func (c *Call) Abort() {
	if c.status != 0 && !c.state.Terminal() {
		c.report(nil) // the node answered; only the owner gave up on the rest
	}
	c.stopTimer()
	c.leaveShare()
	if c.waiting != nil {
		c.waiting.dequeue(c)
	}
	if c.dialing != nil {
		c.dialing.dialFor = nil // the dial's connection will go to the pool
		c.dialing = nil
	}
	if c.conn != nil {
		uc := c.conn
		c.conn = nil
		uc.call = nil
		uc.closeFor(closeAborted)
	}
	c.head.SafeRelease()
	c.head = nil
	if !c.state.Terminal() {
		c.setState(Failed)
	}
}

// onData consumes response bytes from the front of buf and returns how many.
func (c *Call) onData(buf []byte) int {
	consumed := 0
	for !c.state.Terminal() {
		if c.state != Received {
			n := c.parseHead(buf[consumed:])
			if n == 0 {
				return consumed
			}
			consumed += n
			continue
		}
		if consumed == len(buf) && c.mode != codec.BodyNone {
			c.timer.Arm(c.opts.ResponseTimeout)
			return consumed
		}
		raw, data, done, bad := c.nextBody(buf[consumed:])
		consumed += len(raw)
		if bad {
			c.abort(ErrBadResponse)
			return consumed
		}
		if done {
			c.finish(consumed < len(buf))
		}
		if !c.recv.ResponseBody(c, raw, data, done) || done {
			return consumed
		}
	}
	return consumed
}

// parseHead parses one response head; 0 means more bytes are needed or the
// call ended.
func (c *Call) parseHead(buf []byte) int {
	r := &c.loop.resp
	r.Reset()
	n, err := codec.ParseResponse(buf, r, &c.loop.limits)
	if err != nil {
		if err == codec.ErrResponseHeadTooLarge {
			// A legitimate backend can trip this (many cookies, a big
			// CSP): say so in the log, since the client only sees a 502.
			// At most once a second: a bad upstream must not turn every
			// request into a synchronous log write on the loop.
			if c.loop.logLimit.Allow(c.loop.clock.Now()) {
				log.Printf("upstream %s: response head over max_response_header_count/bytes (%d fields, %d bytes); answered 502",
					c.pool.Addr, c.loop.limits.MaxHeaderCount, c.loop.limits.MaxHeaderBytes)
			}
			c.abort(ErrHeadTooLarge)
			return 0
		}
		c.abort(ErrBadResponse)
		return 0
	}
	if n == 0 {
		return 0
	}
	if !c.gotBytes {
		c.gotBytes = true
		// The first byte ends a duration: Fresh, so the call's and the
		// exchange's ends in this callback share its reading.
		c.pool.stats.FirstByte.Observe(c.loop.host.Fresh() - c.started)
	}
	if r.Status == 101 {
		return c.switched(r, n)
	}
	if r.Status < 200 {
		if !c.recv.ResponseHead(c, r) {
			return 0
		}
		return n
	}
	c.status = r.Status
	c.mode = r.BodyMode(c.opts.HEAD)
	c.remaining = r.ContentLength
	c.keepAlive = r.KeepAlive && c.mode != codec.BodyUntilClose
	c.chunked.Reset(0)
	c.setState(Received)
	if !c.recv.ResponseHead(c, r) {
		return 0
	}
	return n
}

// switched handles a 101 Switching Protocols of n head bytes: a call that
// asked to upgrade hands it to the receiver, which takes the connection
// (Detach); any other call fails, since no Upgrade was forwarded.
func (c *Call) switched(r *codec.Response, n int) int {
	if !c.opts.Upgrade {
		c.abort(ErrBadResponse)
		return 0
	}
	c.status = r.Status
	c.setState(Received)
	if !c.recv.ResponseHead(c, r) || c.conn != nil {
		if c.conn != nil { // the receiver did not take it: the bytes that follow are not HTTP
			c.abort(ErrBadResponse)
		}
		return 0
	}
	return n
}

// Detach ends the call with its connection switched to another protocol,
// during ResponseHead for a 101: the connection leaves the pool for good
// (counted as closed for "upgraded") and the caller owns the returned
// gnet connection from now on, and must set its Context before the
// callback returns. The bytes after the 101 head stay in its input
// buffer; nothing has been read past the head. On a TLS connection the
// session comes with it (nil otherwise): the bytes go through it.
func (c *Call) Detach() (gnet.Conn, *tlsedge.Session) {
	uc := c.conn
	c.conn = nil
	c.timer.Stop()
	c.leaveShare()
	c.head.SafeRelease()
	c.head = nil
	c.setState(Done)
	c.report(nil)
	uc.call = nil
	uc.detach()
	return uc.gc, uc.tls
}

// nextBody takes the next piece of body from buf per the response framing.
func (c *Call) nextBody(buf []byte) (raw, data []byte, done, bad bool) {
	switch c.mode {
	case codec.BodyNone:
		return nil, nil, true, false
	case codec.BodyLength:
		n := int64(len(buf))
		if n > c.remaining {
			n = c.remaining
		}
		c.remaining -= n
		return buf[:n], buf[:n], c.remaining == 0, false
	case codec.BodyChunked:
		c.trailer = c.chunked.InTrailers()
		n, payload, fin, err := c.chunked.Next(buf)
		if err != nil {
			return nil, nil, false, true
		}
		return buf[:n], payload, fin, false
	default: // BodyUntilClose: the end is the upstream's orderly close
		return buf, buf, false, false
	}
}

// finish ends a complete exchange and returns or closes the connection.
// A connection goes back to the pool only if the upstream will keep it open,
// the request went out whole and nothing unexpected follows the response.
func (c *Call) finish(trailing bool) {
	c.timer.Stop()
	c.leaveShare()
	c.head.SafeRelease()
	c.head = nil
	c.setState(Done)
	c.report(nil)
	uc := c.conn
	c.conn = nil
	if uc == nil {
		return
	}
	uc.call = nil
	if c.keepAlive && c.sendDone && !trailing && uc.state == connActive {
		uc.served++
		c.pool.release(uc)
	} else if !c.keepAlive {
		uc.closeFor(closeUpstream)
	} else {
		uc.closeFor(closeError)
	}
}

// onConnClosed: the upstream closed the connection under the call.
func (c *Call) onConnClosed(orderly bool) {
	c.conn = nil
	switch {
	case c.state == Received && c.mode == codec.BodyUntilClose && orderly:
		c.finish(false)
		c.recv.ResponseBody(c, nil, nil, true)
	case !c.gotBytes && c.opts.Retryable && !c.retried && c.attemptReused():
		c.retried = true
		c.stopTimer()
		c.setState(Init)
		c.pool.acquire(c, true)
	default:
		c.fail(ErrReset)
	}
}

// attemptReused reports whether the failed attempt ran on a connection that
// had served earlier exchanges: such a connection may have been closed by
// the upstream while idle, which is the one failure worth a blind resend.
func (c *Call) attemptReused() bool { return c.reusedConn }

// connFailed: writing the head failed.
func (c *Call) connFailed() {
	if c.conn != nil {
		uc := c.conn
		c.conn = nil
		uc.call = nil
		uc.closeFor(closeError)
	}
	c.onConnClosed(false)
}

func (c *Call) onTimer() {
	if c.waiting != nil {
		c.waiting.dequeue(c)
		c.fail(ErrPoolFull)
		return
	}
	c.setState(Timeout)
	c.abort(ErrTimeout)
}

// abort closes the connection and fails the call.
func (c *Call) abort(err *Error) {
	if c.conn != nil {
		uc := c.conn
		c.conn = nil
		uc.call = nil
		uc.closeFor(closeError)
	}
	c.fail(err)
}

// fail ends the call and tells the receiver.
func (c *Call) fail(err *Error) {
	c.stopTimer()
	c.leaveShare()
	c.spare, c.head = c.head, nil
	if c.state != Timeout {
		c.setState(Failed)
	}
	c.report(err)
	c.recv.CallFailed(c, err)
	// The receiver may have taken the head back for a retry, and may have
	// started the call again (Start frees an untaken one): spare is set
	// only when neither happened.
	c.spare.SafeRelease()
	c.spare = nil
}

// TakeHead hands the request head back to the owner, for a retry of the
// same request on another node with Start: during CallFailed, or during
// ResponseHead before an Abort. The owner then owns it; nil when the call
// holds none.
func (c *Call) TakeHead() *pool.Buffer {
	if c.spare != nil {
		h := c.spare
		c.spare = nil
		return h
	}
	h := c.head
	c.head = nil
	return h
}

// Wrote reports whether the request head was handed to a socket, so its
// bytes may have reached the node; a call that failed to connect did not.
func (c *Call) Wrote() bool { return c.wrote }

// Answered reports whether any response byte arrived.
func (c *Call) Answered() bool { return c.gotBytes }

// report tells the node how the call ended (see Outcome); err is nil for
// a complete response.
func (c *Call) report(err *Error) {
	o := Outcome{Err: err, Status: c.status, Total: time.Duration(c.loop.host.Fresh() - c.started)}
	c.pool.node.report(c.pool.stats, &o)
}

// leaveShare uncounts the call from its tenant's share of the pool, once,
// on every way a call ends: finish, fail, Abort.
func (c *Call) leaveShare() {
	if p := c.sharedIn; p != nil {
		c.sharedIn = nil
		p.shares.leave(c.opts.Tenant)
	}
}

// stopTimer stops the call's deadline, if it ever had one.
func (c *Call) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
	}
}
