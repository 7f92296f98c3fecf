// Regressions found in review, each through real sockets.

package engine_test

import (
	"runtime"
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
	gotX := make(chan *upConn, 1)
	done := testDone(t)
	up := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.read(); err != nil {
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
`, up.addr)
	x := g.client(t)
	x.send("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	uc := <-gotX
	y := g.client(t)
	y.send("POST /y HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nZZZ\r\n")
	waitRequests(t, g, 2) // y waits for x's connection
	if err := uc.writeSplit("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"); err != nil {
		t.Fatal(err)
	}

	resp, body := readResponse(t, x.br, "GET")
	if resp.StatusCode != 200 || string(body) != "hello" {
		t.Fatalf("client X got %d %q", resp.StatusCode, body)
	}
	resp, body = readResponse(t, y.br, "POST")
	expectError(t, resp, body, 400, 40001)
}

// Host reaches the upstream exactly once: an empty Host is replaced, and a
// Connection header cannot strip it. The heads are counted raw: net/http's
// Header never holds Host, and its parser refuses a second one.
func TestRegressionHostAlwaysOnce(t *testing.T) {
	heads := make(chan []byte, 1)
	up := startScriptedUpstream(t, serveHeads(func(head []byte) string {
		heads <- head
		return okRaw(nil)
	}))
	g := startGateway(t, oneRoute, up.addr)
	for _, tc := range []struct{ raw, host string }{
		{"GET / HTTP/1.1\r\nHost:\r\n\r\n", ""}, // any non-empty Host will do
		{"GET / HTTP/1.1\r\nHost: good.example\r\nConnection: host\r\n\r\n", "good.example"},
	} {
		resp, _ := g.rawExchange(t, tc.raw)
		if resp.StatusCode != 200 {
			t.Fatalf("%q: status %d", tc.raw, resp.StatusCode)
		}
		hosts := hostLines(<-heads)
		if len(hosts) != 1 || hosts[0] == "" {
			t.Errorf("%q: upstream got Host lines %q, want exactly one, not empty", tc.raw, hosts)
		} else if tc.host != "" && hosts[0] != tc.host {
			t.Errorf("%q: upstream Host %q, want %s", tc.raw, hosts[0], tc.host)
		}
	}
}
