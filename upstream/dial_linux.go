// Dial (Linux): a node address ready for connect(2), and the non-blocking
// connect the loop makes.

//go:build linux

package upstream

import (
	"errors"
	"net/netip"

	"golang.org/x/sys/unix"
)

// dialTarget is a node's address as connect(2) takes it. It is empty for
// an address that needs the resolver (a host name) or a zone.
type dialTarget struct {
	sa     unix.Sockaddr
	family int
}

// newDialTarget parses addr ("ip:port") once, when the pool is made.
func newDialTarget(addr string) dialTarget {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || ap.Addr().Zone() != "" {
		return dialTarget{}
	}
	ip := ap.Addr().Unmap()
	if ip.Is4() {
		return dialTarget{sa: &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ip.As4()}, family: unix.AF_INET}
	}
	return dialTarget{sa: &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ip.As16()}, family: unix.AF_INET6}
}

func (t dialTarget) ok() bool { return t.sa != nil }

// connect opens a non-blocking TCP socket and starts connecting it; no
// call here blocks. connected reports whether the connect has already
// completed: to a nearby node the kernel finishes the handshake before
// connect(2) returns. Otherwise fd is still connecting (see connectDone).
// A refused connect to a nearby node is an error here.
func (t dialTarget) connect() (fd int, connected bool, err error) {
	fd, err = unix.Socket(t.family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, false, err
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err = unix.Connect(fd, t.sa); err != nil && err != unix.EINPROGRESS {
		_ = unix.Close(fd)
		return -1, false, err
	}
	switch err = connectDone(fd); err {
	case nil:
		return fd, true, nil
	case errConnectPending:
		return fd, false, nil
	}
	_ = unix.Close(fd)
	return -1, false, err
}

// errConnectPending: the connect on the socket has not finished yet.
var errConnectPending = errors.New("upstream: connect in progress")

// connectDone reports how the connect on fd stands: nil once connected,
// errConnectPending while the handshake is still on, or why it failed.
func connectDone(fd int) error {
	soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		return err
	}
	if soErr != 0 {
		return unix.Errno(soErr)
	}
	if _, err := unix.Getpeername(fd); err != nil {
		return errConnectPending // ENOTCONN: still in SYN_SENT
	}
	return nil
}
