// Active health checks through real sockets: nodes that fail their probes
// leave rotation, every node down is a 50301, the panic threshold spreads
// traffic over all nodes, and 800 nodes are probed without a burst.

package engine_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// checkedNode answers /health with 200 or 503 as told, and counts the rest.
type checkedNode struct {
	sick   atomic.Bool
	served atomic.Int64
}

func (c *checkedNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		if c.sick.Load() {
			w.WriteHeader(503)
		}
		return
	}
	c.served.Add(1)
	io.WriteString(w, "ok")
}

const healthChecked = `
upstreams:
  - name: backend
    nodes: [%s]
    outlier: {enabled: false}
    health_check: {path: /health, interval: 50ms, stable_interval: 50ms, degraded_interval: 50ms, healthy_threshold: 1, unhealthy_threshold: 1}
routes:
  - {id: all, prefix: /, upstream: backend}
`

func nodeList(addrs ...string) string {
	return `"` + strings.Join(addrs, `", "`) + `"`
}

func healthy(t *testing.T, g *gateway, addr string, want float64) {
	t.Helper()
	waitMetric(t, g.srv, fmt.Sprintf(`loopgate_upstream_node_healthy{upstream="backend",node="%s"}`, addr), want)
}

// A node failing its probes leaves rotation and comes back when they pass;
// every node down answers 503, code 50301.
func TestHealthChecksRouteAround(t *testing.T) {
	a, b := &checkedNode{}, &checkedNode{}
	addrA, addrB := startUpstream(t, a), startUpstream(t, b)
	g := startGateway(t, healthChecked, nodeList(addrA, addrB))
	b.sick.Store(true)
	healthy(t, g, addrB, 0)
	for range 10 {
		if r := fetch(g.url("/x")); r.err != nil || r.resp.StatusCode != 200 {
			t.Fatalf("with one node down: %v %v", r.err, r.resp)
		}
	}
	if b.served.Load() != 0 || a.served.Load() != 10 {
		t.Fatalf("served a %d, b %d; want 10 and 0: the unhealthy node stayed in rotation", a.served.Load(), b.served.Load())
	}
	a.sick.Store(true)
	healthy(t, g, addrA, 0)
	resp, body := g.client(t).get("/x")
	expectError(t, resp, body, 503, 50301)
	b.sick.Store(false)
	healthy(t, g, addrB, 1)
	for range 4 {
		if r := fetch(g.url("/x")); r.err != nil || r.resp.StatusCode != 200 {
			t.Fatalf("after b recovered: %v %v", r.err, r.resp)
		}
	}
	if b.served.Load() != 4 {
		t.Fatalf("the recovered node served %d of 4", b.served.Load())
	}
}

// Below the panic threshold (50 %: one healthy node of three), traffic
// goes to every node rather than overload the last one.
func TestHealthChecksPanicThreshold(t *testing.T) {
	nodes := []*checkedNode{{}, {}, {}}
	addrs := []string{startUpstream(t, nodes[0]), startUpstream(t, nodes[1]), startUpstream(t, nodes[2])}
	g := startGateway(t, healthChecked, nodeList(addrs...))
	nodes[1].sick.Store(true)
	nodes[2].sick.Store(true)
	healthy(t, g, addrs[1], 0)
	healthy(t, g, addrs[2], 0)
	for range 12 {
		if r := fetch(g.url("/x")); r.err != nil || r.resp.StatusCode != 200 {
			t.Fatalf("in panic: %v %v", r.err, r.resp)
		}
	}
	if nodes[1].served.Load() == 0 || nodes[2].served.Load() == 0 {
		t.Fatalf("served %d, %d, %d: below the panic threshold every node takes traffic",
			nodes[0].served.Load(), nodes[1].served.Load(), nodes[2].served.Load())
	}
}

