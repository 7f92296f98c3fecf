//go:build linux

// Send and Recv as raw syscalls, without the scheduler's bookkeeping.

package sockio

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Send sends p on the non-blocking socket fd as a raw syscall: one that
// returns at once needs none of the scheduler's entersyscall/exitsyscall
// around it. sendto rather than write, as nginx does: no file-layer work
// in the kernel, and MSG_NOSIGNAL makes a reset peer an EPIPE without a
// SIGPIPE.
func Send(fd int, p []byte) (int, unix.Errno) {
	n, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)),
		unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT, 0, 0)
	return int(n), errno
}

// Recv reads into p from the non-blocking socket fd, as Send sends.
func Recv(fd int, p []byte) (int, unix.Errno) {
	n, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)),
		unix.MSG_DONTWAIT, 0, 0)
	return int(n), errno
}
