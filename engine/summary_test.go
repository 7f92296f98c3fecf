package engine_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/engine"
	"github.com/loopgate/loopgate/filters/ratelimit/limiter"
)

func summary(t *testing.T, g *gateway, top int) *engine.Summary {
	t.Helper()
	s, ok := g.srv.Summary(top).(*engine.Summary)
	if !ok {
		t.Fatalf("Summary answered %T", g.srv.Summary(top))
	}
	return s
}

func listed(s *engine.Summary) []string {
	ids := make([]string, len(s.Routes.List))
	for i, r := range s.Routes.List {
		ids[i] = r.ID
	}
	return ids
}

// The summary lists the top routes by the requests they finished since the
// previous summary, busiest first, then a quiet route whose breaker is
// open beyond the top; it counts every route, and lists only the shown
// routes' upstreams. Each route's counters are the metrics' own: its
// latency buckets add up to its requests, its 5xx are its errors.
func TestSummaryRanksBusiestAndAbnormal(t *testing.T) {
	var routes strings.Builder
	for i := range 20 {
		fmt.Fprintf(&routes, "  - {id: r%d, prefix: /r%d/, upstream: u%d}\n", i, i, i)
	}
	var ups strings.Builder
	for i := range 20 {
		fmt.Fprintf(&ups, "  - {name: u%d, nodes: [\"%%[1]s\"]}\n", i)
	}
	g := startGateway(t, `
upstreams:
`+ups.String()+`  - {name: gone, nodes: ["%[2]s"]}
routes:
`+routes.String()+`  - id: sick
    prefix: /sick/
    upstream: gone
    retry: {attempts: 1}
    circuit_breaker: {window: 2, min_calls: 2, open_for: 1m}
`, startUpstream(t, okHandler), closedPort(t))
	// hit sends n requests and waits for them to be counted: a request is
	// counted when its exchange ends, just after the client has its answer.
	hit := func(path string, n, status int) {
		t.Helper()
		for range n {
			expectStatus(t, path, fetch(g.url(path)), status)
		}
		id := strings.Trim(path, "/")
		waitMetric(t, g.srv, fmt.Sprintf(`loopgate_route_requests_total{route=%q,code="%dxx"}`, id, status/100), float64(n))
	}
	hit("/r5/", 6, 200)
	hit("/r7/", 4, 200)
	hit("/r9/", 3, 200)
	hit("/sick/", 2, 502) // opens the breaker: the route is abnormal

	s := summary(t, g, 3)
	if got, want := strings.Join(listed(s), " "), "r5 r7 r9 sick"; got != want {
		t.Fatalf("routes listed %q, want %q", got, want)
	}
	if s.Routes.Total != 21 || s.Routes.Abnormal != 1 || s.Upstreams.Total != 21 {
		t.Fatalf("totals: routes %d (abnormal %d), upstreams %d; want 21 (1), 21", s.Routes.Total, s.Routes.Abnormal, s.Upstreams.Total)
	}
	r5, sick := s.Routes.List[0], s.Routes.List[3]
	var sum uint64
	for _, n := range r5.Latency {
		sum += n
	}
	if r5.Requests != 6 || r5.Errors != 0 || sum != 6 || r5.Breaker != "off" || r5.Abnormal || r5.Upstream != "u5" {
		t.Fatalf("r5 %+v", r5)
	}
	if len(r5.Latency) != len(s.LatencyBounds)+1 {
		t.Fatalf("%d latency buckets, %d bounds", len(r5.Latency), len(s.LatencyBounds))
	}
	if sick.Requests != 2 || sick.Errors != 2 || sick.Breaker != "open" || !sick.Abnormal {
		t.Fatalf("sick %+v", sick)
	}
	var upNames []string
	for _, u := range s.Upstreams.List {
		upNames = append(upNames, u.Name)
		if u.Nodes != 1 || len(u.List) != 1 || !u.List[0].Healthy {
			t.Errorf("upstream %+v", u)
		}
	}
	if got, want := strings.Join(upNames, " "), "u5 u7 u9 gone"; got != want {
		t.Fatalf("upstreams listed %q, want %q", got, want)
	}

	// Since that summary only r12 had traffic: it leads, and the rest keep
	// their order by the totals.
	hit("/r12/", 1, 200)
	if got, want := strings.Join(listed(summary(t, g, 3)), " "), "r12 r5 r7 sick"; got != want {
		t.Fatalf("routes listed %q, want %q", got, want)
	}
}