// Health checks at scale: 800 nodes on loopback addresses across
// 127.0.0.0/8, one listener. Every node is probed, never more than 20 at
// once, and the first round is spread over the interval rather than fired
// in one burst. LOOPGATE_HEALTH_SCALE_SECONDS runs it longer and
// LOOPGATE_HEALTH_SCALE_INTERVAL sets the probe interval (2s by default;
// 30s is the default for new nodes); it logs the probes per second.
func TestHealthChecksAtScale(t *testing.T) {
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	var inFlight, peak atomic.Int64
	var mu sync.Mutex
	seen := map[string]int{}
	start := time.Now()
	perTick := map[int]int{} // probes by 100 ms since start
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(5 * time.Millisecond) // a probe takes a little while: in-flight probes overlap
		mu.Lock()
		seen[r.Host]++
		perTick[int(time.Since(start)/(100*time.Millisecond))]++
		mu.Unlock()
		inFlight.Add(-1)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	const nodes = 800
	addrs := make([]string, nodes)
	for i := range addrs {
		addrs[i] = fmt.Sprintf("127.0.%d.%d:%d", i/250, 1+i%250, port)
	}
	interval := 2 * time.Second
	if d, err := time.ParseDuration(os.Getenv("LOOPGATE_HEALTH_SCALE_INTERVAL")); err == nil && d > 0 {
		interval = d // e.g. 30s, the default for new nodes
	}
	run := interval + interval/2
	if s, _ := strconv.Atoi(os.Getenv("LOOPGATE_HEALTH_SCALE_SECONDS")); s > 0 {
		run = time.Duration(s) * time.Second
	}
	startGateway(t, `
upstreams:
  - name: backend
    nodes: [%s]
    health_check: {path: /health, interval: %s, stable_interval: %s}
routes:
  - {id: all, prefix: /, upstream: backend}
`, nodeList(addrs...), interval, interval)
	// The first round is spread over one interval.
	for deadline := time.Now().Add(interval + 10*time.Second); ; time.Sleep(5 * time.Millisecond) {
		mu.Lock()
		probed := len(seen)
		mu.Unlock()
		if probed == nodes {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d nodes probed after one interval (%v)", probed, nodes, interval)
		}
	}
	for time.Since(start) < run {
		time.Sleep(100 * time.Millisecond) // the run's length, not synchronisation
	}
	mu.Lock()
	defer mu.Unlock()
	if p := peak.Load(); p > 20 {
		t.Fatalf("%d probes in flight at once, want at most 20", p)
	}
	busiest := 0
	seconds := map[int]int{}
	for tick, n := range perTick {
		busiest = max(busiest, n)
		seconds[tick/10] += n
	}
	if busiest >= nodes/4 {
		t.Fatalf("%d probes in one 100 ms tick: the first round came in a burst", busiest)
	}
	var line []string
	for s := 0; s <= int(run/time.Second); s++ {
		line = append(line, strconv.Itoa(seconds[s]))
	}
	t.Logf("800 nodes, interval %v: peak %d in flight, busiest 100 ms %d probes; probes per second: %s",
		interval, peak.Load(), busiest, strings.Join(line, " "))
}

// A node passing its active checks while failing real traffic stays
// ejected: the probe says nothing about the requests it fails.
func TestHealthPassDoesNotUnEject(t *testing.T) {
	var failing atomic.Int64
	bad := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			failing.Add(1)
			w.WriteHeader(500)
		}
	}))
	good := &checkedNode{}
	g := startGateway(t, `
loops: 1
upstreams:
  - name: backend
    nodes: ["%s", "%s"]
    outlier: {consecutive: 2, base_ejection: 1m}
    health_check: {path: /health, interval: 50ms, stable_interval: 50ms, degraded_interval: 50ms, healthy_threshold: 1, unhealthy_threshold: 1}
routes:
  - {id: all, prefix: /, upstream: backend}
`, bad, startUpstream(t, good))
	for range 4 { // round robin: two go to the bad node, which is then ejected
		fetch(g.url("/x"))
	}
	node := fmt.Sprintf(`{upstream="backend",node="%s",result="pass"}`, bad)
	s := scrapeMetrics(t, g.srv)
	passes := s.get(t, "loopgate_upstream_node_health_probes_total"+node)
	waitFor(t, "three more passing probes of the ejected node", func() bool {
		return scrapeMetrics(t, g.srv).get(t, "loopgate_upstream_node_health_probes_total"+node) >= passes+3
	})
	before := failing.Load()
	for range 6 {
		if r := fetch(g.url("/y")); r.err != nil || r.resp.StatusCode != 200 {
			t.Fatalf("with the failing node ejected: %v %v", r.err, r.resp)
		}
	}
	if failing.Load() != before {
		t.Fatalf("the ejected node got %d requests after passing probes", failing.Load()-before)
	}
}
