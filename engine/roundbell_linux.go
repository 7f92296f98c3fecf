//go:build linux

// The round bell: an eventfd on the loop's own poller, so that work the
// loop posts to itself comes back in the next round of events at the
// place it was posted, rather than after the whole round as an
// EventLoop.Execute task does (gnet runs those only once every event of
// the round has been handled).
//
// The upstream side rings it for the sockets it connected
// (upstream.Loop.adoptSoon): a socket connected early in a round then
// waits for the events readied before it, as nginx's writable event
// would, instead of for every event of the next round.

package engine

import (
	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// roundBell is a loop's bell: the eventfd, and whether it is rung.
type roundBell struct {
	l    *loop
	fd   int
	rung bool
}

// one is the 8-byte counter increment an eventfd write takes.
var one = [8]byte{1}

// RingRoundBell makes upstream.Loop.RoundBell run after the events ready
// now. The bell is made at the first ring; false when it cannot be.
func (l *loop) RingRoundBell() bool {
	b := l.bell
	if b == nil {
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			return false
		}
		b = &roundBell{l: l, fd: fd}
		if l.register(fd, nil, nil, b) != nil {
			return false // gnet has closed fd
		}
		l.bell = b
	}
	if !b.rung {
		if _, err := unix.Write(b.fd, one[:]); err != nil {
			return false
		}
		b.rung = true
	}
	return true
}

// ring is the bell's OnTraffic: gnet has read the counter, which resets
// it. A dial made while the bell's work runs rings it again.
func (b *roundBell) ring(c gnet.Conn) {
	_, _ = c.Discard(-1)
	b.rung = false
	b.l.enter()
	b.l.up.RoundBell()
	b.l.leave()
}
