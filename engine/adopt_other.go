//go:build !linux

// Elsewhere the loop does not adopt sockets: upstream.DialOnLoop is false,
// so every dial goes through EventLoop.Enroll.

package engine

import (
	"errors"
	"net"

	"github.com/loopgate/loopgate/upstream"
	"golang.org/x/sys/unix"
)

// Adopt is never called where upstream dials off the loop.
func (l *loop) Adopt(int, unix.Sockaddr, net.Addr, *upstream.Conn) error {
	return errors.ErrUnsupported
}
