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
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
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
	// Isolation off: its default limit (200 calls) would hold the 300
	// clients to 200 connections, and this is about the pool's own reuse.
	g := startGateway(t, "loops: 1\nisolation: {enabled: false}\n"+oneRoute, up.addr)

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
	_, addr, _ := backlogListener(t)
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

// A connect that needs more than the connect(2) call (the node's accept
// queue was full, so its SYN was dropped and is sent again a second later)
// waits off the loop, and once it completes the socket joins the loop and
// the request is served on it.
func TestDialInProgressCompletes(t *testing.T) {
	fd, addr, _ := backlogListener(t)
	filler, err := net.Dial("tcp", addr) // takes the one place in the accept queue
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()
	// The SYN is sent again a second after the first one.
	g := startGateway(t, "loops: 1\nupstreams: [{name: b, nodes: [\"%s\"], connect_timeout: 10s}]\nroutes: [{prefix: /, upstream: b}]\n", addr)
	done := make(chan fetched, 1)
	go func() { done <- fetch(g.url("/x")) }()
	_, port, _ := net.SplitHostPort(addr)
	waitFor(t, "the gateway's connect to hang in SYN_SENT", func() bool { return synSentTo(t, port) })

	accept := func() *os.File {
		nfd, _, err := syscall.Accept(fd)
		if err != nil {
			t.Fatal(err)
		}
		return os.NewFile(uintptr(nfd), "accepted")
	}
	accept().Close() // the filler: room for the gateway's SYN, when it comes again
	up := accept()   // blocks until the handshake completes
	defer up.Close()
	c, err := net.FileConn(up)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	r := <-done
	if r.err != nil || r.resp.StatusCode != 200 || string(r.body) != "ok" {
		t.Fatalf("after the connect completed: %v %v %q", r.err, r.resp, r.body)
	}
	if v := scrapeMetrics(t, g.srv).sum("loopgate_upstream_connect_failures_total", ""); v != 0 {
		t.Fatalf("%v connect failures counted", v)
	}
}

// A connect in progress that then fails (the node went away while its
// SYN waited: the SYN sent again gets a reset) is answered 502/50201 as
// soon as the failure is known, not at connect_timeout, and counted.
func TestDialInProgressRefused(t *testing.T) {
	_, addr, closeListener := backlogListener(t)
	filler, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer filler.Close()
	g := startGateway(t, "loops: 1\nupstreams: [{name: b, nodes: [\"%s\"], connect_timeout: 30s}]\nroutes: [{prefix: /, upstream: b}]\n", addr)
	conn := g.dial(t) // its deadline is 30 s: an answer at connect_timeout would fail it
	if _, err := io.WriteString(conn, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(addr)
	waitFor(t, "the gateway's connect to hang in SYN_SENT", func() bool { return synSentTo(t, port) })
	closeListener()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	expectError(t, resp, body, 502, 50201)
	node := fmt.Sprintf(`{upstream="b",node="%s"}`, addr)
	if v := scrapeMetrics(t, g.srv).get(t, "loopgate_upstream_connect_failures_total"+node); v != 1 {
		t.Fatalf("%v connect failures counted, want 1", v)
	}
}

// backlogListener listens on 127.0.0.1 with an accept queue of one and
// never accepts by itself. closeFn closes it once (the test's end does
// too): closing a descriptor twice could close one reused meanwhile.
func backlogListener(t *testing.T) (fd int, addr string, closeFn func()) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	closeFn = func() { once.Do(func() { syscall.Close(fd) }) }
	t.Cleanup(closeFn)
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
	return fd, "127.0.0.1:" + strconv.Itoa(sa.(*syscall.SockaddrInet4).Port), closeFn
}

// synSentTo reports whether some local socket is in SYN_SENT towards port
// on 127.0.0.1 (from /proc/net/tcp).
func synSentTo(t *testing.T, port string) bool {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Skip("no /proc/net/tcp:", err)
	}
	p, _ := strconv.Atoi(port)
	remote := fmt.Sprintf("0100007F:%04X", p)
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[2] == remote && f[3] == "02" {
			return true
		}
	}
	return false
}
