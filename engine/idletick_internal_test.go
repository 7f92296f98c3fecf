package engine

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/pool/loopstat"
)

// A loop without clients stops ticking (slow); a client brings the wheel's
// tick back as it is accepted (before any of its timers is armed).
func TestIdleLoopTicksCoarsely(t *testing.T) {
	up := listen(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\nupstreams:\n  - {name: b, nodes: [\"%s\"]}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n", up)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := ServeForTest(t, srv)
	l := srv.loops[0]
	waitTrue := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// A loop starts (and its ticker) with its first connection.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The connection is accepted once the gateway counts it; from then on,
	// while it is open, the loop ticks every wheel tick.
	waitTrue("the client to be accepted", func() bool { return srv.Clients() == 1 })
	if l.slow.Load() {
		t.Fatal("the loop still ticks coarsely with a client connected")
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(buf); err != nil || n < 12 || string(buf[9:12]) != "200" {
		t.Fatalf("response %q, %v", buf[:n], err)
	}
	if l.slow.Load() {
		t.Fatal("the loop went coarse while a client was connected")
	}
	c.Close()
	waitTrue("the loop to tick coarsely once the client left", l.slow.Load)

	// The next client brings the fine tick back.
	c2, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	waitTrue("the second client to be accepted", func() bool { return srv.Clients() == 1 })
	if l.slow.Load() {
		t.Fatal("the loop still ticks coarsely with a client connected")
	}
}

// An idle loop sleeps until its earliest timer: with none armed (the only
// client left without a request), until woken; with an idle upstream
// connection in the pool, until that connection's idle timeout, not a
// tick sooner. A new client wakes it.
func TestIdleLoopSleepsUntilItsNextTimer(t *testing.T) {
	up := listen(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\nupstreams:\n  - {name: b, nodes: [\"%s\"], idle_timeout: 1h}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n", up)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := ServeForTest(t, srv)
	l := srv.loops[0]
	waitTrue := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	waitTrue("the client to be accepted", func() bool { return srv.Clients() == 1 })
	c.Close()
	waitTrue("the loop to sleep", l.slow.Load)
	if at := l.wakeAt.Load(); at != 0 {
		t.Fatalf("with no timer armed the loop wakes in %v", time.Duration(at-loopstat.Now()))
	}

	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	waitTrue("the second client to be accepted", func() bool { return srv.Clients() == 1 })
	if l.slow.Load() {
		t.Fatal("the loop still sleeps with a client connected")
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(buf); err != nil || n < 12 || string(buf[9:12]) != "200" {
		t.Fatalf("response %q, %v", buf[:n], err)
	}
	c.Close()
	waitTrue("the loop to sleep until the pooled connection's idle timeout", func() bool {
		return l.slow.Load() && l.wakeAt.Load() != 0
	})
	if left := time.Duration(l.wakeAt.Load() - loopstat.Now()); left < 50*time.Minute {
		t.Fatalf("the loop wakes in %v, before the pooled connection's idle timeout (1h)", left)
	}
}
