//go:build linux

// Sending and receiving on a tunnel's socket without the scheduler's
// syscall bookkeeping.

package engine

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// sendNow sends p on the non-blocking socket fd as a raw syscall: one that
// returns at once needs none of the scheduler's entersyscall/exitsyscall
// around it (about 300 instructions a call, two calls a message). sendto
// rather than write, as nginx does: no file-layer work in the kernel, and
// MSG_NOSIGNAL makes a reset peer an EPIPE without a SIGPIPE.
func sendNow(fd int, p []byte) (int, unix.Errno) {
	n, _, errno := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)),
		unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT, 0, 0)
	return int(n), errno
}

// recvNow reads into p from the non-blocking socket fd, as sendNow sends.
func recvNow(fd int, p []byte) (int, unix.Errno) {
	n, _, errno := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(p))), uintptr(len(p)),
		unix.MSG_DONTWAIT, 0, 0)
	return int(n), errno
}
