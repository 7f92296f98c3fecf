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

// socketConnect opens a non-blocking TCP socket with TCP_NODELAY and
// starts its connect to sa: the socket and nil or EINPROGRESS, or -1 and
// why it failed.
func socketConnect(sa unix.Sockaddr) (int, error) {
	var (
		family = uintptr(unix.AF_INET)
		v4     unix.RawSockaddrInet4
		v6     unix.RawSockaddrInet6
		ptr    unsafe.Pointer
		size   uintptr
	)
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		v4 = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: a.Addr}
		putPort(&v4.Port, a.Port)
		ptr, size = unsafe.Pointer(&v4), unsafe.Sizeof(v4)
	case *unix.SockaddrInet6:
		family = unix.AF_INET6
		v6 = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: a.Addr, Scope_id: a.ZoneId}
		putPort(&v6.Port, a.Port)
		ptr, size = unsafe.Pointer(&v6), unsafe.Sizeof(v6)
	}
	r, _, errno := unix.RawSyscall(unix.SYS_SOCKET, family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if errno != 0 {
		return -1, os.NewSyscallError("socket", errno)
	}
	fd := int(r)
	one := int32(1)
	if _, _, errno := unix.RawSyscall6(unix.SYS_SETSOCKOPT, r, unix.IPPROTO_TCP, unix.TCP_NODELAY, uintptr(unsafe.Pointer(&one)), 4, 0); errno != 0 {
		_ = unix.Close(fd)
		return -1, os.NewSyscallError("setsockopt", errno)
	}
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

// putPort stores port in network byte order.
func putPort(dst *uint16, port int) {
	p := (*[2]byte)(unsafe.Pointer(dst))
	p[0], p[1] = byte(port>>8), byte(port)
}

// established reports whether the TCP socket fd is connected: one
// getsockopt(TCP_INFO).
func established(fd int) bool {
	var info unix.TCPInfo
	size := uint32(unsafe.Sizeof(info))
	_, _, errno := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_INFO,
		uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&size)), 0)
	return errno == 0 && info.State == unix.BPF_TCP_ESTABLISHED
}
