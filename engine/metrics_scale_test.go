// The metrics page at scale, through a real gateway and its admin port:
// removed routes' series go away, a page of 30,000 routes streams in
// bounded memory, and promtool accepts the whole page.

package engine_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/admin"
)

// adminPort serves g's admin endpoints on a free port until the test ends
// and returns its base URL.
func adminPort(t *testing.T, g *gateway) string {
	t.Helper()
	a, err := admin.Listen("127.0.0.1:0", g.srv, nil, admin.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return "http://" + a.Addr()
}

// getMetricsPage GETs /metrics from the admin port.
func getMetricsPage(t *testing.T, base string) string {
	t.Helper()
	r := fetch(base + "/metrics")
	if r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %v", r.err)
	}
	return string(r.body)
}

// routesConfig is n exact-path routes /r0 ... to one upstream (one %s).
func routesConfig(n int) string {
	var b strings.Builder
	b.WriteString("upstreams:\n  - {name: backend, nodes: [\"%s\"]}\nroutes:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {id: r%d, path: /r%d, upstream: backend}\n", i, i)
	}
	return b.String()
}

// hasRoute reports whether page has any series of the route id.
func hasRoute(page, id string) bool { return strings.Contains(page, `route="`+id+`"`) }

// A reload from 5,000 routes to 2: the removed routes' series (their
// filters' included) leave the page, except a removed route with a request
// still in flight, whose series go once that request has finished. The
// kept route keeps its counts; the added one, untouched, writes nothing.
func TestMetricsRemovedRoutesGo(t *testing.T) {
	hold, holding := make(chan struct{}), make(chan struct{})
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/r7" {
			close(holding)
			<-hold
		}
		io.WriteString(w, "ok")
	}))
	g := startGateway(t, routesConfig(5000), up)
	base := adminPort(t, g)
	for i := 1; i <= 20; i++ {
		if i == 7 {
			continue
		}
		if r := fetch(g.url(fmt.Sprintf("/r%d", i))); r.err != nil || r.resp.StatusCode != 200 {
			t.Fatalf("/r%d: %v", i, r.err)
		}
	}
	held := make(chan fetched, 1)
	go func() { held <- fetch(g.url("/r7")) }()
	<-holding
	waitMetric(t, g.srv, `loopgate_route_requests_total{route="r20",code="2xx"}`, 1)
	page := getMetricsPage(t, base)
	for _, id := range []string{"r1", "r2", "r7", "r20"} {
		if !hasRoute(page, id) {
			t.Fatalf("route %s has no series before the reload", id)
		}
	}
	if hasRoute(page, "r21") || hasRoute(page, "r4999") {
		t.Fatalf("routes no request reached have series")
	}

	g.reload(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: r1, path: /r1, upstream: backend}
  - {id: added, path: /added, upstream: backend}
