// Passive outlier ejection through real sockets: a node that dies under
// load leaves rotation after a few failures and comes back on its timer.

package engine_test

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
)

// restartable is an upstream that can be stopped and started again on the
// same address.
type restartable struct {
	addr string
	h    http.Handler
	mu   sync.Mutex
	srv  *http.Server
}

func startRestartable(t *testing.T, h http.Handler) *restartable {
	r := &restartable{h: h}
	r.start(t, "127.0.0.1:0")
	t.Cleanup(r.stop)
	return r
}

func (r *restartable) start(t *testing.T, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addr = ln.Addr().String()
	r.srv = &http.Server{Handler: r.h}
	go r.srv.Serve(ln)
}

func (r *restartable) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		r.srv.Close()
		r.srv = nil
	}
}

// Crashing node: one of three nodes dies under a GET load. No client
// request fails (each attempt on the dead node is a connect error, retried
// elsewhere); the node is ejected after its failures in a row, and comes
// back by its timer once it is up again.
func TestOutlierCrashingNode(t *testing.T) {
	a, b, c := &countingHandler{name: "a"}, &countingHandler{name: "b"}, &countingHandler{name: "c"}
	crashing := startRestartable(t, c)
	g := startGateway(t, threeNodes, startUpstream(t, a), crashing.addr, startUpstream(t, b), `    retry_budget: {min_retries: 8}
    outlier: {consecutive: 3, base_ejection: 300ms, max_ejection: 300ms}`)
	get := func() (int, error) {
		r := fetch(g.url("/x"))
		if r.err != nil {
			return 0, r.err
		}
		return r.resp.StatusCode, nil
	}
	if seen := sendAll(t, g, 60, get); seen[200] != 60 || c.gets.Load() == 0 {
		t.Fatalf("before the crash: statuses %v, the crashing node served %d", seen, c.gets.Load())
	}
	crashing.stop()
	if seen := sendAll(t, g, 300, get); seen[200] != 300 {
		t.Fatalf("while a node is down: statuses %v, want 300 × 200", seen)
	}
	node := fmt.Sprintf(`{upstream="backend",node="%s"}`, crashing.addr)
	s := scrapeMetrics(t, g.srv)
	ejections := s.get(t, "loopgate_upstream_node_ejections_total"+node)
	failures := s.get(t, "loopgate_upstream_connect_failures_total"+node)
	if ejections < 1 {
		t.Fatalf("the dead node was never ejected (%v connect failures)", failures)
	}
	// Each ejection takes 3 failures in a row, each return one more; up to
	// 8 requests in flight may fail on it before an ejection is seen.
	if max := 3 + 8 + (ejections-1)*(1+8); failures > max {
		t.Fatalf("%v connect failures over %v ejections, want at most %v", failures, ejections, max)
	}

	crashing.start(t, crashing.addr)
	served := c.gets.Load()
	waitFor(t, "the recovered node to serve again", func() bool {
		sendAll(t, g, 8, get)
		return c.gets.Load() > served
	})
}

// A one-node upstream is never ejected: max_ejected_percent leaves it its
// node, whose failures the client sees.
func TestOutlierKeepsLastNode(t *testing.T) {
	dead := closedPort(t)
	g := startGateway(t, oneRoute, dead)
	for range 8 {
		resp, body := g.client(t).get("/x")
		expectError(t, resp, body, 502, 50201)
	}
	s := scrapeMetrics(t, g.srv)
	if v := s.get(t, fmt.Sprintf(`loopgate_upstream_node_ejections_total{upstream="backend",node="%s"}`, dead)); v != 0 {
		t.Fatalf("the only node was ejected %v times", v)
	}
}

// Crashing node under both mechanisms: active checks and passive
// ejection. The dead node leaves rotation (no client request fails), and
// once it is up again the active check marks it healthy and its ejection
// timer brings it back: it serves again.
func TestCrashingNodeWithHealthChecks(t *testing.T) {
	a, b, c := &countingHandler{name: "a"}, &countingHandler{name: "b"}, &countingHandler{name: "c"}
	crashing := startRestartable(t, c)
	g := startGateway(t, threeNodes, startUpstream(t, a), crashing.addr, startUpstream(t, b), `    retry_budget: {min_retries: 8}
    outlier: {consecutive: 3, base_ejection: 300ms, max_ejection: 300ms}
    health_check: {path: /health, interval: 50ms, stable_interval: 50ms, degraded_interval: 50ms, healthy_threshold: 1, unhealthy_threshold: 1}`)
	// degraded_interval: on a slow machine the node stays down for five
	// probes or more, and the default 3m degraded tier would leave it
	// unprobed past the test's deadline once it is back.
	get := func() (int, error) {
		r := fetch(g.url("/x"))
		if r.err != nil {
			return 0, r.err
		}
		return r.resp.StatusCode, nil
	}
	crashing.stop()
	healthy(t, g, crashing.addr, 0)
	if seen := sendAll(t, g, 200, get); seen[200] != 200 {
		t.Fatalf("while a node is down: statuses %v, want 200 × 200", seen)
	}
	crashing.start(t, crashing.addr)
	healthy(t, g, crashing.addr, 1)
	served := c.gets.Load()
	waitFor(t, "the recovered node to serve again", func() bool {
		sendAll(t, g, 8, get)
		return c.gets.Load() > served
	})
}
