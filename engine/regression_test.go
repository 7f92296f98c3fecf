// Regressions found in review, each through real sockets.

package engine_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// waitRequests spins until the gateway has started n requests. With one
// loop, everything the loop does for those requests finishes before it
// handles the next event, so the test can then act knowing their state.
func waitRequests(t *testing.T, g *gateway, n uint64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for g.srv.Requests() < n {
		if time.Now().After(deadline) {
			t.Fatalf("gateway started %d requests, want %d", g.srv.Requests(), n)
		}
		runtime.Gosched()
	}
}

// A response head held back for coalescing must not be overwritten when the
// upstream connection passes to a waiting request that fails at once: each
// client gets its own answer.
func TestRegressionHeldHeadNotClobbered(t *testing.T) {
	gotX := make(chan net.Conn, 1)
	done := testDone(t)
	up := startRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		gotX <- c
		<-done
	})
	g := startGateway(t, `
loops: 1
upstreams:
  - {name: backend, nodes: ["%s"], max_conns: 1, max_idle: 1, pool_acquire_timeout: 5s}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up)
	x := g.dial(t)
	io.WriteString(x, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	uc := <-gotX
	y := g.dial(t)
	io.WriteString(y, "POST /y HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n")
	waitRequests(t, g, 2) // y waits for x's connection
	io.WriteString(uc, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")

	resp, body := readResponse(t, bufio.NewReader(x), "GET")
	if resp.StatusCode != 200 || string(body) != "hello" {
		t.Fatalf("client X got %d %q", resp.StatusCode, body)
	}
	resp, body = readResponse(t, bufio.NewReader(y), "POST")
	expectError(t, resp, body, 400, 40001)
}

// Host reaches the upstream exactly once: an empty Host is replaced, and a
// Connection header cannot strip it.
func TestRegressionHostAlwaysOnce(t *testing.T) {
	hosts := make(chan []string, 2)
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hosts <- append([]string{r.Host}, r.Header.Values("Host")...)
	}))
	g := startGateway(t, oneRoute, up)
	for _, raw := range []string{
		"GET / HTTP/1.1\r\nHost:\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: good.example\r\nConnection: host\r\n\r\n",
	} {
		resp, _ := g.rawExchange(t, raw)
		if resp.StatusCode != 200 {
			t.Fatalf("%q: status %d", raw, resp.StatusCode)
		}
		h := <-hosts
		if h[0] == "" || len(h) != 1 {
			t.Errorf("%q: upstream Host %q (plus header fields %q)", raw, h[0], h[1:])
		}
		if strings.Contains(raw, "good.example") && h[0] != "good.example" {
			t.Errorf("%q: upstream Host %q, want good.example", raw, h[0])
		}
	}
}
