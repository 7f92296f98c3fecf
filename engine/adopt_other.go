//go:build !linux

// Elsewhere the loop does not adopt sockets: upstream.DialOnLoop is false,
// so every dial goes through EventLoop.Enroll.

package engine

import (
	"errors"
	"net"

	"github.com/loopgate/loopgate/upstream"
	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Adopt is never called where upstream dials off the loop.
func (l *loop) Adopt(int, unix.Sockaddr, net.Addr, *upstream.Conn) error {
	return errors.ErrUnsupported
}

// roundBell exists only where the loop adopts sockets (roundbell_linux.go).
type roundBell struct{}

func (*roundBell) ring(gnet.Conn) {}

// RingRoundBell is never called where upstream dials off the loop.
func (l *loop) RingRoundBell() bool { return false }
