// clientConn: one accepted connection and the state machine that serves it.

package engine

import (
	"net/netip"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/spool"
	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/loopgate/loopgate/engine/wheel"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/panjf2000/gnet/v2"
)

// clientState is where a client connection is in its request cycle.
//
// Transitions, all through clientConn.setState:
//
//	Idle -> ReadingHead        the first byte of a request arrived
//	Idle, ReadingHead, WaitingUpstream -> BufferingBody   routed and filtered; its small body is awaited whole
//	Idle, ReadingHead, BufferingBody -> ReadingBody | WaitingUpstream   the request goes upstream
//	ReadingBody -> WaitingUpstream     the request body was sent whole
//	ReadingBody, WaitingUpstream -> WritingResponse      the response head was written
//	WritingResponse -> Idle    the response is complete and the connection stays open
//	ReadingBody, WaitingUpstream -> Idle   a gateway error was answered (404, 502, ...)
//	                           and the connection stays open
//	WaitingUpstream -> Tunnel  the upstream's 101 made the connection a tunnel
//	                           (tunnel.go): it left HTTP for good
//	any but Tunnel -> Closing  the last response is written; close once it is flushed
//	any -> Closed
type clientState uint8

const (
	stateIdle clientState = iota
	stateReadingHead
	stateBufferingBody
	stateReadingBody
	stateWaitingUpstream
	stateWritingResponse
	stateTunnel
	stateClosing
	stateClosed
)

var clientStateNames = [...]string{"idle", "reading-head", "buffering-body", "reading-body", "waiting-upstream", "writing-response", "tunnel", "closing", "closed"}

func (s clientState) String() string { return clientStateNames[s] }

// clientConn is one client connection. Owned by its loop.
type clientConn struct {
	gc    gnet.Conn
	loop  *loop
	state clientState
	timer wheel.Timer // header read, idle, body read or linger deadline
	ex    *exchange   // the request being served, nil between requests

	closeAfter  bool        // close once the current response is written
	peerGone    bool        // gnet reported the close; handling is deferred
	serving     bool        // serve is on the stack
	headPending bool        // a response head waits in loop.out (see flushHead)
	spool       spool.Spool // response bytes the client is too slow for
	spoolStuck  time.Time   // when the spool last stopped draining
	lingerUntil time.Time   // Closing: give up flushing after this

	peer netip.Addr // the TCP peer, for client-IP and access filters

	// headClock: the header_read deadline is already running (armed at
	// accept), so the first byte of the head must not restart it.
	headClock bool
	// accounted is what this connection last added to the server's
	// buffered-bytes total (see account).
	accounted int64
	// timerDue is when timer is due (loop.timerNow's clock) while idle
	// armed it, 0 once anything else arms or stops it (arm, stopTimer) or
	// it fires; idleUntil is the idle wait's own deadline. An idle wait
	// that finds its previous one's timer due a little before its own
	// deadline leaves it armed (serve does not stop it either), and
	// onTimer waits for the rest: a keep-alive request costs no stop and
	// re-arm.
	timerDue, idleUntil int64
	// headStart is when the head being read began arriving (loopstat.Now),
	// set when a head takes more than one read: request latency counts
	// from a request's first byte.
	headStart int64

	// tls is the connection's TLS session on an HTTPS listener, nil on a
	// plain one (see clientio.go); tlsSink is it as the spool's sink.
	tls     *tlsedge.Session
	tlsSink tlsSink
	tlsLog  tlsLog // what the access log says of it, set at the handshake's end
	// listener is the index of the listener the connection arrived on;
	// redirect its redirect_https port (0: none).
	listener, redirect int
	// hsts is its listener's Strict-Transport-Security line for every
	// response, nil for none; certHeaders the client certificate's header
	// lines for the upstream (subject_header, sans_header), nil for none.
	hsts, certHeaders []byte

	prev, next *clientConn // loop.clients
}

func (cc *clientConn) setState(s clientState) { cc.state = s }