`, up)
	deadline := time.Now().Add(10 * time.Second)
	for page = getMetricsPage(t, base); hasRoute(page, "r2"); page = getMetricsPage(t, base) {
		if time.Now().After(deadline) {
			t.Fatalf("removed route r2 still has series:\n%s", grepLines(page, `route="r2"`))
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := 2; i <= 20; i++ {
		if id := fmt.Sprintf("r%d", i); i != 7 && hasRoute(page, id) {
			t.Errorf("removed route %s still has series", id)
		}
	}
	if !strings.Contains(page, `loopgate_route_requests_in_flight{route="r7"} 1`) {
		t.Fatalf("removed route r7, with a request in flight, lost its series:\n%s", grepLines(page, `route="r7"`))
	}
	if !strings.Contains(page, `loopgate_route_requests_total{route="r1",code="2xx"} 1`) {
		t.Errorf("kept route r1 lost its count:\n%s", grepLines(page, `route="r1"`))
	}
	if hasRoute(page, "added") {
		t.Errorf("added route has series before any request")
	}

	close(hold)
	if r := <-held; r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("held request: %v", r.err)
	}
	for page = getMetricsPage(t, base); hasRoute(page, "r7"); page = getMetricsPage(t, base) {
		if time.Now().After(deadline) {
			t.Fatalf("removed route r7 kept its series after its last request:\n%s", grepLines(page, `route="r7"`))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !hasRoute(page, "r1") {
		t.Errorf("kept route r1 lost its series")
	}
}

// grepLines returns page's lines that contain s.
func grepLines(page, s string) string {
	var out []string
	for _, l := range strings.Split(page, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// chunkWriter records the sizes of the writes it gets.
type chunkWriter struct {
	n, writes, largest int
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	c.writes++
	c.largest = max(c.largest, len(p))
	return len(p), nil
}

// With 30,000 routes that all have series, the page (tens of megabytes)
// is written in chunks of at most 32 KiB, and a scrape through the admin
// port allocates a small fraction of the page: nothing holds it whole.
func TestMetricsLargePageStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("30,000 routes")
	}
	const routes = 30_000
	g := startGateway(t, routesConfig(routes), closedPort(t))
	g.srv.TouchRoutesForTest()
	base := adminPort(t, g)

	var cw chunkWriter
	g.srv.WriteMetrics(&cw)
	if cw.n < routes*1000 {
		t.Fatalf("page of %d bytes for %d routes with series", cw.n, routes)
	}
	if cw.largest > 32<<10 || cw.writes < cw.n/(32<<10) {
		t.Fatalf("page of %d bytes in %d writes, the largest %d: not streamed", cw.n, cw.writes, cw.largest)
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	// A 69 MB page under the race detector on a loaded machine can take
	// longer than testClient's 10 s; what is asserted is its memory.
	slow := &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{}}
	resp, err := slow.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	// TotalAlloc counts every byte allocated, collected or not, so GC
	// timing cannot hide a page built whole. What a scrape may allocate is
	// the copy of the registry's lists and the buffers: 16 bytes a route,
	// and a few megabytes of slack for the HTTP client and server.
	alloc := after.TotalAlloc - before.TotalAlloc
	if limit := uint64(routes*16 + 4<<20); alloc > limit {
		t.Fatalf("a scrape of %d bytes allocated %d bytes (limit %d)", n, alloc, limit)
	}
	t.Logf("page %d bytes, %d writes of at most %d bytes; the scrape allocated %d bytes", cw.n, cw.writes, cw.largest, alloc)
}

// promtool check metrics accepts the whole page of a running gateway that
// has served, failed and rejected requests: every family, the Go runtime's
// and process's included, has HELP and TYPE and passes its lint.
func TestMetricsPromtoolClean(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian: apt-get install prometheus; make test installs it)")
	}
	up := startUpstream(t, okHandler)
	g := startGateway(t, `
upstreams:
  - {name: live, nodes: ["%s"]}
  - {name: gone, nodes: ["%s"], retry_budget: {percent: 20}}
routes:
  - {id: ok, prefix: /ok, upstream: live}
  - id: dead
    prefix: /dead
    upstream: gone
    circuit_breaker: {}
    isolation: {}
  - {id: denied, prefix: /denied, upstream: live, ip_deny: ["127.0.0.0/8"]}
`, up, closedPort(t))
	base := adminPort(t, g)
	for _, p := range []string{"/ok", "/ok", "/dead", "/denied", "/nowhere"} {
		if r := fetch(g.url(p)); r.err != nil {
			t.Fatal(r.err)
		}
	}
	waitMetric(t, g.srv, `loopgate_route_requests_total{route="(unrouted)",code="4xx"}`, 1)
	page := getMetricsPage(t, base)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(page)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out.String())
	}
	for _, fam := range []string{"loopgate_build_info", "loopgate_config_version", "loopgate_config_reloads_total",
		"loopgate_config_last_reload_success_timestamp_seconds", "go_goroutines", "process_open_fds",
		"loopgate_route_breaker_state", "loopgate_route_isolation_limit"} {
		if !strings.Contains(page, "# TYPE "+fam+" ") {
			t.Errorf("family %s missing from the page", fam)
		}
	}
}

// A route's filter series follow its chain: a reload that drops a filter
// from a kept route takes that filter's series off the page (once no
// request of the older version can record into it), the route's other
// filters count on from before the reload, and a route added with the same
// filters writes none of them until a request reaches it.
func TestMetricsFilterSeriesFollowTheChain(t *testing.T) {
	up := startUpstream(t, okHandler)
	const cfg = `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: a, prefix: /a, upstream: backend%s}
