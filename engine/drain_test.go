// Drain: the listeners close first, so new clients are refused while
// in-flight requests finish.

package engine_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// From the start of Shutdown a new connection is refused by the kernel on
// every loop's listener (with SO_REUSEPORT each loop has its own, and the
// kernel spreads connects over them by source port), while a request in
// flight completes.
func TestDrainRefusesNewConnections(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("listeners close early on Linux only")
	}
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		io.WriteString(w, "finished")
	}))
	g := startGateway(t, `
loops: 4
upstreams:
  - {name: backend, nodes: ["%s"], response_timeout: 20s}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up)
	c := g.dial(t)
	br := bufio.NewReader(c)
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	<-entered

	done := startShutdown(g)
	refused := func() bool {
		conn, err := net.DialTimeout("tcp", g.addr, 5*time.Second)
		if err == nil {
			conn.Close()
			return false
		}
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	waitFor(t, "a new connection to be refused", refused)
	for i := 0; i < 40; i++ {
		if !refused() {
			t.Fatalf("connect %d after the listeners closed was accepted", i)
		}
	}

	releaseOnce.Do(func() { close(release) })
	resp, body := readResponse(t, br, "GET")
	if resp.StatusCode != 200 || string(body) != "finished" {
		t.Fatalf("in-flight request: %d %q", resp.StatusCode, body)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