// idle waits for the next request for at most d. The timer of the idle
// wait before, still armed and due within an eighth of d before this
// one's deadline, stays (see timerDue): under a steady load a connection's
// timer is re-armed once every d/8, not for every request.
func (cc *clientConn) idle(d time.Duration) {
	cc.setState(stateIdle)
	l := cc.loop
	cc.idleUntil = l.timerNow() + int64(d)
	if due := cc.timerDue; due != 0 && due <= cc.idleUntil && cc.idleUntil-due <= int64(d/8) {
		return
	}
	l.wheel.Arm(&cc.timer, d)
	cc.timerDue = cc.idleUntil
}

// arm arms the connection's timer for any deadline but idle's.
func (cc *clientConn) arm(d time.Duration) {
	cc.timerDue = 0
	cc.loop.wheel.Arm(&cc.timer, d)
}

// stopTimer stops the connection's timer, whatever it holds.
func (cc *clientConn) stopTimer() {
	cc.timerDue = 0
	cc.timer.Stop()
}

// traffic is OnTraffic: new bytes from the client.
func (cc *clientConn) traffic() {
	if t := cc.tls; t != nil {
		t.Traffic()
		if !t.Established() {
			return // the handshake took the bytes, or failed and closed
		}
	}
	switch cc.state {
	case stateIdle, stateReadingHead:
		cc.serve()
	case stateBufferingBody:
		cc.ex.bodyArrived()
	case stateReadingBody, stateWaitingUpstream, stateWritingResponse:
		if ex := cc.ex; ex != nil && !ex.body.done && !ex.body.stalled {
			if cc.state == stateReadingBody {
				cc.arm(ex.snap.timeouts.idle)
			}
			ex.pumpBody()
		}
	case stateClosing, stateClosed:
		_, _ = cc.gc.Discard(-1)
		return
	}
	// gnet cannot stop reading, so bytes the client sends ahead of the
	// current exchange pile up here: pipelined requests, or a body the
	// upstream is taking slowly (bounded by max_body_bytes). Past the cap
	// the connection is cut.
	if cc.state == stateClosed {
		cc.account()
		return
	}
	in := cc.inbound()
	if in > cc.inboundCap() {
		cc.close()
		return
	}
	// A TLS record that does not decrypt, or the client's close_notify,
	// ends the connection as a TCP close does on a plain one.
	if t := cc.tls; t != nil && t.ReadErr() != nil {
		cc.close()
		return
	}
	cc.accountHeld(in)
}

// account brings the server's count of buffered bytes up to date with
// what this connection holds now, for max_buffered_bytes: unread input,
// and while an exchange runs its queued output and the request body queued
// towards its upstream. Output left queued after a response is not
// counted: nothing re-counts an idle connection, so it would stay counted
// long after the kernel took it. It touches the shared atomic only when the
// figure changed, which between requests it does not.
func (cc *clientConn) account() {
	if cc.state == stateClosed {
		cc.settle(0)
		return
	}
	cc.accountHeld(cc.inbound())
}

// accountHeld is account with the connection's unread input already
// measured (in), as traffic has it.
func (cc *clientConn) accountHeld(in int) {
	held := int64(in)
	if ex := cc.ex; ex != nil {
		held += int64(cc.gc.OutboundBuffered())
		if ex.retry.attached {
			held += int64(ex.call.Backlog())
		}
	}
	cc.settle(held)
}

// settle makes held the connection's share of the server's buffered-bytes
// total.
func (cc *clientConn) settle(held int64) {
	if d := held - cc.accounted; d != 0 {
		cc.accounted = held
		srv := cc.loop.srv
		if total := srv.buffered.Add(d); d > 0 && total > srv.bufferedPeak.Load() {
			srv.notePeak(total)
		}
	}
}

// inboundCap is how many unread bytes the connection may hold: by the
// running exchange's snapshot, else the loop's.
func (cc *clientConn) inboundCap() int {
	if ex := cc.ex; ex != nil {
		if !ex.body.done {
			return ex.snap.maxConnBuffer + int(ex.snap.limits.MaxBodyBytes)
		}
		return ex.snap.maxConnBuffer
	}
	return cc.loop.state.snap.maxConnBuffer
}

