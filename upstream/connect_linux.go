//go:build linux

// The socket calls of a dial on the loop. Raw syscalls: on a
// non-blocking socket none of them blocks, and a plain syscall that the
// loopback handshake keeps inside connect(2) for tens of microseconds
// lets the Go scheduler hand the loop's P to another thread meanwhile,
// which the loop then has to win back (futex wake-ups, measured in issue
// 11's close-every-connection run).

package upstream

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// socketConnect opens a non-blocking TCP socket, without TCP_NODELAY (see
// Conn.writeMore), and starts its connect to sa: the socket and nil or
// EINPROGRESS, or -1 and why it failed.
func socketConnect(sa unix.Sockaddr) (int, error) {
	var raw rawSockaddr
	family, ptr, size := raw.set(sa)
	r, _, errno := unix.RawSyscall(unix.SYS_SOCKET, family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if errno != 0 {
		return -1, os.NewSyscallError("socket", errno)
	}
	fd := int(r)
	switch _, _, errno := unix.RawSyscall(unix.SYS_CONNECT, r, uintptr(ptr), size); errno {
	case 0:
		return fd, nil
	case unix.EINPROGRESS, unix.EINTR:
		return fd, unix.EINPROGRESS
	default:
		_ = unix.Close(fd)
		return -1, os.NewSyscallError("connect", errno)
	}
}

// connectAgain asks how the non-blocking connect on fd to sa stands by
// calling connect(2) once more, as BSD code has long done: nil when the
// connection is established (0 or EISCONN), EINPROGRESS while the
// handshake is under way (EALREADY), else why it failed (the socket's
// error, ECONNREFUSED say). Far cheaper than getsockopt(TCP_INFO), which
// fills a 200-byte report; measured in issue 11's close-every-connection
// run. Safe from any goroutine: sa is only read.
func connectAgain(fd int, sa unix.Sockaddr) error {
	var raw rawSockaddr
	_, ptr, size := raw.set(sa)
	switch _, _, errno := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(ptr), size); errno {
	case 0, unix.EISCONN:
		return nil
	case unix.EALREADY, unix.EINPROGRESS, unix.EINTR:
		return unix.EINPROGRESS
	default:
		return os.NewSyscallError("connect", errno)
	}
}

// rawSockaddr is a socket address as connect(2) takes it, built on the
// caller's stack.
type rawSockaddr struct {
	v4 unix.RawSockaddrInet4
	v6 unix.RawSockaddrInet6
}

// set fills r from sa and returns the socket family, the address to pass
// and its size.
func (r *rawSockaddr) set(sa unix.Sockaddr) (family uintptr, ptr unsafe.Pointer, size uintptr) {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		r.v4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Addr}
		putPort(&r.v4.Port, a.Port)
		return unix.AF_INET, unsafe.Pointer(&r.v4), unsafe.Sizeof(r.v4)
	case *unix.SockaddrInet6:
		r.v6 = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.Addr, Scope_id: a.ZoneId}
		putPort(&r.v6.Port, a.Port)
		return unix.AF_INET6, unsafe.Pointer(&r.v6), unsafe.Sizeof(r.v6)
	}
	return unix.AF_INET, nil, 0
}

// putPort stores port in network byte order.
func putPort(dst *uint16, port int) {
	p := (*[2]byte)(unsafe.Pointer(dst))
	p[0], p[1] = byte(port>>8), byte(port)
}

// resetOnClose makes the coming close of fd abortive (SO_LINGER 0): a
// reset rather than a FIN. Only for a connection whose upstream has closed
// its side already, as HAProxy does once the server has shut its side:
// nothing is lost, since the upstream sent everything and reads nothing
// more, and the node is spared the TIME_WAIT socket a FIN would leave it,
// one per connection, for a minute. With a backend that closes every
// connection that is some 14,000 sockets at 13,000 dials a second, and
// 5 % of the gateway's CPU per request (issue 11's close-every-connection
// run). A raw setsockopt, as peerClosed's recv: it never blocks, and
// gnet's SetLinger would add the scheduler's syscall bookkeeping (about
// 150 instructions) to every such connection.
func resetOnClose(fd int) {
	l := unix.Linger{Onoff: 1, Linger: 0}
	_, _, _ = unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER,
		uintptr(unsafe.Pointer(&l)), unsafe.Sizeof(l), 0)
}

// peerClosed reports whether the peer of the connected TCP socket fd has
// closed its side: a read would find end-of-file now. One recv(2) that
// peeks and never waits.
func peerClosed(fd int) bool {
	var b [1]byte
	n, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	return errno == 0 && n == 0
}
