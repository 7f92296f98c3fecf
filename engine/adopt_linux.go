//go:build linux

// Adopting an upstream socket the loop connected itself: straight onto
// the loop's poller, as gnet's own acceptor does with an accepted socket.
//
// gnet v2.9.7 has no public call for this. EventLoop.Enroll and Register
// hand every socket to gnet's worker pool, which dups it, posts it back to
// the loop through the task queue and waits for OnOpen: a goroutine, two
// thread hops and three extra syscalls per connection, which made a
// backend that closes every connection cost 1.6× nginx's CPU per request
// (docs/architecture.md, "Dialing upstreams"). So this file reaches the
// two unexported functions gnet's acceptor uses, newStreamConn and
// eventloop.register0, through go:linkname, and calls them on the loop
// that owns the socket, which is the only place gnet itself calls them.
//
// go:linkname to another module's unexported functions is tied to that
// module's exact source: TestAdoptMatchesGnet pins the gnet version these
// signatures were read from, so an upgrade fails the tests until this file
// is checked against the new source.

package engine

import (
	"net"
	"unsafe"

	"github.com/loopgate/loopgate/upstream"
	"golang.org/x/sys/unix"
)

// adoptGnetVersion is the gnet release the linknamed signatures below
// were read from.
const adoptGnetVersion = "v2.9.7"

//go:linkname gnetNewStreamConn github.com/panjf2000/gnet/v2.newStreamConn
func gnetNewStreamConn(proto string, fd int, el unsafe.Pointer, sa unix.Sockaddr, localAddr, remoteAddr net.Addr) unsafe.Pointer

//go:linkname gnetRegister github.com/panjf2000/gnet/v2.(*eventloop).register0
func gnetRegister(el, c unsafe.Pointer) error

// Adopt puts fd, a TCP socket this loop connected, on the loop's poller.
// gnet runs OnOpen before it returns; OnOpen finds uc in l.adopting. On
// an error gnet has closed fd. On the loop only (upstream.Host).
func (l *loop) Adopt(fd int, sa unix.Sockaddr, remote net.Addr, uc *upstream.Conn) error {
	return l.register(fd, sa, remote, uc)
}

// register puts fd on the loop's poller as a gnet connection whose
// context is owner.
func (l *loop) register(fd int, sa unix.Sockaddr, remote net.Addr, owner any) error {
	el := l.gnetLoop()
	l.adopting = owner
	err := gnetRegister(el, gnetNewStreamConn("tcp", fd, el, sa, nil, remote))
	l.adopting = nil
	return err
}

// gnetLoop is the *eventloop inside the loop's gnet.EventLoop interface.
func (l *loop) gnetLoop() unsafe.Pointer {
	el := l.eventLoop()
	return (*[2]unsafe.Pointer)(unsafe.Pointer(&el))[1]
}