// serve parses and starts requests while the connection is between
// exchanges. Pipelined requests are taken one at a time, so responses go
// out strictly in order.
//
// serving is cleared by falling out of the loop, not by a defer (18
// instructions a request): nothing on a loop recovers a panic, so no
// unwinding passes here.
func (cc *clientConn) serve() {
	l := cc.loop
	l.current() // a new request takes the running config version
	cc.serving = true
	for cc.state == stateIdle || cc.state == stateReadingHead {
		buf := cc.peek(-1)
		if len(buf) == 0 {
			break
		}
		req := &l.req
		req.Reset()
		n, err := codec.ParseRequest(buf, req, &l.state.snap.limits)
		if err != nil {
			cc.reject(err)
			break
		}
		if n == 0 {
			if cc.state == stateIdle {
				cc.setState(stateReadingHead)
				cc.headStart = loopstat.Now()
				// header_read counts from the start of the request: from
				// accept for the first one (already running), else from
				// its first byte, after the idle wait.
				if !cc.headClock {
					cc.arm(l.state.snap.timeouts.headerRead)
				}
			}
			break
		}
		// The timer is left armed: the exchange's phases arm or stop it
		// as they need (arm, stopTimer), and one that fires meanwhile
		// finds nothing to do (onTimer); the idle wait after the response
		// may keep it (idle).
		cc.headClock = false
		cc.start(req, n)
	}
	cc.serving = false
}

// reject answers a request that could not be parsed and closes, since the
// framing of anything after it is unknown.
func (cc *clientConn) reject(err error) {
	var id [24]byte
	n := cc.loop.nextRequestID(&id)
	e, ok := err.(*codec.Error)
	if !ok {
		e = codec.ErrMalformed
	}
	cc.closeAfter = true
	// No exchange began, so it is counted here, as unrouted.
	start := loopstat.Now()
	if cc.state == stateReadingHead {
		start = cc.headStart
	}
	cc.loop.srv.metrics.unrouted.record(cc.loop.index, e.Status, e.Code, start)
	cc.logRejected(e.Status, e.Code, e.Message, start, id[:n])
	cc.writeError(e.Status, e.Code, e.Message, id[:n], false, nil, nil)
	cc.closeWhenFlushed()
}

// finish is called when the exchange is complete and its response written.
func (cc *clientConn) finish() {
	ex := cc.ex
	cc.ex = nil
	bodyLeft := ex.body.mode != codec.BodyNone && !ex.body.done
	cc.loop.putExchange(ex)
	if cc.state == stateClosed {
		return
	}
	// Only the input is left to count now. Outside serve it cannot have
	// grown since it was last counted (bytes arrive in traffic, which
	// counts them), so a connection that holds no count holds nothing.
	if cc.accounted != 0 || cc.serving {
		cc.account()
	}
	if cc.closeAfter || bodyLeft {
		cc.closeWhenFlushed()
		return
	}
	cc.idle(cc.loop.state.snap.timeouts.idle)
	if !cc.serving { // else the serve loop up the stack takes the next request
		cc.serve()
	}
}

// onTimer fires the deadline of the current state.
func (cc *clientConn) onTimer() {
	cc.timerDue = 0
	switch cc.state {
	case stateIdle:
		// Armed for an earlier idle wait (see timerDue), or for a
		// deadline an exchange no longer needs: wait for the rest.
		if rest := cc.idleUntil - cc.loop.timerNow(); rest > 0 {
			cc.loop.wheel.Arm(&cc.timer, time.Duration(rest))
			cc.timerDue = cc.idleUntil
			return
		}
		cc.close()
	case stateReadingHead:
		cc.reject(errHeaderTimeout)
	case stateBufferingBody:
		ex := cc.ex
		ex.discardHead()
		cc.closeAfter = true
		ex.respond(408, 40801, "timed out reading the request body")
	case stateReadingBody, stateWaitingUpstream, stateWritingResponse:
		if ex := cc.ex; ex != nil && ex.body.stalled {
			// Retry the stalled body; pumpBody re-arms the tick if the
			// upstream is still behind, and gives up after the response
			// timeout.
			if cc.state == stateReadingBody {
				cc.arm(ex.snap.timeouts.idle)
			}
			ex.pumpBody()
			return
		}
		if cc.state != stateReadingBody {
			return
		}
		if ex := cc.ex; ex != nil && !ex.responding() {
			ex.call.Abort()
			cc.closeAfter = true
			ex.respond(408, 40801, "timed out reading the request body")
			return
		}
		cc.close()
	case stateClosing:
		cc.lingerCheck()
	}
}

