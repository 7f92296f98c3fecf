// Circuit breakers through real sockets, with short windows.

package engine_test

import (
	"io"
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// flakyUpstream answers 500 while failing is set, else 200, counting calls.
type flakyUpstream struct {
	failing atomic.Bool
	calls   atomic.Int64
}

func (f *flakyUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.calls.Add(1)
	if f.failing.Load() {
		w.WriteHeader(500)
	}
	io.WriteString(w, "flaky")
}

// Against an upstream that fails every call the circuit opens after the
// minimum calls and answers 55301 with Retry-After without touching the
// upstream; once the upstream heals and open_for has passed it lets the
// half-open probes through, and they close it.
func TestBreakerOpensAndHeals(t *testing.T) {
	up := &flakyUpstream{}
	up.failing.Store(true)
	const cfg = `
upstreams:
  - {name: flaky, nodes: ["%s"]}
routes:
  - id: guarded
    prefix: /
    upstream: flaky
    retry: {attempts: 1}
    circuit_breaker: {window: 6, min_calls: 4, open_for: 5s, half_open_calls: 2}
`
	// open_for outlasts what must happen while the circuit is open (a
	// scrape and a reload among them) on a loaded machine.
	addr := startUpstream(t, up)
	g := startGateway(t, cfg, addr)
	c := g.client(t)
	var opened time.Time // no later than the circuit opened
	for i := range 4 {
		opened = time.Now()
		if resp, _ := c.get("/x"); resp.StatusCode != 500 {
			t.Fatalf("call %d: status %d, want the upstream's 500 while the window fills", i, resp.StatusCode)
		}
	}
	resp, body := c.get("/x")
	expectError(t, resp, body, 503, 55301)
	// The seconds left, rounded up: 5 unless a stall took a second.
	least := strconv.Itoa(int(math.Ceil((5*time.Second - time.Since(opened)).Seconds())))
	if ra := resp.Header.Get("Retry-After"); ra != "5" && ra != least {
		t.Fatalf("Retry-After %q, want 5 (the seconds left, rounded up; %s after %v)", ra, least, time.Since(opened).Round(time.Millisecond))
	}
	if n := up.calls.Load(); n != 4 {
		t.Fatalf("the upstream saw %d calls, want 4: the open circuit let one through", n)
	}
	s := scrapeMetrics(t, g.srv)
	if v := s.get(t, `loopgate_route_breaker_state{route="guarded"}`); v != 1 {
		t.Fatalf("breaker state gauge %v, want 1 (open)", v)
	}
	// A reload keeps the route's circuit, open.
	g.reload(t, cfg+"  - {id: extra, prefix: /extra/, upstream: flaky}\n", addr)
	resp, body = c.get("/x")
	expectError(t, resp, body, 503, 55301)

	up.failing.Store(false)
	var status int
	waitFor(t, "the circuit to let a probe through", func() bool {
		resp, _ := c.get("/x")
		status = resp.StatusCode
		return status != 503
	})
	if status != 200 {
		t.Fatalf("first probe: status %d", status)
	}
	waitMetric(t, g.srv, `loopgate_route_breaker_state{route="guarded"}`, 2) // one of two probes answered
	if resp, _ := c.get("/x"); resp.StatusCode != 200 {
		t.Fatalf("second probe: status %d", resp.StatusCode)
	}
	s = waitMetric(t, g.srv, `loopgate_route_breaker_state{route="guarded"}`, 0)
	for to, want := range map[string]float64{"open": 1, "half_open": 1, "closed": 1} {
		if v := s.get(t, `loopgate_route_breaker_transitions_total{route="guarded",to="`+to+`"}`); v != want {
			t.Errorf("transitions to %s: %v, want %v", to, v, want)
		}
	}
	if v := s.get(t, `loopgate_route_breaker_rejected_total{route="guarded"}`); v < 1 {
		t.Errorf("rejected %v, want at least the one 55301", v)
	}
}

// A failing half-open probe opens the circuit again; a global section of
// one line enables breakers on every route, and a route can turn its off.
func TestBreakerGlobalAndProbeFailure(t *testing.T) {
	up := &flakyUpstream{}
	up.failing.Store(true)
	g := startGateway(t, `
circuit_breaker: {window: 2, min_calls: 2, open_for: 2s, half_open_calls: 1}
upstreams:
  - {name: flaky, nodes: ["%s"]}
routes:
  - {id: off, prefix: /off/, upstream: flaky, retry: {attempts: 1}, circuit_breaker: {enabled: false}}
  - {id: on, prefix: /, upstream: flaky, retry: {attempts: 1}}
`, startUpstream(t, up))
	c := g.client(t)
	for range 4 {
		if resp, _ := c.get("/off/x"); resp.StatusCode != 500 {
			t.Fatalf("route with its breaker off: status %d, want 500", resp.StatusCode)
		}
	}
	c.get("/x")
	c.get("/x")
	resp, body := c.get("/x")
	expectError(t, resp, body, 503, 55301)
	before := up.calls.Load()
	waitFor(t, "a half-open probe", func() bool {
		resp, _ := c.get("/x")
		return resp.StatusCode == 500
	})
	resp, body = c.get("/x")
	expectError(t, resp, body, 503, 55301)
	if up.calls.Load() != before+1 {
		t.Fatalf("the upstream saw %d calls while half-open with one permit, want 1", up.calls.Load()-before)
	}
	s := scrapeMetrics(t, g.srv)
	if v := s.get(t, `loopgate_route_breaker_transitions_total{route="on",to="open"}`); v != 2 {
		t.Fatalf("opened %v times, want 2 (the failed probe reopened it)", v)
	}
}
