// Upstream pool limits through real sockets: idle timeout and max_idle.

package engine_test

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// connEvents runs an upstream that reports new and closed connections.
func connEvents(t *testing.T, h http.Handler) (addr string, opened, closed chan struct{}) {
	t.Helper()
	opened, closed = make(chan struct{}, 100), make(chan struct{}, 100)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			opened <- struct{}{}
		case http.StateClosed:
			closed <- struct{}{}
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), opened, closed
}

func waitN(t *testing.T, ch chan struct{}, n int, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("saw %d of %d %s", i, n, what)
		}
	}
}

func TestPoolIdleTimeoutClosesConnections(t *testing.T) {
	up, opened, closed := connEvents(t, okHandler)
	g := startGateway(t, `
upstreams:
  - {name: backend, nodes: ["%s"], idle_timeout: 200ms}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up)
	g.expectServing(t)
	waitN(t, opened, 1, "upstream connections")
	// The pooled connection is closed by the gateway once idle for 200ms.
	waitN(t, closed, 1, "closed upstream connections")
	g.expectServing(t) // and a new one is dialed on demand
	waitN(t, opened, 1, "new upstream connections")
}

func TestPoolMaxIdle(t *testing.T) {
	release := make(chan struct{})
	var arrived sync.WaitGroup
	arrived.Add(3)
	up, opened, closed := connEvents(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			arrived.Done()
			<-release
		}
		io.WriteString(w, "ok")
	}))
	g := startGateway(t, `
loops: 1
upstreams:
  - {name: backend, nodes: ["%s"], max_idle: 1, idle_timeout: 1h}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up)
	var done sync.WaitGroup
	for i := 0; i < 3; i++ {
		done.Add(1)
		go func() {
			defer done.Done()
			resp, err := http.Get(g.url("/hold"))
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	arrived.Wait() // three requests in flight: three upstream connections
	waitN(t, opened, 3, "upstream connections")
	close(release)
	done.Wait()
	// Only one may stay idle; the gateway closes the other two.
	waitN(t, closed, 2, "closed upstream connections")
	select {
	case <-closed:
		t.Fatal("all pooled connections were closed; max_idle 1 should keep one")
	default:
	}
}
