//go:build linux

package engine

import (
	"net"
	"os"
	"runtime"
	"strconv"
	"testing"

	"github.com/loopgate/loopgate/engine/config"
)

// Pausing a tunnel reads gnet's epoll descriptor out of its eventloop
// (tunnel_pause_linux.go). This fails when a gnet release moves it, so an
// upgrade does not silently leave tunnels without flow control.
func TestTunnelPollerFound(t *testing.T) {
	cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\nupstreams: [{name: b, nodes: [\"127.0.0.1:1\"]}]\nroutes: [{prefix: /, upstream: b}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", ServeForTest(t, srv)) // the loop is claimed by its first connection
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for srv.loops[0].eventLoop() == nil {
		runtime.Gosched()
	}
	fd := loopPoller(srv.loops[0])
	if fd < 0 {
		t.Fatal("gnet's eventloop.poller.fd not found: check tunnel_pause_linux.go against the gnet source")
	}
	if target, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd)); err != nil || target != "anon_inode:[eventpoll]" {
		t.Fatalf("descriptor %d is %q (%v), not an epoll instance", fd, target, err)
	}
}
