// Drain: closing the listeners first, so new clients are refused cleanly
// while in-flight requests finish.

package engine

import (
	"log"
	"strconv"
	"syscall"

	"github.com/panjf2000/gnet/v2"
)

// closeListeners makes the kernel refuse new connections (connection
// refused) from the start of a drain, as Envoy does, instead of accepting
// them only for OnOpen to close them. Shutdown calls it first.
//
// gnet closes its listeners only when the engine stops, after the drain,
// and does not expose them: with SO_REUSEPORT each loop has its own
// listening socket (loop 0 the engine's, the others their own), and
// Engine.Dup reaches only loop 0's. So the listening sockets are found by
// their address among the process's descriptors (Linux), and each is
// replaced in place with dup3 by a placeholder socket that listens on an
// address nobody uses:
//
//   - the real socket's last descriptor goes, so the kernel closes it: it
//     leaves the SO_REUSEPORT group and every epoll set at once, and a SYN
//     for the port finds no listener and gets a reset;
//   - the descriptor number stays valid, for gnet's close at Stop;
//   - a loop that already took a readiness event for the old socket calls
//     accept on the placeholder, which is non-blocking and empty: EAGAIN,
//     which gnet ignores. (shutdown(2) with SHUT_RD would stop the
//     listening too, but the socket would then poll readable forever and
//     accept would fail with EINVAL, which ends a gnet loop.)
//
// Connections the kernel had completed but no loop had accepted yet are
// reset with the old socket. On other systems nothing changes: the
// listeners close at Stop and OnOpen closes what they accept meanwhile.
func (s *Server) closeListeners() {
	eng := s.eng.Load()
	if eng == nil {
		return
	}
	for _, addr := range s.edge.addrs {
		s.closeListener(eng, addr)
	}
}

// closeListener replaces the listening sockets of one address.
func (s *Server) closeListener(eng *gnet.Engine, listen string) {
	fd, err := eng.DupListener("tcp", listen)
	if err != nil {
		log.Printf("engine: drain: cannot find the listener %s: %v", listen, err)
		return
	}
	sa, err := syscall.Getsockname(fd)
	_ = syscall.Close(fd)
	var addr string
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		addr = listenKey(a.Addr[:], a.Port)
	case *syscall.SockaddrInet6:
		addr = listenKey(a.Addr[:], a.Port)
	default:
		log.Printf("engine: drain: cannot find the listener: address %T, %v", sa, err)
		return
	}
	if n, err := replaceListeners(addr); err != nil {
		log.Printf("engine: drain: closed %d listeners, then: %v; new connections are closed at accept", n, err)
	}
}

// listenKey names a listening address: its IP bytes (4 or 16) and port.
func listenKey(ip []byte, port int) string { return string(ip) + "/" + strconv.Itoa(port) }