// A route's isolation shows its limit against its base and its queue: a
// request waiting for the one permit makes the route abnormal.
func TestSummaryIsolationQueue(t *testing.T) {
	g, held, release := isolationGateway(t, `{limit: 1, floor: 1, queue: 4, queue_timeout: 10s}`)
	waiting := make(chan fetched, 1)
	go func() { waiting <- fetch(g.url("/queued")) }()
	waitMetric(t, g.srv, `loopgate_route_isolation_waiting{route="r"}`, 1)
	s := summary(t, g, 50)
	if len(s.Routes.List) != 1 || s.Routes.Abnormal != 1 {
		t.Fatalf("routes %+v", s.Routes)
	}
	r := s.Routes.List[0]
	if iso := r.Isolation; iso == nil || iso.Limit != 1 || iso.Base != 1 || iso.InFlight != 1 || iso.Waiting != 1 || iso.Queue != 4 || !r.Abnormal {
		t.Fatalf("route %+v, isolation %+v", r, r.Isolation)
	}
	release()
	expectStatus(t, "the held request", <-held, 200)
	expectStatus(t, "the queued request", <-waiting, 200)
	// The permit is given back when the exchange is done, which may be
	// just after the client has read its response.
	waitFor(t, "the route back to normal in the summary", func() bool {
		s = summary(t, g, 50)
		iso := s.Routes.List[0].Isolation
		return iso.InFlight == 0 && iso.Waiting == 0 && s.Routes.Abnormal == 0
	})
}

// The rate limits: each limit's admitted and refused on this node, the
// busiest first, and no cluster without a cluster limit.
func TestSummaryRateLimits(t *testing.T) {
	g := startGateway(t, `
upstreams: [{name: u, nodes: ["%s"]}]
routes:
  - {id: tight, prefix: /tight/, upstream: u, rate_limits: [{key: route, rate: 0.1, burst: 1}]}
  - {id: wide, prefix: /, upstream: u, rate_limits: [{key: route, rate: 100, burst: 100}]}
`, startUpstream(t, okHandler))
	expectStatus(t, "the first", fetch(g.url("/tight/")), 200)
	expectStatus(t, "over the burst", fetch(g.url("/tight/")), 429)
	expectStatus(t, "over the burst", fetch(g.url("/tight/")), 429)
	waitMetric(t, g.srv, `loopgate_route_requests_total{route="tight",code="4xx"}`, 2)
	rl := summary(t, g, 1).RateLimits.(limiter.Summary)
	if rl.Cluster != nil || rl.Total != 2 || len(rl.List) != 1 {
		t.Fatalf("rate limits %+v", rl)
	}
	if l := rl.List[0]; l.Route != "tight" || l.Admitted != 1 || l.Refused != 2 || l.Scope != "local" {
		t.Fatalf("limit %+v", l)
	}
}

