// tunnel_half: a tunnel with one side half-closed. A client that shuts
// down its sending side (or an upstream that does) has said it sends no
// more, not that it reads no more: its FIN is passed on to the other side
// and that side's bytes keep flowing back until it closes too, as TCP
// allows and nginx's upgraded connections do.
//
// gnet closes a connection when a read returns end of stream, so the
// half-closed side's socket is kept open by a duplicate of its descriptor,
// taken in OnClose before gnet closes its own, and written to directly.
// That descriptor is not on the poller: gnet would find no connection for
// its events. What the socket does not take at once waits in pending,
// retried each wheel tick (as a paused side's queue is polled), and past
// websocket.buffer the survivor stops being read, as in an open tunnel.

package engine

import (
	"github.com/loopgate/loopgate/engine/wheel"
	"golang.org/x/sys/unix"
)

// halfClose keeps the tunnel half open after e's FIN: it reports false
// when it cannot, and the caller closes the tunnel as before. Over TLS on
// either end it cannot: a TLS session's close ends both directions here.
func (t *tunnel) halfClose(e *tunnelEnd) bool {
	s := &t.ends[e.side.peer()]
	if e.tls != nil || s.tls != nil || s.gone {
		return false
	}
	// What gnet queued for e and has not written goes first; gnet would
	// write only what the socket takes now and drop the rest.
	pending, ok := takeOutbound(e.gc, nil)
	if !ok {
		return false
	}
	fd, err := unix.FcntlInt(uintptr(e.gc.Fd()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return false
	}
	t.half, t.halfSide, t.pending = fd, e.side, pending
	if e.side == sideClient {
		t.setState(tunnelClientHalf)
		t.end = endClientClosed
	} else {
		t.setState(tunnelUpstreamHalf)
		t.end = endUpstreamClosed
	}
	t.halfCheck()
	return true
}

// relay is traffic from the survivor s of a half-closed tunnel: its bytes
// join pending and go to the half-closed side's descriptor.
func (t *tunnel) relay(s *tunnelEnd) {
	buf := s.peek()
	if len(buf) == 0 {
		return
	}
	n := len(buf)
	t.pending = append(t.pending, buf...)
	s.discard(n)
	s.bytes += int64(n)
	t.stats.bytes[s.side].Add(uint64(n))
	t.lastActive = t.loop.wheel.Ticks()
	if !t.writeHalf() {
		return
	}
	if len(t.pending) > t.set.buffer {
		if len(t.pending) > overflowAt(t.set.buffer) {
			t.abort(endOverflow)
			return
		}
		t.pause(s)
	}
	t.account()
}

// writeHalf writes pending to the half-closed side as far as its socket
// takes it. A failed write (the peer is gone altogether) ends the tunnel;
// it then reports false.
func (t *tunnel) writeHalf() bool {
	for len(t.pending) > 0 {
		n, errno := sendNow(t.half, t.pending)
		switch errno {
		case 0:
			t.pending = t.pending[:copy(t.pending, t.pending[n:])]
		case unix.EINTR:
		case unix.EAGAIN:
			return true
		default:
			t.pending = nil
			t.abort(t.end)
			return false
		}
	}
	return true
}

// halfCheck runs when the tunnel half-closes and each tick after while it
// has work: the survivor's FIN once its queue (what the half-closed side
// sent before its own) is written, pending retried, the survivor's reads
// resumed once pending drained to half the buffer, and the half-closed
// side closed once the survivor closed and pending is flushed.
func (t *tunnel) halfCheck() {
	s := &t.ends[t.halfSide.peer()]
	if !s.gone {
		if !t.finSent && s.gc.OutboundBuffered() == 0 {
			t.finSent = true
			_ = unix.Shutdown(s.gc.Fd(), unix.SHUT_WR)
		}
		t.relay(s) // input it holds: bytes read while paused
	}
	if t.state >= tunnelClosing || !t.writeHalf() {
		return
	}
	if s.paused && len(t.pending) <= t.set.buffer/2 {
		s.paused = false
		resumeReads(t.epfd, s.gc)
	}
	if s.gone && (len(t.pending) == 0 || !t.loop.wheel.Now().Before(t.flushUntil)) {
		t.closeHalf()
		t.maybeFinish()
		return
	}
	t.account()
	if !t.finSent || s.paused || len(t.pending) > 0 {
		t.loop.wheel.Arm(&t.flow, wheel.DefaultTick)
	}
}

// survivorClosed is OnClose for the survivor of a half-closed tunnel: the
// half-closed side gets what is pending (within timeouts.drain) and then
// its FIN, by the close of the last descriptor. A close by gnet itself
// (the engine stopping) ends it now.
func (t *tunnel) survivorClosed(err error) {
	if err == nil {
		t.abort(endShutdown)
		return
	}
	t.idle.Stop()
	t.flushUntil = t.loop.wheel.Now().Add(t.set.linger)
	t.halfCheck()
}

// closeHalf closes the half-closed side's descriptor: the socket's last,
// so the kernel sends its FIN after whatever it still holds.
func (t *tunnel) closeHalf() {
	if t.half >= 0 {
		_ = unix.Close(t.half)
		t.half = -1
	}
	t.pending = nil
}
