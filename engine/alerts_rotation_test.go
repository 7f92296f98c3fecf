// upstream_down for every cause that leaves an upstream with no node in
// rotation: passive ejection alone, and ejection with active checks.

package engine_test

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// ruinedNode fails its health probes while sick and its real traffic
// (500) while failing.
type ruinedNode struct{ sick, failing atomic.Bool }

func (n *ruinedNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/health" && n.sick.Load():
		w.WriteHeader(503)
	case r.URL.Path != "/health" && n.failing.Load():
		w.WriteHeader(500)
	}
	io.WriteString(w, "ok")
}

// Both nodes of an upstream ejected for their 500s is one upstream_down
// alert, however many requests keep failing on them; their ejections
// ending resolves it with no request sent (a timer sees them end), and
// traffic after that raises nothing more.
func TestAlertUpstreamDownByEjection(t *testing.T) {
	rc := &alertReceiver{}
	hook := "http://" + startUpstream(t, rc) + "/hook"
	a, b := &ruinedNode{}, &ruinedNode{}
	a.failing.Store(true)
	b.failing.Store(true)
	g := startGateway(t, `
alerts:
  webhooks: [{url: "%s", events: [upstream_down], backoff: 10ms}]
upstreams:
  - name: backend
    nodes: [%s]
    outlier: {consecutive: 2, base_ejection: 300ms, max_ejection: 300ms, max_ejected_percent: 100}
routes:
  - {id: all, prefix: /, upstream: backend, retry: {attempts: 1}}
`, hook, nodeList(startUpstream(t, a), startUpstream(t, b)))
	c := g.client(t)
	waitFor(t, "the firing alert", func() bool {
		c.get("/x")
		return len(rc.of("backend")) == 1
	})
	if p := rc.of("backend")[0]; p.Event != "upstream_down" || p.Status != "firing" || !strings.Contains(p.Message, "2 ejected") {
		t.Fatalf("alert %+v", p)
	}
	for range 10 { // the ejected nodes still get the traffic (no node is left), and still fail
		c.get("/x")
	}
	a.failing.Store(false)
	b.failing.Store(false)
	waitFor(t, "the resolved alert", func() bool { return len(rc.of("backend")) == 2 })
	if p := rc.of("backend")[1]; p.Status != "resolved" || !strings.Contains(p.Message, "ejection over") {
		t.Fatalf("alert %+v, want resolved by an ejection's end", p)
	}
	for range 10 {
		if resp, _ := c.get("/x"); resp.StatusCode != 200 {
			t.Fatalf("status %d after the ejections ended", resp.StatusCode)
		}
	}
	waitMetric(t, g.srv, `loopgate_alert_deliveries_total`, 2)
	if n := len(rc.of("backend")); n != 2 {
		t.Fatalf("%d alerts, want 2: %+v", n, rc.of("backend"))
	}
}

// One node down by its health checks and the other ejected for its 500s
// leave none in rotation: one upstream_down alert. The first node's
// probes passing again resolve it while the other is still ejected.
func TestAlertUpstreamDownMixedCauses(t *testing.T) {
	rc := &alertReceiver{}
	hook := "http://" + startUpstream(t, rc) + "/hook"
	a, b := &ruinedNode{}, &ruinedNode{}
	addrA := startUpstream(t, a)
	a.sick.Store(true)
	b.failing.Store(true)
	g := startGateway(t, `
alerts:
  webhooks: [{url: "%s", events: [upstream_down], backoff: 10ms}]
upstreams:
  - name: backend
    nodes: [%s]
    outlier: {consecutive: 2, base_ejection: 1h, max_ejection: 1h, max_ejected_percent: 100}
    health_check: {path: /health, interval: 50ms, stable_interval: 50ms, degraded_interval: 50ms, healthy_threshold: 1, unhealthy_threshold: 1}
routes:
  - {id: all, prefix: /, upstream: backend, retry: {attempts: 1}}
`, hook, nodeList(addrA, startUpstream(t, b)))
	healthy(t, g, addrA, 0)
	c := g.client(t)
	waitFor(t, "the firing alert", func() bool {
		c.get("/x")
		return len(rc.of("backend")) == 1
	})
	if p := rc.of("backend")[0]; p.Status != "firing" || !strings.Contains(p.Message, "1 unhealthy, 1 ejected") {
		t.Fatalf("alert %+v", p)
	}
	a.sick.Store(false)
	waitFor(t, "the resolved alert", func() bool { return len(rc.of("backend")) == 2 })
	if p := rc.of("backend")[1]; p.Status != "resolved" || !strings.Contains(p.Message, addrA) {
		t.Fatalf("alert %+v, want resolved by %s", p, addrA)
	}
	if resp, _ := c.get("/x"); resp.StatusCode != 200 {
		t.Fatalf("status %d with %s back", resp.StatusCode, addrA)
	}
	waitMetric(t, g.srv, `loopgate_alert_deliveries_total`, 2)
	if n := len(rc.of("backend")); n != 2 {
		t.Fatalf("%d alerts, want 2: %+v", n, rc.of("backend"))
	}
}
