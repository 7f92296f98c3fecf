//go:build linux

// Pausing a tunnel's reads, and taking the output gnet queued for a
// connection that half-closed (takeOutbound), neither of which gnet v2.9.7
// has a call for. Pausing takes the descriptor off the loop's epoll read
// interest.
//
// gnet polls level-triggered and finds a connection by the descriptor in
// the event, so changing the interest set with epoll_ctl(EPOLL_CTL_MOD)
// is invisible to it but for its effect: no readable event, so no read,
// so the socket's receive buffer fills and TCP's window stops the sender.
// Write interest stays while gnet has output queued, or it would never
// flush. gnet itself resets the interest to "readable" when it finishes
// flushing that connection (ModRead) or when a write is cut short
// (ModReadWrite); the tunnel then gets one read (at most gnet's read
// buffer) and pauses again (tunnel.traffic).
//
// The epoll descriptor is gnet's eventloop.poller.fd, read by reflection
// (reading unexported fields is allowed; nothing is written there), so a gnet
// whose layout differs makes loopPoller return -1 and tunnels run without
// pausing, bounded by overflowAt instead; TestTunnelPollerFound fails
// then, so an upgrade is noticed.

package engine

import (
	"reflect"
	"unsafe"

	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/buffer/elastic"
	"golang.org/x/sys/unix"
)

// loopPoller returns the epoll descriptor of l's gnet loop, or -1.
func loopPoller(l *loop) int {
	el := l.eventLoop()
	if el == nil {
		return -1
	}
	v := reflect.ValueOf(el)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return -1
	}
	p := v.Elem().FieldByName("poller")
	if p.Kind() != reflect.Pointer || p.IsNil() || p.Elem().Kind() != reflect.Struct {
		return -1
	}
	fd := p.Elem().FieldByName("fd")
	if fd.Kind() != reflect.Int {
		return -1
	}
	return int(fd.Int())
}

// gnetReadEvents is gnet's netpoll.ReadEvents.
const gnetReadEvents = unix.EPOLLIN | unix.EPOLLPRI

// takeOutbound appends to dst what gnet queued for gc and has not written,
// and empties that queue: gnet's close writes only what the socket takes at
// once and drops the rest, so a side kept half open (tunnel_half.go) takes
// it first. It reports false when gnet's conn.outboundBuffer is not where
// this gnet is expected to keep it (TestTunnelHalfCloseQueued fails then), and leaves
// the queue alone then.
func takeOutbound(gc gnet.Conn, dst []byte) ([]byte, bool) {
	if gc.OutboundBuffered() == 0 {
		return dst, true
	}
	v := reflect.ValueOf(gc)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return dst, false
	}
	f := v.Elem().FieldByName("outboundBuffer")
	if !f.IsValid() || f.Type() != reflect.TypeFor[elastic.Buffer]() || !f.CanAddr() {
		return dst, false
	}
	// Written through, unlike poller.fd: the queue is gnet's, but the
	// connection is in OnClose, its last callback, on this loop.
	b := (*elastic.Buffer)(unsafe.Pointer(f.UnsafeAddr()))
	bufs, _ := b.Peek(-1)
	n := len(dst)
	for _, p := range bufs {
		dst = append(dst, p...)
	}
	_, _ = b.Discard(len(dst) - n)
	return dst, true
}

// pauseReads takes gc off the poller's read interest; it reports whether
// it could.
func pauseReads(epfd int, gc gnet.Conn) bool {
	if epfd < 0 {
		return false
	}
	return modInterest(epfd, gc, 0) == nil
}

// resumeReads puts gc back on the poller's read interest.
func resumeReads(epfd int, gc gnet.Conn) {
	if epfd >= 0 {
		_ = modInterest(epfd, gc, gnetReadEvents)
	}
}

func modInterest(epfd int, gc gnet.Conn, events uint32) error {
	if gc.OutboundBuffered() > 0 {
		events |= unix.EPOLLOUT
	}
	fd := gc.Fd()
	return unix.EpollCtl(epfd, unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Fd: int32(fd), Events: events})
}
