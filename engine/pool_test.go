// Upstream pool limits through real sockets: idle timeout and max_idle.

package engine_test

import (
	"sync"
	"testing"
)

func TestPoolIdleTimeoutClosesConnections(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, `
upstreams:
  - {name: backend, nodes: ["%s"], idle_timeout: 200ms}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up.addr)
	g.expectServing(t)
	if n := up.connections(); n != 1 {
		t.Fatalf("%d upstream connections for one request", n)
	}
	// The pooled connection is closed by the gateway once idle for 200ms.
	waitFor(t, "the idle upstream connection to close", func() bool { return up.finished() == 1 })
	g.expectServing(t) // and a new one is dialed on demand
	if n := up.connections(); n != 2 {
		t.Fatalf("%d upstream connections after the idle one closed, want 2", n)
	}
}

func TestPoolMaxIdle(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	var arrived sync.WaitGroup
	arrived.Add(3)
	up := startScriptedUpstream(t, func(c *upConn) {
		r, err := c.read()
		if err != nil {
			return
		}
		arrived.Done()
		<-release
		if c.writeSplit(okRaw(r)) == nil {
			serveEach(okRaw)(c)
		}
	})
	g := startGateway(t, `
loops: 1
upstreams:
  - {name: backend, nodes: ["%s"], max_idle: 1, idle_timeout: 1h}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up.addr)
	results := make(chan fetched, 3)
	for range 3 {
		go func() { results <- fetch(g.url("/hold")) }()
	}
	arrived.Wait() // three requests in flight, each holding its own upstream connection
	once.Do(func() { close(release) })
	for range 3 {
		if r := <-results; r.err != nil || r.resp.StatusCode != 200 {
			t.Fatalf("held request: %+v", r)
		}
	}
	// Only one may stay idle; the gateway closes the other two.
	waitFor(t, "two upstream connections to close", func() bool { return up.finished() >= 2 })
	if n := up.finished(); n != 2 {
		t.Fatalf("%d of 3 pooled connections closed; max_idle 1 keeps one", n)
	}
}
