//go:build !linux

// Sending and receiving on a tunnel's socket: plain writes and reads,
// where MSG_NOSIGNAL and the raw calls of tunnel_send_linux.go are not to
// be had.

package engine

import (
	"errors"

	"golang.org/x/sys/unix"
)

// sendNow writes p to the non-blocking socket fd.
func sendNow(fd int, p []byte) (int, unix.Errno) {
	n, err := unix.Write(fd, p)
	var errno unix.Errno
	if err != nil && !errors.As(err, &errno) {
		errno = unix.EIO
	}
	return max(n, 0), errno
}

// recvNow reads into p from the non-blocking socket fd.
func recvNow(fd int, p []byte) (int, unix.Errno) {
	n, err := unix.Read(fd, p)
	var errno unix.Errno
	if err != nil && !errors.As(err, &errno) {
		errno = unix.EIO
	}
	return max(n, 0), errno
}
