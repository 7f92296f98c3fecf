// Metrics through real sockets: requests driven through a gateway, then the
// Prometheus text WriteMetrics produces, parsed and checked value by value.

package engine_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine"
)

// scrape is one WriteMetrics output: sample values by series, exactly as
// written ("name{labels}"), and the metric families declared by TYPE lines.
type scrape struct {
	values map[string]float64
	types  map[string]string
	text   string
}

func scrapeMetrics(t *testing.T, srv *engine.Server) scrape {
	t.Helper()
	var b bytes.Buffer
	srv.WriteMetrics(&b)
	s := scrape{values: map[string]float64{}, types: map[string]string{}, text: b.String()}
	sc := bufio.NewScanner(&b)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, typ, _ := strings.Cut(f, " ")
			s.types[name] = typ
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			t.Fatalf("malformed sample line %q", line)
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("sample line %q: %v", line, err)
		}
		if _, dup := s.values[line[:i]]; dup {
			t.Fatalf("series %s written twice", line[:i])
		}
		s.values[line[:i]] = v
	}
	return s
}

// get returns a series' value, failing the test when it is absent.
func (s scrape) get(t *testing.T, series string) float64 {
	t.Helper()
	v, ok := s.values[series]
	if !ok {
		t.Fatalf("series %s missing; have:\n%s", series, s.text)
	}
	return v
}

// sum adds every series of family name whose labels contain all of match.
func (s scrape) sum(name string, match ...string) float64 {
	total := 0.0
	for k, v := range s.values {
		fam, labels, _ := strings.Cut(k, "{")
		if fam != name {
			continue
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(labels, m)
		}
		if ok {
			total += v
		}
	}
	return total
}