%s`
	g := startGateway(t, cfg, up, "", "")
	if r := fetch(g.url("/a")); r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("/a: %v", r.err)
	}
	series := func(filter string) string {
		return `loopgate_filter_self_seconds_count{route="a",filter="` + filter + `"}`
	}
	s := waitMetric(t, g.srv, series("forwarded"), 1)
	s.get(t, series("request_id"))

	g.reload(t, cfg, up, ", disable_filters: [forwarded]", "  - {id: b, prefix: /b, upstream: backend}\n")
	if r := fetch(g.url("/a")); r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("/a after the reload: %v", r.err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s = waitMetric(t, g.srv, series("request_id"), 2); ; s = scrapeMetrics(t, g.srv) {
		if _, ok := s.values[series("forwarded")]; !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dropped filter's series stayed:\n%s", grepLines(s.text, `filter="forwarded"`))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if v := s.get(t, series("ip_access")); v != 2 {
		t.Errorf("ip_access counted %v requests across the reload, want 2", v)
	}
	if strings.Contains(s.text, `route="b"`) {
		t.Errorf("route b has series before any request:\n%s", grepLines(s.text, `route="b"`))
	}
}

// A reload drops a filter from a route while a request of the older
// version is in flight on it, the route's first: that request records
// the dropped filter as it ends, after the reload was applied, and a
// request of the new version keeps the route busy throughout. The
// filter's series still go once the older request has ended, at a later
// scrape, with no reload since and the route never idle.
func TestMetricsDroppedFilterSeriesGoOnABusyRoute(t *testing.T) {
	arrived := make(chan string, 2)
	gates := map[string]chan struct{}{"/a/old": make(chan struct{}), "/a/new": make(chan struct{})}
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.URL.Path
		<-gates[r.URL.Path]
		io.WriteString(w, "ok")
	}))
	const cfg = `
upstreams:
  - {name: backend, nodes: ["%s"], response_timeout: 30s}
routes:
  - {id: a, prefix: /a, upstream: backend%s}
`
	g := startGateway(t, cfg, up, "")
	released := map[string]bool{}
	release := func(path string) {
		if !released[path] {
			released[path] = true
			close(gates[path])
		}
	}
	t.Cleanup(func() { release("/a/old"); release("/a/new") }) // before the gateway's shutdown
	get := func(path string) chan fetched {
		done := make(chan fetched, 1)
		go func() { done <- fetch(g.url(path)) }()
		if p := <-arrived; p != path {
			t.Fatalf("the upstream got %s, want %s", p, path)
		}
		return done
	}
	served := func(done chan fetched) {
		t.Helper()
		if r := <-done; r.err != nil || r.resp.StatusCode != 200 {
			t.Fatalf("request: %v %v", r.err, r.resp)
		}
	}
	series := func(filter string) string {
		return `loopgate_filter_self_seconds_count{route="a",filter="` + filter + `"}`
	}

	old := get("/a/old")
	g.reload(t, cfg, up, ", disable_filters: [forwarded]")
	busy := get("/a/new")
	release("/a/old")
	served(old)
	waitMetric(t, g.srv, series("request_id"), 1) // the older chain recorded, forwarded with it
	deadline := time.Now().Add(5 * time.Second)   // well within testClient's timeout, which would end the newer request
	for s := scrapeMetrics(t, g.srv); ; s = scrapeMetrics(t, g.srv) {
		if _, ok := s.values[series("forwarded")]; !ok {
			if n := s.get(t, `loopgate_route_requests_in_flight{route="a"}`); n != 1 {
				t.Fatalf("route a has %v requests in flight, want the newer one: the route must be busy", n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dropped filter's series stayed on a busy route:\n%s", grepLines(s.text, `filter="forwarded"`))
		}
		time.Sleep(5 * time.Millisecond)
	}
	release("/a/new")
	served(busy)
	s := waitMetric(t, g.srv, series("request_id"), 2)
	if _, ok := s.values[series("forwarded")]; ok {
		t.Errorf("the newer chain made the dropped filter's series again:\n%s", grepLines(s.text, `filter="forwarded"`))
	}
}
