// tunnel: a client connection and an upstream connection joined after a
// 101 Switching Protocols, carrying bytes both ways unparsed on their loop,
// with bounded buffering, an idle deadline and one access line at close.

package engine

import (
	"errors"
	"io"
	"time"

	"github.com/loopgate/loopgate/engine/accesslog"
	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/loopgate/loopgate/engine/wheel"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/pool/sockio"
	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// tunnelSide names one end of a tunnel; it indexes tunnel.ends.
type tunnelSide uint8

const (
	sideClient tunnelSide = iota
	sideUpstream
)

func (s tunnelSide) peer() tunnelSide { return 1 - s }

// tunnelState is where a tunnel is in its life.
//
// Transitions, all through tunnel.setState:
//
//	Open -> ClientHalf      the client half-closed (its FIN read, plain TCP
//	                        both ends): the upstream gets a FIN once what the
//	                        client sent is flushed, and its bytes go on to the
//	                        client until it closes too (tunnel_half.go)
//	Open -> UpstreamHalf    the same the other way
//	ClientHalf, UpstreamHalf -> Closed   the survivor closed and what it
//	                        sent was flushed (or timeouts.drain passed)
//	ClientHalf, UpstreamHalf -> Closing  the gateway ends it (as from Open)
//	Open -> ClientDone      the client closed and its side cannot be kept
//	                        half open (TLS, an error, gnet's layout unknown):
//	                        what it sent is flushed to the upstream, which then
//	                        gets a FIN and is closed once it closes too
//	                        (flushSurvivor)
//	Open -> UpstreamDone    the same the other way
//	Open -> Closing         the gateway ends it (idle timeout, buffer overflow,
//	                        shutdown): both connections close now
//	ClientDone, UpstreamDone -> Closing   flushUntil passed (timeouts.drain)
//	ClientDone, UpstreamDone -> Closed    the survivor closed its side too
//	Closing -> Closed       gnet reported both connections closed (finish)
type tunnelState uint8

const (
	tunnelOpen tunnelState = iota
	tunnelClientDone
	tunnelUpstreamDone
	tunnelClientHalf
	tunnelUpstreamHalf
	tunnelClosing
	tunnelClosed
)

var tunnelStateNames = [...]string{"open", "client-done", "upstream-done", "client-half-closed", "upstream-half-closed", "closing", "closed"}

func (s tunnelState) String() string { return tunnelStateNames[s] }

// tunnelEndReason is why a tunnel ended: the access line's "end" and a
// label of loopgate_route_tunnel_closes_total.
type tunnelEndReason uint8

const (
	endClientClosed tunnelEndReason = iota
	endUpstreamClosed
	endIdleTimeout
	endOverflow // the fast side kept sending while paused (see traffic)
	endShutdown
	tunnelEndReasons
)

var tunnelEndNames = [tunnelEndReasons]string{"tunnel_client_closed", "tunnel_upstream_closed", "tunnel_idle_timeout", "tunnel_overflow", "tunnel_shutdown"}

func (r tunnelEndReason) String() string { return tunnelEndNames[r] }

// tunnelSettings are the websocket section of one config version. A
// tunnel keeps the version it opened with for its whole life.
type tunnelSettings struct {
	idle       time.Duration // websocket.idle_timeout
	maxTunnels int64         // websocket.max_tunnels
	buffer     int           // websocket.buffer: bytes queued per direction before the fast side is paused
	linger     time.Duration // timeouts.drain: how long a half-closed tunnel may take to flush
}

// tunnelEnd is one connection of a tunnel, and its gnet Context from the
// 101 on, so the server hands its events to the tunnel. Owned by the loop.
type tunnelEnd struct {
	t      *tunnel
	side   tunnelSide
	gc     gnet.Conn
	tls    *tlsedge.Session // the connection's TLS session (an HTTPS client, a TLS upstream); nil on plain TCP
	paused bool             // its reads are off the poller: its peer's queue is over the buffer
	gone   bool             // gnet reported it closed
	direct bool             // gnet's input ring is empty, so a read is all in gnet's read buffer (see take)
	bytes  int64            // bytes read from it and handed to the peer
}

// tunnel joins a client and an upstream connection of one loop. Owned by
// the loop.
type tunnel struct {
	loop  *loop
	cc    *clientConn // the client's connection; released when the tunnel finishes
	ends  [2]tunnelEnd
	state tunnelState
	end   tunnelEndReason
	set   *tunnelSettings // the config version the tunnel opened on
	stats *tunnelShard    // its route's, this loop's
	epfd  int             // the loop's epoll descriptor, for pausing reads; -1 = pausing unsupported

	idle wheel.Timer // websocket.idle_timeout, checked against lastActive
	flow wheel.Timer // while a side is paused or a flush lingers: each tick
	// lastActive is the wheel's tick (Ticks) of the last byte either way:
	// current, since the wheel ticks while its loop has traffic, and the
	// first callback after a sleep brings its time up to date (loop.wakeUp).
	lastActive int64
	flushUntil time.Time // ClientDone/UpstreamDone: close the survivor by then
	finSent    bool      // ClientDone/UpstreamDone/*Half: the survivor got its FIN
	accounted  int64     // what it last added to Server.buffered (see account)

	// half is the half-closed side (ClientHalf/UpstreamHalf), nil until
	// one half-closes (tunnel_half.go); apart, so an open tunnel does not
	// carry it.
	half *halfOpen

	// rec is the upgrade request's access record, completed and written
	// at the end; nil when the access log is off.
	rec *accesslog.Record
}

// openTunnel joins cc and the detached upstream connection up. The client
// has its 101; bytes it sent after its upgrade request wait in its input
// buffer and go to the upstream first, in order; bytes the upstream sent
// after its 101 wait in the upstream's, and a wake delivers them.
func openTunnel(l *loop, cc *clientConn, up gnet.Conn, upTLS *tlsedge.Session, set *tunnelSettings, stats *tunnelShard) *tunnel {
	t := &tunnel{loop: l, cc: cc, set: set, stats: stats, epfd: loopPoller(l)}
	t.ends[sideClient] = tunnelEnd{t: t, side: sideClient, gc: cc.gc, tls: cc.tls}
	t.ends[sideUpstream] = tunnelEnd{t: t, side: sideUpstream, gc: up, tls: upTLS}
	cc.gc.SetContext(&t.ends[sideClient])
	up.SetContext(&t.ends[sideUpstream])
	// Tunnels carry interactive traffic (a message, then its answer): no
	// Nagle delay towards the upstream either, as nginx sets tcp_nodelay
	// on upgraded connections. A socket dialed on the loop starts without
	// it (upstream.Conn.writeMore).
	_ = up.SetNoDelay(true)
	cc.setState(stateTunnel)
	cc.stopTimer()
	l.srv.buffered.Add(-cc.accounted) // the tunnel counts the connection's bytes from now on
	cc.accounted = 0
	t.idle.Init(t.idleCheck)
	t.flow.Init(t.flowCheck)
	t.lastActive = l.wheel.Ticks()
	l.wheel.Arm(&t.idle, set.idle)
	stats.open.Add(1)
	stats.opened.Add(1)
	t.traffic(&t.ends[sideClient])
	_ = up.Wake(nil)
	return t
}

func (t *tunnel) setState(s tunnelState) { t.state = s }

// peek and discard are an end's bytes, through its TLS session when it
// has one (as traffic's write is, and clientio.go's for a client
// connection): a tunnel carries the plaintext, each side encrypted with
// its own keys.
func (e *tunnelEnd) peek() []byte {
	if e.tls != nil {
		e.tls.Traffic() // new records may have arrived: decrypt them
		b, _ := e.tls.Peek(-1)
		return b
	}
	b, _ := e.gc.Peek(-1)
	return b
}

// take is peek for traffic's common case, with the bytes taken off e's
// input at once (taken) once they are all in gnet's read buffer (direct):
// one gnet call rather than a Peek and a Discard. The slice is that
// buffer, valid until the loop's next read, so the write that follows
// still sees it. Before (the input gnet kept from reads made before the
// tunnel opened, which Peek may copy into a pooled buffer that Discard
// returns) and over TLS they are only peeked. The tunnel takes all its
// input each time, so once emptied gnet's ring stays empty.
func (e *tunnelEnd) take() (b []byte, taken bool) {
	if e.direct {
		b, _ = e.gc.Next(-1)
		return b, true
	}
	return e.peek(), false
}

func (e *tunnelEnd) discard(n int) {
	if e.tls != nil {
		e.tls.Discard(n)
		return
	}
	_, _ = e.gc.Discard(n)
}

// traffic is OnTraffic for end e: its bytes go to the peer's output while
// the tunnel is open (and are dropped once it is not); past the buffer e
// stops being read.
func (e *tunnelEnd) traffic() { e.t.traffic(e) }

func (t *tunnel) traffic(in *tunnelEnd) {
	out := &t.ends[(in.side^1)&1] // the mask spares the bounds check
	if t.half != nil && t.state < tunnelClosing {
		t.relay(in) // out is the half-closed side
		return
	}
	buf, taken := in.take()
	if len(buf) == 0 {
		return
	}
	n := len(buf)
	if t.state != tunnelOpen || out.gone {
		// Nothing can take them: the peer is closed or closing.
		if !taken {
			in.discard(n)
		}
		return
	}
	// Write before Discard: buf may be a copy gnet returns to its pool at
	// Discard. A failed write closes the peer at once (OnClose runs inside
	// it), which the state check after it sees.
	// whole: it all went straight to the socket, so nothing is queued
	// for out (the common case, below). Plain TCP goes to the socket while
	// nothing is queued (sockio); what it does not take, or an error, is
	// left to gnet's Write, which queues the rest or closes the connection
	// as it always does. Written out here rather than in a method of
	// tunnelEnd: its frame cost 20 instructions a write.
	whole := false
	if out.tls == nil {
		whole, _ = sockio.Write(out.gc, buf)
	} else {
		_, _ = out.tls.Write(buf)
	}
	if !taken {
		in.discard(n)
		in.direct = in.tls == nil
	}
	in.bytes += int64(n)
	t.stats.addBytes(in.side, n)
	t.lastActive = t.loop.wheel.Ticks()
	if t.state != tunnelOpen {
		return
	}
	if whole && t.accounted == 0 && in.tls == nil {
		// The common case, a message that went out whole: nothing is held
		// (in's input was all taken; out's, and what is queued for in,
		// would have been counted when they grew) and nothing was counted.
		return
	}
	queued := out.gc.OutboundBuffered()
	if queued > t.set.buffer {
		// The peer reads slower than src writes. A side paused already got
		// here because gnet turned its reads back on (it does when it
		// finishes writing to that side): one read of at most
		// gnet's read buffer each time. Past overflowAt the peer is not
		// reading at all while src keeps sending, and the tunnel ends
		// rather than grow.
		if queued > overflowAt(t.set.buffer) {
			t.abort(endOverflow)
			return
		}
		t.pause(in)
	}
	t.account()
}

// overflowAt is the queue past which a tunnel ends: the buffer, plus room
// for the reads gnet may make while a side is paused.
func overflowAt(buffer int) int { return 2*buffer + 4*readBufferCap }

// readBufferCap is gnet's read buffer (Server.Run sets it): the most one
// read hands over.
const readBufferCap = 64 << 10

// pause stops reading e until its peer's queue drains (flowCheck). Where
// the poller cannot be reached (pausing unsupported) the queue grows to
// overflowAt and the tunnel ends.
//
// A side already paused is paused again: gnet turned its reads back on.
func (t *tunnel) pause(e *tunnelEnd) {
	if pauseReads(t.epfd, e.gc) && !e.paused {
		e.paused = true
		t.loop.wheel.Arm(&t.flow, wheel.DefaultTick)
	}
}

// flowCheck runs each tick while a side is paused or a flush lingers.
// gnet reports no "writable" event, so the peer's queue is polled, as the
// response spool is.
func (t *tunnel) flowCheck() {
	switch t.state {
	case tunnelOpen:
		again := false
		for i := range t.ends {
			e := &t.ends[i]
			if !e.paused {
				continue
			}
			if t.ends[e.side.peer()].gc.OutboundBuffered() <= t.set.buffer/2 {
				e.paused = false
				resumeReads(t.epfd, e.gc)
			} else {
				again = true
			}
		}
		t.account()
		if again {
			t.loop.wheel.Arm(&t.flow, wheel.DefaultTick)
		}
	case tunnelClientDone, tunnelUpstreamDone:
		t.flushSurvivor()
	case tunnelClientHalf, tunnelUpstreamHalf:
		t.halfCheck()
	}
}

// idleCheck is the idle deadline: the timer is armed once for the whole
// idle_timeout and re-armed for what is left of it, so traffic costs one
// clock read, not a timer operation per read.
func (t *tunnel) idleCheck() {
	if t.state != tunnelOpen && t.state != tunnelClientHalf && t.state != tunnelUpstreamHalf {
		return
	}
	if left := t.set.idle - t.loop.wheel.SinceTick(t.lastActive); left > 0 {
		t.loop.wheel.Arm(&t.idle, left)
		return
	}
	t.abort(endIdleTimeout)
}

// closed is OnClose for end e; err is gnet's (nil: closed locally). The
// first side to go decides the end. A FIN read from it keeps the tunnel
// half open where it can (halfClose); otherwise the survivor is flushed
// and then gets a FIN.
func (e *tunnelEnd) closed(err error) {
	t := e.t
	if e.gone {
		return
	}
	if t.state == tunnelOpen && err != nil {
		// What it sent before its end of stream and the tunnel has not
		// taken yet (read before the tunnel opened, waiting for a wake).
		t.traffic(e)
	}
	e.gone = true
	switch {
	case t.state == tunnelClientHalf || t.state == tunnelUpstreamHalf:
		t.survivorClosed(e, err)
	case t.state != tunnelOpen:
	case err == nil:
		// Closed by gnet itself while open: the engine is stopping (the
		// drain deadline passed), and every connection goes.
		t.abort(endShutdown)
	case errors.Is(err, io.EOF) && t.halfClose(e):
	default:
		if e.side == sideClient {
			t.setState(tunnelClientDone)
			t.end = endClientClosed
		} else {
			t.setState(tunnelUpstreamDone)
			t.end = endUpstreamClosed
		}
		t.idle.Stop()
		t.flushUntil = t.loop.wheel.Now().Add(t.set.linger)
		t.flushSurvivor()
	}
	t.maybeFinish()
}

// maybeFinish finishes the tunnel once both connections are closed and no
// half-closed side is left to write to.
func (t *tunnel) maybeFinish() {
	if t.ends[0].gone && t.ends[1].gone && t.half == nil && t.state != tunnelClosed {
		t.finish()
	}
}

// flushSurvivor ends the connection left once the other side closed, as
// nginx's lingering close does. First gnet writes what was queued for it
// (gnet's own close writes only what the socket takes at once); then it
// gets a FIN (SHUT_WR), the other side's end of stream passed on; then it
// stays open, read and its bytes dropped (they have nowhere to go), until
// it closes its side too. Closing a socket with unread input sends a reset,
// which can destroy data still in flight to it, hence the reading. All of
// it within flushUntil; past it the connection is closed as it is.
func (t *tunnel) flushSurvivor() {
	var e *tunnelEnd
	if t.state == tunnelClientDone {
		e = &t.ends[sideUpstream]
	} else {
		e = &t.ends[sideClient]
	}
	if e.gone {
		return
	}
	if e.paused { // it paused for the side that left; what it sends is read and dropped now
		e.paused = false
		resumeReads(t.epfd, e.gc)
	}
	inTime := t.loop.wheel.Now().Before(t.flushUntil)
	if !t.finSent {
		if e.gc.OutboundBuffered() > 0 && inTime {
			t.account()
			t.loop.wheel.Arm(&t.flow, wheel.DefaultTick)
			return
		}
		t.finSent = true
		if e.tls != nil {
			e.tls.Close(true) // close_notify before the FIN; nothing more is read from it
		}
		_ = unix.Shutdown(e.gc.Fd(), unix.SHUT_WR)
	}
	if inTime {
		t.account()
		t.loop.wheel.Arm(&t.flow, wheel.DefaultTick) // until its own close (closed) or flushUntil
		return
	}
	t.setState(tunnelClosing)
	t.flow.Stop()
	_ = e.gc.Close()
}

// abort ends an open tunnel from the gateway's side: both connections
// close now (gnet writes what their sockets take at once).
func (t *tunnel) abort(why tunnelEndReason) {
	if t.state >= tunnelClosing {
		return
	}
	t.end = why
	t.setState(tunnelClosing)
	t.idle.Stop()
	t.flow.Stop()
	t.closeHalf()
	for i := range t.ends {
		if e := &t.ends[i]; !e.gone {
			_ = e.gc.Close()
		}
	}
	t.maybeFinish() // a half-closed tunnel whose survivor was gone already
}

// finish runs once both connections are closed: the tunnel is counted out,
// logged, and its client connection released.
func (t *tunnel) finish() {
	t.setState(tunnelClosed)
	t.idle.Stop()
	t.flow.Stop()
	t.closeHalf()
	t.account()
	t.stats.open.Add(-1)
	t.stats.closes[t.end].Add(1)
	t.loop.srv.tunnels.open.Add(-1)
	t.log()
	t.cc.release()
}

// account brings the server's buffered-bytes count (max_buffered_bytes)
// up to date with what the tunnel holds: both connections' unread input
// and queued output.
func (t *tunnel) account() {
	held := int64(0)
	if t.half != nil {
		held = int64(len(t.half.pending))
	}
	if t.state != tunnelClosed {
		for i := range t.ends {
			if e := &t.ends[i]; !e.gone {
				held += int64(e.gc.InboundBuffered() + e.gc.OutboundBuffered())
			}
		}
	}
	if d := held - t.accounted; d != 0 {
		t.accounted = held
		t.loop.srv.buffered.Add(d)
	}
}

// log writes the tunnel's one access line: the upgrade request as the
// exchange recorded it, with the tunnel's duration (from the request's
// first byte to the close), bytes each way and how it ended.
func (t *tunnel) log() {
	lg := &t.loop.log
	if t.rec == nil || lg.access == nil {
		return
	}
	rec := lg.access.Reserve()
	if rec == nil {
		return
	}
	*rec = *t.rec
	rec.Duration = loopstat.Now() - rec.Start
	rec.BytesIn += t.ends[sideClient].bytes
	rec.BytesOut += t.ends[sideUpstream].bytes
	rec.End = t.end.String()
	lg.access.Commit()
}