var errHeaderTimeout = &codec.Error{Status: 408, Code: 40801, Message: "timed out reading the request head"}

// closeWhenFlushed closes once gnet has written everything queued: gnet's own
// close writes what it can without blocking and drops the rest, which would
// truncate a large final response.
func (cc *clientConn) closeWhenFlushed() {
	if cc.state == stateClosed {
		return
	}
	cc.setState(stateClosing)
	cc.lingerUntil = time.Now().Add(cc.loop.state.snap.timeouts.drain)
	cc.lingerCheck()
}

func (cc *clientConn) lingerCheck() {
	if cc.gc.OutboundBuffered() == 0 || time.Now().After(cc.lingerUntil) {
		cc.close()
		return
	}
	cc.arm(wheel.DefaultTick)
}

// write queues p (a head or an error) for the client. It reports false when
// the connection is gone. Body bytes go through writeBody, which bounds what
// is queued.
func (cc *clientConn) write(p []byte) bool {
	if cc.peerGone || cc.state == stateClosed {
		return false
	}
	if err := cc.send(p); err != nil || cc.peerGone {
		cc.closeSoon()
		return false
	}
	if ex := cc.ex; ex != nil {
		ex.end.bytesOut += int64(len(p))
	}
	return true
}

// writeBody queues response body bytes, spilling to the connection's spool
// file once the client is max_conn_buffer behind.
func (cc *clientConn) writeBody(p []byte) bool {
	if cc.peerGone || cc.state == stateClosed {
		return false
	}
	l := cc.loop
	was := cc.spool.Pending()
	if err := cc.spool.Write(cc.sink(), p, cc.spoolConfig(), l.spoolBuf); err != nil || cc.peerGone {
		cc.closeSoon()
		return false
	}
	if !was && cc.spool.Pending() {
		l.spooling = append(l.spooling, cc)
	}
	if ex := cc.ex; ex != nil {
		ex.end.bytesOut += int64(len(p))
	}
	return true
}

// spoolConfig is how the connection spools: by the running exchange's
// snapshot, else the loop's.
func (cc *clientConn) spoolConfig() *spool.Config {
	if ex := cc.ex; ex != nil {
		return &ex.snap.spool
	}
	return &cc.loop.state.snap.spool
}

// closeSoon closes after a failed write. The write may be this client's
// held head flushed from under another client's call (see takeOut), with
// this client's own exchange still on the stack, so nothing is torn down
// here: gnet's close (already reported when its Write failed, else
// requested now) arrives as a deferred event and release runs when the
// outermost callback returns. Until then peerGone makes every write fail.
func (cc *clientConn) closeSoon() {
	if !cc.peerGone {
		cc.peerGone = true
		_ = cc.gc.Close()
	}
}

// flushHead writes a response head held back for coalescing.
func (cc *clientConn) flushHead() bool {
	if !cc.headPending {
		return true
	}
	cc.headPending = false
	cc.loop.pendingHead = nil
	return cc.write(cc.loop.out)
}

// close tears the connection down now, aborting any exchange.
func (cc *clientConn) close() {
	if cc.state == stateClosed {
		return
	}
	if cc.tls != nil {
		cc.tls.Close(true) // close_notify, as nginx sends
	}
	cc.release()
	_ = cc.gc.Close()
}

// onClosed is OnClose: the peer closed, or our own close completed.
func (cc *clientConn) onClosed() {
	if cc.state != stateClosed {
		cc.release()
	}
}

// release frees everything the connection holds.
func (cc *clientConn) release() {
	cc.setState(stateClosed)
	cc.stopTimer()
	cc.spool.Reset()
	if cc.tls != nil {
		cc.tls.Close(false) // a handshake still running is given up
	}
	if cc.headPending {
		cc.headPending = false
		cc.loop.pendingHead = nil
	}
	if ex := cc.ex; ex != nil {
		cc.ex = nil
		ex.end.clientGone = true
		ex.call.Abort()
		cc.loop.putExchange(ex)
	}
	cc.loop.clients.remove(cc)
	cc.loop.srv.clients.Add(-1)
	cc.loop.stats.conns.Add(-1)
	cc.account()
}