// At 30,000 routes with series, GET /summary stays a few kilobytes (the
// metrics page is tens of megabytes): 50 routes, their upstream, the
// totals. After the first call, which sizes the ranking's map, a summary
// allocates what it answers and no more per route.
func TestSummaryBoundedAt30kRoutes(t *testing.T) {
	if testing.Short() {
		t.Skip("30,000 routes")
	}
	const routes = 30_000
	g := startGateway(t, routesConfig(routes), closedPort(t))
	g.srv.TouchRoutesForTest()
	base := adminPort(t, g)
	first := fetch(base + "/summary")
	if first.err != nil || first.resp.StatusCode != 200 {
		t.Fatalf("GET /summary: %v", first.err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r := fetch(base + "/summary")
	runtime.ReadMemStats(&after)
	if r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("GET /summary: %v", r.err)
	}
	var s engine.Summary
	if err := json.Unmarshal(r.body, &s); err != nil {
		t.Fatal(err)
	}
	if s.Routes.Total != routes || len(s.Routes.List) != 50 || len(s.Upstreams.List) != 1 {
		t.Fatalf("summary: %d of %d routes, %d upstreams", len(s.Routes.List), s.Routes.Total, len(s.Upstreams.List))
	}
	if len(r.body) > 32<<10 {
		t.Fatalf("summary of %d bytes at %d routes", len(r.body), routes)
	}
	// What the HTTP client and server allocate, and the answer; nothing
	// that grows with the routes (16 bytes a route would be 480 kB).
	alloc := after.TotalAlloc - before.TotalAlloc
	if alloc > 256<<10 {
		t.Fatalf("a summary at %d routes allocated %d bytes", routes, alloc)
	}
	t.Logf("summary %d bytes at %d routes; the second allocated %d bytes", len(r.body), routes, alloc)
}

// BenchmarkSummary30k is one summary at 30,000 routes with series: its
// allocations are the answer's, not the routes'.
func BenchmarkSummary30k(b *testing.B) {
	g := startGateway(b, routesConfig(30_000), "127.0.0.1:1")
	g.srv.TouchRoutesForTest()
	g.srv.Summary(50) // sizes the ranking's map
	b.ReportAllocs()
	for b.Loop() {
		g.srv.Summary(50)
	}
}

// An upstream lists its first 32 nodes and counts them all.
func TestSummaryCapsNodes(t *testing.T) {
	var nodes []string
	for i := range 40 {
		nodes = append(nodes, fmt.Sprintf("%q", fmt.Sprintf("127.0.0.1:%d", 20001+i))) // never dialed: no request is sent
	}
	g := startGateway(t, "upstreams: [{name: many, nodes: [%s]}]\nroutes: [{id: r, prefix: /, upstream: many}]\n", strings.Join(nodes, ", "))
	u := summary(t, g, 50).Upstreams
	if u.Total != 1 || len(u.List) != 1 || u.List[0].Nodes != 40 || len(u.List[0].List) != 32 || u.List[0].Out != 0 {
		t.Fatalf("upstreams %+v", u)
	}
}

// An upstream with a node out of rotation is listed though no route shown
// uses it, with the node counted out and shown unhealthy.
func TestSummaryListsUpstreamWithNodeOut(t *testing.T) {
	sick, fine := &checkedNode{}, &checkedNode{}
	sick.sick.Store(true)
	g := startGateway(t, `
upstreams:
  - {name: busy, nodes: ["%s"]}
  - name: backend
    nodes: [%s]
    outlier: {enabled: false}
    health_check: {path: /health, interval: 50ms, stable_interval: 50ms, degraded_interval: 50ms, healthy_threshold: 1, unhealthy_threshold: 1}
routes:
  - {id: busy, prefix: /busy/, upstream: busy}
  - {id: quiet, prefix: /, upstream: backend}
`, startUpstream(t, okHandler), nodeList(startUpstream(t, sick), startUpstream(t, fine)))
	expectStatus(t, "busy", fetch(g.url("/busy/")), 200)
	waitMetric(t, g.srv, `loopgate_route_requests_total{route="busy",code="2xx"}`, 1)
	waitFor(t, "the sick node out", func() bool {
		u := summary(t, g, 1).Upstreams
		return len(u.List) == 2 && u.List[1].Out == 1
	})
	s := summary(t, g, 1)
	if got := strings.Join(listed(s), " "); got != "busy" {
		t.Fatalf("routes listed %q, want busy alone", got)
	}
	if u := s.Upstreams.List[1]; u.Name != "backend" || u.Nodes != 2 || u.List[0].Healthy || !u.List[1].Healthy {
		t.Fatalf("upstream %+v", u)
	}
}
