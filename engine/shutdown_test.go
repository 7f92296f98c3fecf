// Graceful shutdown: in-flight requests finish, new and idle connections go.

package engine_test

import (
	"bufio"
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
	witness, witnessBR := pxDial(t, g)
	if resp, _ := pxGet(t, witness, witnessBR, "/fast"); resp.StatusCode != 200 {
		t.Fatalf("warm-up: %d", resp.StatusCode)
	}

	c, br := pxDial(t, g)
	pxWrite(t, c, "GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
	<-entered // the request is in flight at the upstream

	done := startShutdown(g)
	pxExpectEOF(t, witnessBR)
	expectNoService(t, g)
	select {
	case err := <-done:
		t.Fatalf("Shutdown returned %v with a request in flight", err)
	default:
	}

	releaseOnce.Do(func() { close(release) })
	resp, body := readResponse(t, br, "GET")
	if resp.StatusCode != 200 || string(body) != payload {
		t.Fatalf("in-flight request: %d, %d bytes (want %d)", resp.StatusCode, len(body), len(payload))
	}
	if !resp.Close {
		t.Error("response during shutdown lacks Connection: close")
	}
	pxExpectEOF(t, br)
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestShutdownClosesIdleKeepAlive(t *testing.T) {
	upClosed := make(chan struct{})
	var once sync.Once
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	us := &http.Server{
		Handler: okHandler,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateClosed {
				once.Do(func() { close(upClosed) })
			}
		},
	}
	go us.Serve(ln)
	t.Cleanup(func() { us.Close() })
	g := startGateway(t, oneRoute, ln.Addr().String())

	conns := make([]*bufio.Reader, 3)
	for i := range conns {
		c, br := pxDial(t, g)
		if resp, body := pxGet(t, c, br, "/x"); resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("conn %d: %d %q", i, resp.StatusCode, body)
		}
		if resp, _ := pxGet(t, c, br, "/y"); resp.Close {
			t.Fatalf("conn %d: not kept alive", i)
		}
		conns[i] = br
	}
	// A connection that never sent a byte is idle too.
	_, silentBR := pxDial(t, g)
	conns = append(conns, silentBR)

	done := startShutdown(g)
	for _, br := range conns {
		pxExpectEOF(t, br)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	// The pooled upstream connection is closed too.
	select {
	case <-upClosed:
	case <-time.After(10 * time.Second):
		t.Fatal("idle upstream connection still open after Shutdown")
	}
	expectNoService(t, g)
}