// waitMetric polls the metrics until series has value want: an exchange is
// counted as it ends on the loop, which can be just after its client read
// the response.
func waitMetric(t *testing.T, srv *engine.Server, series string, want float64) scrape {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := scrapeMetrics(t, srv)
		if v, ok := s.values[series]; ok && v == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became %v (last %v); metrics:\n%s", series, want, s.values[series], s.text)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// checkHistogram asserts a histogram's shape: cumulative buckets ending in
// +Inf, _count equal to +Inf and to want, and a positive _sum when any.
func checkHistogram(t *testing.T, s scrape, name, labels string, want float64) {
	t.Helper()
	if s.types[name] != "histogram" {
		t.Fatalf("%s has TYPE %q, want histogram", name, s.types[name])
	}
	inf := s.get(t, name+"_bucket{"+labels+`,le="+Inf"}`)
	count := s.get(t, name+"_count{"+labels+"}")
	sum := s.get(t, name+"_sum{"+labels+"}")
	if inf != want || count != want {
		t.Fatalf("%s{%s}: +Inf bucket %v, _count %v, want %v", name, labels, inf, count, want)
	}
	if want > 0 && sum <= 0 {
		t.Fatalf("%s{%s}: _sum %v with %v observations", name, labels, sum, want)
	}
	buckets := 0
	for k := range s.values {
		if strings.HasPrefix(k, name+"_bucket{"+labels+",le=") {
			buckets++
		}
	}
	if buckets != 25 {
		t.Fatalf("%s{%s}: %d buckets, want 25", name, labels, buckets)
	}
	// Cumulative: every finite bucket is at most the next one.
	prev := 0.0
	for _, le := range []string{"0.000001", "0.00001", "0.0001", "0.001", "0.01", "0.1", "1", "10", "60", "+Inf"} {
		v := s.get(t, name+"_bucket{"+labels+`,le="`+le+`"}`)
		if v < prev {
			t.Fatalf("%s{%s}: bucket le=%s is %v, below the one before it (%v)", name, labels, le, v, prev)
		}
		prev = v
	}
}

// TestMetricsRoutes drives successes, a dead node, a filter rejection, a
// request for no route and an unparseable request, and checks every route
// series by exact value.
func TestMetricsRoutes(t *testing.T) {
	up := startUpstream(t, okHandler)
	dead := closedPort(t)
	g := startGateway(t, `
upstreams:
  - name: live
    nodes: ["%s"]
  - name: gone
    nodes: ["%s"]
routes:
  - {id: ok, prefix: /ok, upstream: live}
  - {id: dead, prefix: /dead, upstream: gone}
  - {id: denied, prefix: /denied, upstream: live, ip_deny: ["127.0.0.0/8"]}
`, up, dead)
	c := g.client(t)
	for i := 0; i < 3; i++ {
		if resp, body := c.get("/ok"); resp.StatusCode != 200 {
			t.Fatalf("/ok: %d %s", resp.StatusCode, body)
		}
	}
	for i := 0; i < 2; i++ {
		resp, body := c.get("/dead")
		expectError(t, resp, body, 502, 50201)
	}
	resp, body := c.get("/denied")
	expectError(t, resp, body, 403, 40302)
	resp, body = c.get("/nowhere")
	expectError(t, resp, body, 404, 40401)
	resp, body = g.rawExchange(t, "GET /ok HTTP/1.1\r\nHost: test\r\nBad Header: x\r\n\r\n")
	expectError(t, resp, body, 400, 40001)

	s := waitMetric(t, g.srv, `loopgate_route_requests_total{route="(unrouted)",code="4xx"}`, 2)
	for series, want := range map[string]float64{
		`loopgate_route_requests_total{route="ok",code="2xx"}`:             3,
		`loopgate_route_requests_total{route="ok",code="5xx"}`:             0,
		`loopgate_route_requests_total{route="dead",code="5xx"}`:           2,
		`loopgate_route_requests_total{route="dead",code="2xx"}`:           0,
		`loopgate_route_requests_total{route="denied",code="4xx"}`:         1,
		`loopgate_route_rejections_total{route="dead",code="50201"}`:       2,
		`loopgate_route_rejections_total{route="denied",code="40302"}`:     1,
		`loopgate_route_rejections_total{route="(unrouted)",code="40401"}`: 1,
		`loopgate_route_rejections_total{route="(unrouted)",code="40001"}`: 1,
		`loopgate_route_requests_in_flight{route="ok"}`:                    0,
		`loopgate_route_requests_in_flight{route="dead"}`:                  0,
	} {
		if got := s.get(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if n := s.sum("loopgate_route_rejections_total", `route="ok"`); n != 0 {
		t.Errorf("route ok has %v rejections, want 0", n)
	}
	checkHistogram(t, s, "loopgate_route_request_duration_seconds", `route="ok"`, 3)
	checkHistogram(t, s, "loopgate_route_request_duration_seconds", `route="dead"`, 2)
	checkHistogram(t, s, "loopgate_route_request_duration_seconds", `route="(unrouted)"`, 2)

	// Every exchange counted once: the route counts add up to the requests
	// the loops started, plus the one that never parsed.
	started := s.sum("loopgate_loop_requests_total")
	if started != 7 || float64(g.srv.Requests()) != started {
		t.Errorf("loops started %v requests (Server.Requests %d), want 7", started, g.srv.Requests())
	}
	if routed := s.sum("loopgate_route_requests_total"); routed != started+1 {
		t.Errorf("routes counted %v requests, want %v", routed, started+1)
	}

	// The dead node: every dial failed; the live one answered three times.
	for series, want := range map[string]float64{
		fmt.Sprintf(`loopgate_upstream_connects_total{upstream="gone",node="%s"}`, dead):         2,
		fmt.Sprintf(`loopgate_upstream_connect_failures_total{upstream="gone",node="%s"}`, dead): 2,
		fmt.Sprintf(`loopgate_upstream_connect_failures_total{upstream="live",node="%s"}`, up):   0,
		fmt.Sprintf(`loopgate_upstream_resets_total{upstream="live",node="%s"}`, up):             0,
		fmt.Sprintf(`loopgate_upstream_pool_active_connections{upstream="live",node="%s"}`, up):  0,
		fmt.Sprintf(`loopgate_upstream_pool_idle_connections{upstream="live",node="%s"}`, up):    1,
		fmt.Sprintf(`loopgate_upstream_connects_total{upstream="live",node="%s"}`, up):           1,
		fmt.Sprintf(`loopgate_upstream_pool_idle_connections{upstream="gone",node="%s"}`, dead):  0,
	} {
		if got := s.get(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	checkHistogram(t, s, "loopgate_upstream_first_byte_seconds", fmt.Sprintf(`upstream="live",node="%s"`, up), 3)
	checkHistogram(t, s, "loopgate_upstream_first_byte_seconds", fmt.Sprintf(`upstream="gone",node="%s"`, dead), 0)

	// Filters: the default chain (request_id, ip_access, forwarded) on every
	// route; the rejected request ran only up to ip_access.
	for _, f := range []string{"request_id", "ip_access", "forwarded"} {
		checkHistogram(t, s, "loopgate_filter_self_seconds", `route="ok",filter="`+f+`"`, 3)
		checkHistogram(t, s, "loopgate_filter_total_seconds", `route="ok",filter="`+f+`"`, 3)
	}
	checkHistogram(t, s, "loopgate_filter_self_seconds", `route="denied",filter="ip_access"`, 1)
	if _, ok := s.values[`loopgate_filter_self_seconds_count{route="denied",filter="forwarded"}`]; ok {
		t.Errorf("a filter no request reached has series")
	}
	// A filter's total time covers the upstream, its self time does not.
	self := s.get(t, `loopgate_filter_self_seconds_sum{route="ok",filter="request_id"}`)
	total := s.get(t, `loopgate_filter_total_seconds_sum{route="ok",filter="request_id"}`)
	if total <= self {
		t.Errorf("request_id on route ok: total time %v, self time %v", total, self)
	}
}

// TestMetricsInFlightAndClientGone: a request held by a slow upstream is in
// flight and keeps its upstream connection active; when its client leaves
// it is counted once, as 499 (class 4xx), with no rejection code.
func TestMetricsInFlightAndClientGone(t *testing.T) {
	release := make(chan struct{})
	up := startRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		<-release
	})
	defer close(release)
	g := startGateway(t, `
upstreams:
  - name: slow
    nodes: ["%s"]
routes:
  - {id: slow, prefix: /, upstream: slow}
`, up)
	c := g.client(t)
	c.send("GET /slow HTTP/1.1\r\nHost: test\r\n\r\n")
	waitMetric(t, g.srv, `loopgate_route_requests_in_flight{route="slow"}`, 1)
	// The request is in flight from its first byte; its connection is
	// active once the dial, off the loop, has come back.
	s := waitMetric(t, g.srv, fmt.Sprintf(`loopgate_upstream_pool_active_connections{upstream="slow",node="%s"}`, up), 1)
	if got := s.sum("loopgate_loop_connections"); got != 1 {
		t.Errorf("open client connections %v, want 1", got)
	}
	c.Close()
	waitMetric(t, g.srv, `loopgate_route_requests_in_flight{route="slow"}`, 0)
	// A page is not one instant: the count may be read before the exchange
	// ends and the in-flight gauge after it, so wait for the count too.
	s = waitMetric(t, g.srv, `loopgate_route_requests_total{route="slow",code="4xx"}`, 1)
	if got := s.get(t, `loopgate_route_requests_total{route="slow",code="4xx"}`); got != 1 {
		t.Errorf("requests 4xx %v, want 1 (the 499)", got)
	}
	if got := s.sum("loopgate_route_requests_total"); got != 1 {
		t.Errorf("requests counted %v times, want once", got)
	}
	if got := s.sum("loopgate_route_rejections_total"); got != 0 {
		t.Errorf("rejections %v, want 0: the gateway answered nothing", got)
	}
	checkHistogram(t, s, "loopgate_route_request_duration_seconds", `route="slow"`, 1)
	waitMetric(t, g.srv, fmt.Sprintf(`loopgate_upstream_pool_active_connections{upstream="slow",node="%s"}`, up), 0)
	waitMetric(t, g.srv, `loopgate_loop_connections{loop="0"}`, 0)
	waitMetric(t, g.srv, `loopgate_loop_connections{loop="1"}`, 0)
}

// TestMetricsUpstreamFailures: a node that resets the connection and one
// that never answers are counted as resets and timeouts.
func TestMetricsUpstreamFailures(t *testing.T) {
	reset := startScriptedUpstream(t, func(c *upConn) { _, _ = c.read() })
	hang := make(chan struct{})
	defer close(hang)
	silent := startScriptedUpstream(t, func(c *upConn) {
		_, _ = c.read()
		<-hang
	})
	g := startGateway(t, `
upstreams:
  - name: reset
    nodes: ["%s"]
  - name: silent
    nodes: ["%s"]
    response_timeout: 100ms
routes:
  - {id: reset, prefix: /reset, upstream: reset}
  - {id: silent, prefix: /silent, upstream: silent}
`, reset.addr, silent.addr)
	c := g.client(t)
	resp, body := c.get("/reset")
	expectError(t, resp, body, 502, 50202)
	resp, body = c.get("/silent")
	expectError(t, resp, body, 504, 50401)

	s := waitMetric(t, g.srv, `loopgate_route_requests_total{route="silent",code="5xx"}`, 1)
	for series, want := range map[string]float64{
		fmt.Sprintf(`loopgate_upstream_resets_total{upstream="reset",node="%s"}`, reset.addr):     1,
		fmt.Sprintf(`loopgate_upstream_timeouts_total{upstream="reset",node="%s"}`, reset.addr):   0,
		fmt.Sprintf(`loopgate_upstream_timeouts_total{upstream="silent",node="%s"}`, silent.addr): 1,
		fmt.Sprintf(`loopgate_upstream_resets_total{upstream="silent",node="%s"}`, silent.addr):   0,
		fmt.Sprintf(`loopgate_upstream_connects_total{upstream="silent",node="%s"}`, silent.addr): 1,
		`loopgate_route_rejections_total{route="reset",code="50202"}`:                             1,
		`loopgate_route_rejections_total{route="silent",code="50401"}`:                            1,
	} {
		if got := s.get(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	checkHistogram(t, s, "loopgate_upstream_first_byte_seconds", fmt.Sprintf(`upstream="silent",node="%s"`, silent.addr), 0)
}

// TestMetricsUntouchedAbsent: a route, node or filter no request has
// reached writes no series (a config of thousands of routes would
// otherwise make a page of zeros), while the process-wide and per-loop
// series are there from the start, each with its TYPE. A request makes
// its route's, node's and filters' series appear.
func TestMetricsUntouchedAbsent(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, `
upstreams:
  - name: backend
    nodes: ["%s"]
routes:
  - {id: a, prefix: /a, upstream: backend}
  - {id: b, prefix: /b, upstream: backend, disable_filters: [forwarded]}
`, up)
	s := scrapeMetrics(t, g.srv)
	for _, series := range []string{
		`loopgate_loop_requests_total{loop="0"}`,
		`loopgate_loop_connections{loop="1"}`,
		`loopgate_connections_refused_total`,
		`loopgate_buffered_bytes`,
		`loopgate_memory_returns_total`,
		`loopgate_config_version`,
		`go_gc_duration_seconds_count`,
		`go_goroutines`,
		`process_open_fds`,
	} {
		s.get(t, series)
	}
	for k := range s.values {
		for _, untouched := range []string{"loopgate_route_", "loopgate_upstream_", "loopgate_filter_"} {
			if strings.HasPrefix(k, untouched) && !strings.HasPrefix(k, "loopgate_upstream_node_") &&
				!strings.HasPrefix(k, "loopgate_upstream_retries") {
				t.Errorf("series %s before any request", k)
			}
		}
	}
	for fam, typ := range map[string]string{
		"loopgate_route_requests_total":             "counter",
		"loopgate_route_requests_in_flight":         "gauge",
		"loopgate_route_request_duration_seconds":   "histogram",
		"loopgate_upstream_pool_active_connections": "gauge",
		"loopgate_filter_total_seconds":             "histogram",
	} {
		if s.types[fam] != typ {
			t.Errorf("%s has TYPE %q, want %s", fam, s.types[fam], typ)
		}
	}

	if r := fetch(g.url("/a/x")); r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("/a/x: %v", r.err)
	}
	s = waitMetric(t, g.srv, `loopgate_route_requests_total{route="a",code="2xx"}`, 1)
	for _, series := range []string{
		`loopgate_route_requests_in_flight{route="a"}`,
		fmt.Sprintf(`loopgate_upstream_connects_total{upstream="backend",node="%s"}`, up),
		`loopgate_filter_self_seconds_count{route="a",filter="forwarded"}`,
	} {
		s.get(t, series)
	}
	if _, ok := s.values[`loopgate_route_requests_in_flight{route="b"}`]; ok {
		t.Errorf("route b has series with no request")
	}
}

// TestMetricsRefusedConnections: connections over max_connections are
// counted.
func TestMetricsRefusedConnections(t *testing.T) {
	g := startGateway(t, "limits: {max_connections: 1}\n"+oneRoute, closedPort(t))
	g.dial(t)
	waitFor(t, "the first connection to be open", func() bool { return g.srv.Clients() == 1 })
	extra, err := net.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadAll(extra); err != nil {
		t.Fatalf("refused connection: %v", err)
	}
	s := waitMetric(t, g.srv, "loopgate_connections_refused_total", 1)
	if got := s.sum("loopgate_loop_connections"); got != 1 {
		t.Errorf("open connections %v, want 1", got)
	}
}

// metrics.per_request: false leaves the route series at zero (the benchmark's
// plain row), while the loop's request counter and the in-flight gauge
// still move.
func TestMetricsPerRequestOff(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, `
metrics: {per_request: false}
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: api, prefix: /api, upstream: backend}
`, up)
	for _, p := range []string{"/api/x", "/nowhere"} {
		if r := fetch(g.url(p)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	s := waitMetric(t, g.srv, `loopgate_route_requests_in_flight{route="api"}`, 0)
	if got := s.sum("loopgate_loop_requests_total"); got != 2 {
		t.Errorf("loop requests %v, want 2", got)
	}
	if got := s.sum("loopgate_route_requests_total"); got != 0 {
		t.Errorf("route requests %v with per_request off", got)
	}
	if got := s.sum("loopgate_route_rejections_total"); got != 0 {
		t.Errorf("route rejections %v with per_request off", got)
	}
	checkHistogram(t, s, "loopgate_route_request_duration_seconds", `route="api"`, 0)
}

// The build and reload facts: the version labels, the running config
// version, and reloads counted by result, the success time moving only on
// an applied one.
func TestMetricsBuildAndReloads(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, oneRoute, up)
	s := scrapeMetrics(t, g.srv)
	if s.get(t, "loopgate_config_version") != 1 || s.get(t, `loopgate_config_reloads_total{result="success"}`) != 0 {
		t.Fatalf("at start: version %v, reloads %v", s.values["loopgate_config_version"], s.values[`loopgate_config_reloads_total{result="success"}`])
	}
	started := s.get(t, "loopgate_config_last_reload_success_timestamp_seconds")
	if now := float64(time.Now().Unix()); started < now-60 || started > now+1 {
		t.Fatalf("last reload time %v, now %v", started, now)
	}
	build := ""
	for k := range s.values {
		if strings.HasPrefix(k, "loopgate_build_info{") {
			build = k
		}
	}
	if !strings.Contains(build, `version="`) || !strings.Contains(build, `goversion="go`) || s.values[build] != 1 {
		t.Fatalf("build info %q = %v", build, s.values[build])
	}

	g.reload(t, oneRoute, up)
	if _, err := g.srv.Reload(parseTestConfig(t, "pin: true\n"+oneRoute, up)); err == nil {
		t.Fatal("a reload changing pin was applied")
	}
	g.srv.CountFailedReload() // a file that did not load, as the command counts it
	s = scrapeMetrics(t, g.srv)
	for series, want := range map[string]float64{
		"loopgate_config_version":                         2,
		`loopgate_config_reloads_total{result="success"}`: 1,
		`loopgate_config_reloads_total{result="failure"}`: 2,
	} {
		if got := s.get(t, series); got != want {
			t.Errorf("%s = %v, want %v", series, got, want)
		}
	}
	if s.get(t, "loopgate_config_last_reload_success_timestamp_seconds") < started {
		t.Errorf("the success time went back")
	}
}
