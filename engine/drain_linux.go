//go:build linux

// Finding and replacing the listening sockets of one address (see
// closeListeners).

package engine

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// replaceListeners replaces every listening TCP socket of this process
// bound to want (listenKey) with a placeholder, and returns how many it
// replaced.
func replaceListeners(want string) (int, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || !listeningOn(fd, want) {
			continue
		}
		ph, err := placeholder()
		if err != nil {
			return n, err
		}
		err = unix.Dup3(ph, fd, unix.O_CLOEXEC)
		_ = unix.Close(ph)
		if err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// listeningOn reports whether fd is a listening TCP socket bound to want.
// A descriptor that is anything else (or went away) is not.
func listeningOn(fd int, want string) bool {
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ACCEPTCONN); err != nil || v != 1 {
		return false
	}
	if v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || v != unix.SOCK_STREAM {
		return false
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return false
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return listenKey(a.Addr[:], a.Port) == want
	case *unix.SockaddrInet6:
		return listenKey(a.Addr[:], a.Port) == want
	}
	return false
}

// placeholder is a non-blocking listening socket nobody can reach by
// accident: a Unix socket bound to an abstract name the kernel picks.
func placeholder() (int, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	// An empty address asks for autobind: a unique abstract name.
	if err = unix.Bind(fd, &unix.SockaddrUnix{}); err == nil {
		err = unix.Listen(fd, 1)
	}
	if err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}
