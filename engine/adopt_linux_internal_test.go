//go:build linux

package engine

import (
	"net"
	"os"
	"reflect"
	"regexp"
	"runtime"
	"testing"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/panjf2000/gnet/v2"
)

// adopt_linux.go calls two unexported gnet functions by name, with
// signatures read from one gnet release. This fails when go.mod moves to
// another release, so the file is checked against the new source before
// anything runs with it; and it checks that a gnet.EventLoop is the
// *eventloop those functions take.
func TestAdoptMatchesGnet(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`github.com/panjf2000/gnet/v2 (v\S+)`).FindSubmatch(mod)
	if m == nil || string(m[1]) != adoptGnetVersion {
		t.Fatalf("go.mod requires gnet %s; adopt_linux.go was written against %s: check newStreamConn and eventloop.register0 in the new source, then update adoptGnetVersion", m[1], adoptGnetVersion)
	}
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
	var el gnet.EventLoop
	for el == nil { // claimed on the loop, in OnOpen
		runtime.Gosched()
		el = srv.loops[0].eventLoop()
	}
	if got := reflect.TypeOf(el).String(); got != "*gnet.eventloop" {
		t.Fatalf("gnet.EventLoop is %s, want *gnet.eventloop", got)
	}
}
