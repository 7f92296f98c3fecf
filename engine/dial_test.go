// Dialing upstreams and connection churn through the gateway: a steady
// load reuses its connections, and every kind of failed dial is answered
// and counted.

package engine_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// acceptCounter is an HTTP upstream that counts the connections it
// accepted.
type acceptCounter struct {
	addr     string
	accepted atomic.Int64
}

func startAcceptCounter(t *testing.T) *acceptCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ac := &acceptCounter{addr: ln.Addr().String()}
	srv := &http.Server{Handler: okHandler, ConnState: func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			ac.accepted.Add(1)
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ac
}

// A steady load at a concurrency above the old idle cap (256) through one
// loop with the default pool settings dials about one connection per
// concurrent request, and then only reuses them: no connection is closed
// and dialed again.
func TestSteadyLoadDoesNotChurn(t *testing.T) {
	const clients, rounds = 300, 4
	up := startAcceptCounter(t)
	g := startGateway(t, "loops: 1\n"+oneRoute, up.addr)

	conns := make([]net.Conn, clients)
	readers := make([]*bufio.Reader, clients)
	for i := range conns {
		conns[i] = g.dial(t)
		readers[i] = bufio.NewReader(conns[i])
	}
	for round := 0; round < rounds; round++ {
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for i := range conns {
			wg.Add(1)
			go func(c net.Conn, br *bufio.Reader) {
				defer wg.Done()
				if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
					errs <- err
					return
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
				}
			}(conns[i], readers[i])
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}

	node := fmt.Sprintf(`upstream="backend",node="%s"`, up.addr)
	s := scrapeMetrics(t, g.srv)
	dials := s.get(t, "loopgate_upstream_connects_total{"+node+"}")
	reuses := s.get(t, "loopgate_upstream_connection_reuses_total{"+node+"}")
	if accepted := up.accepted.Load(); accepted > clients || dials > clients {
		t.Errorf("%d requests from %d clients made %d upstream connections (%v dials): connections were closed and dialed again",
			clients*rounds, clients, accepted, dials)
	}
	if dials+reuses != clients*rounds {
		t.Errorf("%v dials + %v reuses, want one of them per request (%d)", dials, reuses, clients*rounds)
	}
	if n := s.sum("loopgate_upstream_connection_closes_total", node); n != 0 {
		t.Errorf("%v connections closed under a steady load", n)
	}
}

// fullBacklog returns the address of a listener that never accepts and
// whose accept queue is full: the kernel drops further SYNs, so a connect
// to it stays in progress until the dialer gives up.
func fullBacklog(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port)
	// Backlog 0 queues one connection; fill the queue.
	for i := 0; i < 2; i++ {
		c, err := net.DialTimeout("tcp", addr, 200e6)
		if err != nil {
			break // the queue is full
		}
		t.Cleanup(func() { c.Close() })
	}
	return addr
}

// Every kind of failed dial is answered 502 with code 50201 and counted:
// refused (a node by address, and by host name through the resolver), and
// a connect that never completes, ended by connect_timeout on the loop's
// clock.
func TestDialFailuresAnsweredAndCounted(t *testing.T) {
	refused := closedPort(t)
	_, port, _ := net.SplitHostPort(closedPort(t))
	refusedByName := net.JoinHostPort("localhost", port)
	hanging := fullBacklog(t)
	g := startGateway(t, `
upstreams:
  - {name: refused, nodes: ["%s"]}
  - {name: byname, nodes: ["%s"]}
  - {name: hanging, nodes: ["%s"], connect_timeout: 200ms}
routes:
  - {id: refused, prefix: /refused/, upstream: refused}
  - {id: byname, prefix: /byname/, upstream: byname}
  - {id: hanging, prefix: /hanging/, upstream: hanging}
`, refused, refusedByName, hanging)
	for _, name := range []string{"refused", "byname", "hanging"} {
		resp, body := g.rawExchange(t, "GET /"+name+"/x HTTP/1.1\r\nHost: a\r\n\r\n")
		expectError(t, resp, body, 502, 50201)
	}
	s := scrapeMetrics(t, g.srv)
	for name, addr := range map[string]string{"refused": refused, "byname": refusedByName, "hanging": hanging} {
		node := fmt.Sprintf(`upstream="%s",node="%s"`, name, addr)
		if v := s.get(t, "loopgate_upstream_connect_failures_total{"+node+"}"); v != 1 {
			t.Errorf("%s: %v connect failures counted, want 1", name, v)
		}
	}
}
