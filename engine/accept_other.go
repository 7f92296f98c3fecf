//go:build !linux

// Elsewhere gnet's own acceptor accepts, and an accept error still ends
// its loop (accept_linux.go says why Linux differs).

package engine

import "github.com/panjf2000/gnet/v2"

// acceptor exists only where the loop accepts itself.
type acceptor struct{ l *loop }

func (*acceptor) ready(gnet.Conn) {}
func (*acceptor) closed()         {}

// installAcceptors has nothing to move: the loops are ready at once.
func (s *Server) installAcceptors() {
	s.installing.Store(1)
	s.installed(nil)
}
