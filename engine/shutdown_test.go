// Graceful shutdown: in-flight requests finish, new and idle connections go.

package engine_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// shutdownBudget bounds a Shutdown in these tests; reaching it is a failure
// (Shutdown then returns the context's error), not a synchronisation.
const shutdownBudget = 20 * time.Second

// startShutdown runs srv.Shutdown in the background and returns its result.
func startShutdown(g *gateway) <-chan error {
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
		defer cancel()
		done <- g.srv.Shutdown(ctx)
	}()
	return done
}

// expectNoService asserts a new connection is refused, or accepted and
// closed without a response.
func expectNoService(t *testing.T, g *gateway) {
	t.Helper()
	c, err := net.DialTimeout("tcp", g.addr, 5*time.Second)
	if err != nil {
		return // refused: the listener is gone
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = io.WriteString(c, "GET /fast HTTP/1.1\r\nHost: test\r\n\r\n") // may fail on a closed socket
	got, err := io.ReadAll(c)
	var ne net.Error
	switch {
	case len(got) > 0:
		t.Fatalf("new connection during shutdown was served: %q", got)
	case errors.As(err, &ne) && ne.Timeout():
		t.Fatal("new connection during shutdown was left open without a response")
	}
	// EOF or a reset: closed without a response.
}

func TestShutdownFinishesInFlight(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	payload := strings.Repeat("in-flight body ", 20000) // 300 kB, several writes
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		io.WriteString(w, payload)
	}))
	g := startGateway(t, oneRoute, up)

	// An idle connection: its close shows the gateway has started draining.
	witness := g.client(t)
	if resp, _ := witness.get("/fast"); resp.StatusCode != 200 {
		t.Fatalf("warm-up: %d", resp.StatusCode)
	}

	c := g.client(t)
	c.send("GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
	<-entered // the request is in flight at the upstream

	done := startShutdown(g)
	expectClosedConn(t, witness, witness.br, false)
	expectNoService(t, g)
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	default:
	}

	releaseOnce.Do(func() { close(release) })
	resp, body := readResponse(t, c.br, "GET")
	if resp.StatusCode != 200 || string(body) != payload {
		t.Fatalf("in-flight request: %d, %d bytes (want %d)", resp.StatusCode, len(body), len(payload))
	}
	if !resp.Close {
		t.Error("response during shutdown lacks Connection: close")
	}
	expectClosedConn(t, c, c.br, false)
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestShutdownClosesIdleKeepAlive(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(okRaw))
	g := startGateway(t, oneRoute, up.addr)

	conns := make([]*rawClient, 3)
	for i := range conns {
		c := g.client(t)
		if resp, body := c.get("/x"); resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("conn %d: %d %q", i, resp.StatusCode, body)
		}
		if resp, _ := c.get("/y"); resp.Close {
			t.Fatalf("conn %d: not kept alive", i)
		}
		conns[i] = c
	}
	// A connection that never sent a byte is idle too, once accepted. (One
	// accepted while Shutdown runs is another case: a loop's first
	// connection can be missed by the drain.)
	conns = append(conns, g.client(t))
	waitFor(t, "the silent connection to be accepted", func() bool { return g.srv.Clients() == 4 })
	if up.finished() != 0 {
		t.Fatal("an upstream connection closed before Shutdown")
	}

	done := startShutdown(g)
	for _, c := range conns {
		expectClosedConn(t, c, c.br, false)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	// The pooled upstream connections are closed too.
	waitFor(t, "the idle upstream connections to close", func() bool { return up.finished() == up.connections() })
	expectNoService(t, g)
}
