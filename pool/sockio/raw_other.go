//go:build !linux

// Send and Recv as plain writes and reads, where MSG_NOSIGNAL and the raw
// calls of raw_linux.go are not to be had.

package sockio

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Send writes p to the non-blocking socket fd.
func Send(fd int, p []byte) (int, unix.Errno) {
	n, err := unix.Write(fd, p)
	var errno unix.Errno
	if err != nil && !errors.As(err, &errno) {
		errno = unix.EIO
	}
	return max(n, 0), errno
}

// Recv reads into p from the non-blocking socket fd.
func Recv(fd int, p []byte) (int, unix.Errno) {
	n, err := unix.Read(fd, p)
	var errno unix.Errno
	if err != nil && !errors.As(err, &errno) {
		errno = unix.EIO
	}
	return max(n, 0), errno
}
