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
	"slices"

	"github.com/loopgate/loopgate/engine/wheel"
	"github.com/loopgate/loopgate/pool/sockio"
	"golang.org/x/sys/unix"
)

// halfOpen is the side of a tunnel that half-closed: gnet closed its
// connection at the FIN, so the tunnel writes to a duplicate of its
// descriptor, and pending is what waits for it.
type halfOpen struct {
	fd      int
	side    tunnelSide
	pending []byte
	// src is a duplicate of the survivor's descriptor once it closed
	// (survivorClosed), read for what its socket still held; -1 before
	// and after.
	src int
	// t and the links put it on its loop's list (loop.halves): once both
	// gnet connections are gone only the wheel's ticks reach the tunnel,
	// and they stop with the engine, so its stop closes what is left
	// (closeHalves).
	t          *tunnel
	prev, next *halfOpen
}

// halfClose keeps the tunnel half open after e's FIN: it reports false
// when it cannot, and the caller closes the tunnel as before. Over TLS on
// either end it cannot: a TLS session's close ends both directions here.
func (t *tunnel) halfClose(e *tunnelEnd) bool {
	s := &t.ends[e.side.peer()]
	if e.tls != nil || s.tls != nil || s.gone {
		return false
	}
	// The duplicate first: if it fails (EMFILE), gnet's own close still
	// writes what e's queue holds.
	fd, err := unix.FcntlInt(uintptr(e.gc.Fd()), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return false
	}
	// What gnet queued for e and has not written goes first; gnet would
	// write only what the socket takes now and drop the rest.
	pending, ok := takeOutbound(e.gc, nil)
	if !ok {
		_ = unix.Close(fd)
		return false
	}
	t.half = &halfOpen{fd: fd, side: e.side, pending: pending, src: -1, t: t}
	t.loop.linkHalf(t.half)
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
	h := t.half
	h.pending = append(h.pending, buf...)
	s.discard(n)
	s.bytes += int64(n)
	t.stats.addBytes(s.side, n)
	t.lastActive = t.loop.wheel.Ticks()
	if !t.writeHalf() {
		return
	}
	if len(h.pending) > 0 {
		// The socket took part: the rest is retried each tick (halfCheck),
		// whether or not the survivor sends more.
		t.loop.wheel.Arm(&t.flow, wheel.DefaultTick)
	}
	if len(h.pending) > t.set.buffer {
		if len(h.pending) > overflowAt(t.set.buffer) {
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
	h := t.half
	for len(h.pending) > 0 {
		n, errno := sockio.Send(h.fd, h.pending)
		switch errno {
		case 0:
			h.pending = h.pending[:copy(h.pending, h.pending[n:])]
		case unix.EINTR:
		case unix.EAGAIN:
			return true
		default:
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
	h := t.half
	s := &t.ends[h.side.peer()]
	if !s.gone {
		if !t.finSent && s.gc.OutboundBuffered() == 0 {
			t.finSent = true
			_ = unix.Shutdown(s.gc.Fd(), unix.SHUT_WR)
		}
		t.relay(s) // input it holds: bytes read while paused
	}
	if s.gone {
		s.paused = false // its descriptor number is gnet's to reuse: never touch it again
		t.readSource()
	}
	if t.state >= tunnelClosing || !t.writeHalf() {
		return
	}
	if s.paused && len(h.pending) <= t.set.buffer/2 {
		s.paused = false
		resumeReads(t.epfd, s.gc)
	}
	if s.gone && ((h.src < 0 && len(h.pending) == 0) || !t.loop.wheel.Now().Before(t.flushUntil)) {
		t.closeHalf()
		t.maybeFinish()
		return
	}
	t.account()
	if !t.finSent || s.paused || len(h.pending) > 0 || h.src >= 0 {
		t.loop.wheel.Arm(&t.flow, wheel.DefaultTick)
	}
}

// survivorClosed is OnClose for the survivor s of a half-closed tunnel:
// the half-closed side gets what is pending and what s's socket still
// holds (within timeouts.drain), then its FIN, by the close of the last
// descriptor. gnet closes a paused connection at a hang-up without reading
// it: with the tunnel's FIN sent and s's arrived, both directions are shut
// and epoll reports EPOLLHUP, which gnet takes for the end, whatever the
// socket still holds. So s's descriptor is duplicated too and read, as
// pending drains (readSource). A close by gnet itself (the engine
// stopping) ends the tunnel now.
func (t *tunnel) survivorClosed(s *tunnelEnd, err error) {
	if err == nil {
		t.abort(endShutdown)
		return
	}
	t.relay(s) // what gnet holds of it
	if t.state >= tunnelClosing {
		return
	}
	if fd, err := unix.FcntlInt(uintptr(s.gc.Fd()), unix.F_DUPFD_CLOEXEC, 0); err == nil {
		t.half.src = fd
	}
	t.idle.Stop()
	t.flushUntil = t.loop.wheel.Now().Add(t.set.linger)
	t.halfCheck()
}

// readSource reads the closed survivor's socket while pending has room
// below the buffer, until its end of stream; then, or on an error, its
// duplicate is closed.
func (t *tunnel) readSource() {
	h := t.half
	s := &t.ends[h.side.peer()]
	for h.src >= 0 && len(h.pending) < t.set.buffer {
		room := min(t.set.buffer-len(h.pending), readBufferCap)
		h.pending = slices.Grow(h.pending, room)
		n, errno := sockio.Recv(h.src, h.pending[len(h.pending):len(h.pending)+room])
		switch {
		case errno == unix.EAGAIN || errno == unix.EINTR:
			return
		case errno != 0 || n == 0:
			_ = unix.Close(h.src)
			h.src = -1
			return
		}
		h.pending = h.pending[:len(h.pending)+n]
		s.bytes += int64(n)
		t.stats.addBytes(s.side, n)
	}
}

// closeHalf closes the half-closed side's descriptor: the socket's last,
// so the kernel sends its FIN after whatever it still holds.
func (t *tunnel) closeHalf() {
	if h := t.half; h != nil {
		_ = unix.Close(h.fd)
		if h.src >= 0 {
			_ = unix.Close(h.src)
		}
		t.loop.unlinkHalf(h)
		t.half = nil
	}
}

func (l *loop) linkHalf(h *halfOpen) {
	h.next = l.halves
	if h.next != nil {
		h.next.prev = h
	}
	l.halves = h
}

func (l *loop) unlinkHalf(h *halfOpen) {
	if h.prev != nil {
		h.prev.next = h.next
	} else {
		l.halves = h.next
	}
	if h.next != nil {
		h.next.prev = h.prev
	}
	h.prev, h.next = nil, nil
}

// closeHalves ends the half-closed tunnels the loop still holds when the
// engine has stopped: gnet closed every connection, and a tunnel whose
// survivor had closed already was waiting only for ticks that no longer
// come to flush to its half-closed side. Their descriptors are closed and
// they finish as cut by the shutdown. Called after the loop's goroutine
// has returned (Server.Run), so nothing else touches the loop.
func (l *loop) closeHalves() {
	l.enter()
	for h := l.halves; h != nil; h = l.halves {
		t := h.t
		t.abort(endShutdown)
		t.closeHalf() // abort did, but for a tunnel already closing: never loop on it
	}
	l.leave()
}
