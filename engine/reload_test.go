// Live reload through real sockets: routes and upstreams added and removed,
// pools of removed upstreams draining and closing, filters changing,
// refusals, requests in flight across a reload, what survives a reload,
// and reloads under load.

package engine_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine"
	"github.com/loopgate/loopgate/engine/config"
)

// countingUpstream is an HTTP upstream that counts the connections open to
// it, as its own server sees them: a closed pool shows up here.
type countingUpstream struct {
	addr string
	open atomic.Int64
}

func startCountingUpstream(t *testing.T, h http.Handler) *countingUpstream {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cu := &countingUpstream{addr: ln.Addr().String()}
	srv := &http.Server{Handler: h, ConnState: func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			cu.open.Add(1)
		case http.StateClosed, http.StateHijacked:
			cu.open.Add(-1)
		}
	}}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return cu
}

// textHandler answers every request with body.
func textHandler(body string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, body) })
}

// parseTestConfig is config.Parse of the fixed part startGateway adds
// (listen, admin, two loops) and yaml with args substituted.
func parseTestConfig(t *testing.T, yaml string, args ...any) *config.Config {
	t.Helper()
	text := "listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 2\n" + fmt.Sprintf(yaml, args...)
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	return cfg
}

// reload reloads g with yaml, as parseTestConfig builds it, and fails the
// test if the reload is refused.
func (g *gateway) reload(t *testing.T, yaml string, args ...any) string {
	t.Helper()
	line, err := g.srv.Reload(parseTestConfig(t, yaml, args...))
	if err != nil {
		t.Fatalf("reload: %v", err)
	}
	if strings.Contains(line, "\n") {
		t.Fatalf("reload reported more than one line: %q", line)
	}
	return line
}

// getText GETs path on c and returns the status and body.
func getText(c *rawClient, path string) (int, string) {
	c.t.Helper()
	resp, body := c.get(path)
	return resp.StatusCode, string(body)
}

// A reload adds a route and an upstream and removes another: the new route
// answers at once, the removed one is a 404, and the removed upstream's
// pools close their idle connections at once and the busy one once its
// request has finished, on every loop, with no further traffic needed.
func TestReloadAddsAndRemovesRoutes(t *testing.T) {
	const warm = 4
	var arrived atomic.Int64
	allIn, slowIn, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	a := startCountingUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/a/warm": // held until warm requests are in, so each has a connection
			if arrived.Add(1) == warm {
				close(allIn)
			}
			<-allIn
		case "/a/slow":
			close(slowIn)
			<-release
		}
		io.WriteString(w, "A")
	}))
	b := startCountingUpstream(t, textHandler("B"))
	c := startCountingUpstream(t, textHandler("C"))
	const v1 = `
upstreams:
  - {name: a, nodes: ["%s"]}
  - {name: b, nodes: ["%s"]}
routes:
  - {id: a, prefix: /a/, upstream: a}
  - {id: b, prefix: /b/, upstream: b}
`
	g := startGateway(t, v1, a.addr, b.addr)

	var wg sync.WaitGroup
	for i := 0; i < warm; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := fetch(g.url("/a/warm")); r.err != nil || r.resp.StatusCode != 200 {
				t.Errorf("warm-up request: %v", r.err)
			}
		}()
	}
	wg.Wait()
	if n := a.open.Load(); n != warm {
		t.Fatalf("%d connections to a after %d concurrent requests, want %d", n, warm, warm)
	}
	slow := make(chan fetched, 1)
	go func() { slow <- fetch(g.url("/a/slow")) }()
	<-slowIn

	line := g.reload(t, `
upstreams:
  - {name: b, nodes: ["%s"]}
  - {name: c, nodes: ["%s"]}
routes:
  - {id: b, prefix: /b/, upstream: b}
  - {id: c, prefix: /c/, upstream: c}
`, b.addr, c.addr)
	for _, want := range []string{"config v2", "routes added [c], removed [a]", "upstreams added [c], removed [a]"} {
		if !strings.Contains(line, want) {
			t.Errorf("reload said %q, want it to contain %q", line, want)
		}
	}
	if g.srv.Version() != 2 {
		t.Errorf("version %d after one reload", g.srv.Version())
	}

	// No request has reached the gateway since the reload: the loops
	// retire a's pools on their own, and only the busy connection stays.
	waitFor(t, "idle connections to the removed upstream to close", func() bool { return a.open.Load() == 1 })

	cl := g.client(t)
	if st, body := getText(cl, "/c/x"); st != 200 || body != "C" {
		t.Fatalf("new route: %d %q", st, body)
	}
	resp, body := cl.get("/a/x")
	expectError(t, resp, body, 404, 40401)
	if st, body := getText(cl, "/b/x"); st != 200 || body != "B" {
		t.Fatalf("kept route: %d %q", st, body)
	}

	close(release)
	if r := <-slow; r.err != nil || r.resp.StatusCode != 200 || string(r.body) != "A" {
		t.Fatalf("request in flight across the reload: %+v", r)
	}
	waitFor(t, "the removed upstream's last connection to close", func() bool { return a.open.Load() == 0 })
}

// A request that began before a reload finishes on the config it began
// with, even when the reload removed its route and upstream and changed its
// filters; the next request sees the new config.
func TestReloadInFlightKeepsItsSnapshot(t *testing.T) {
	old := startCountingUpstream(t, textHandler("old"))
	next := startUpstream(t, textHandler("next"))
	g := startGateway(t, `
upstreams:
  - {name: old, nodes: ["%s"]}
routes:
  - id: post
    path: /post
    upstream: old
    response_headers: {set: {X-Version: "1"}}
`, old.addr)
	cl := g.client(t)
	// The body is held whole before an upstream is asked (it is under
	// request_buffer_bytes), so the request waits with its head parsed,
	// routed and filtered while the config changes under it.
	cl.send("POST /post HTTP/1.1\r\nHost: test\r\nContent-Length: 5\r\n\r\n")
	waitFor(t, "the request to start", func() bool { return g.srv.Requests() == 1 })
	g.reload(t, `
upstreams:
  - {name: next, nodes: ["%s"]}
routes:
  - id: post2
    path: /post2
    upstream: next
    response_headers: {set: {X-Version: "2"}}
`, next)
	cl.send("hello")
	resp, body := readResponse(t, cl.br, "POST")
	if resp.StatusCode != 200 || string(body) != "old" || resp.Header.Get("X-Version") != "1" {
		t.Fatalf("in-flight request: %d %q X-Version %q, want 200 \"old\" from the config it began with",
			resp.StatusCode, body, resp.Header.Get("X-Version"))
	}
	waitFor(t, "the retired pool to close its connection", func() bool { return old.open.Load() == 0 })
	resp, body = cl.get("/post")
	expectError(t, resp, body, 404, 40401)
	if resp, body = cl.get("/post2"); resp.StatusCode != 200 || string(body) != "next" || resp.Header.Get("X-Version") != "2" {
		t.Fatalf("after the reload: %d %q", resp.StatusCode, body)
	}
}

// A changed filter takes effect on the very next request, on a keep-alive
// connection that predates the reload, reload after reload.
func TestReloadChangesFilters(t *testing.T) {
	up := startUpstream(t, okHandler)
	const cfg = `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - id: all
    prefix: /
    upstream: backend
    response_headers: {set: {X-Version: "%d"}}
`
	g := startGateway(t, cfg, up, 1)
	cl := g.client(t)
	for v := 1; v <= 20; v++ {
		if v > 1 {
			if line := g.reload(t, cfg, up, v); !strings.Contains(line, "routes changed [all]") {
				t.Fatalf("reload said %q", line)
			}
		}
		resp, body := cl.get("/x")
		if got := resp.Header.Get("X-Version"); resp.StatusCode != 200 || got != fmt.Sprint(v) {
			t.Fatalf("reload %d: status %d X-Version %q: %s", v, resp.StatusCode, got, body)
		}
	}
	// A global filter list change: ip_access with a deny list refuses the
	// test's own address from the next request on.
	line := g.reload(t, `
ip_deny: ["127.0.0.0/8"]
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up)
	if !strings.Contains(line, "filters changed [ip_access]") {
		t.Errorf("reload said %q", line)
	}
	resp, body := cl.get("/x")
	expectError(t, resp, body, 403, 40302)
}

// Settings that only a restart can change are refused, each by name, and
// the running config keeps serving: nothing of the refused config applies.
func TestReloadRefusesFixedSettings(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, oneRoute, up)
	const rest = `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: all, prefix: /, upstream: backend}
  - {id: new, prefix: /new/, upstream: backend, response_headers: {set: {X-New: "1"}}}
`
	for _, tc := range []struct{ name, head string }{
		{"listen", "listen: 127.0.0.1:1\nadmin: \"off\"\nloops: 2\n"},
		{"loops", "listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 3\n"},
		{"pin", "listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 2\npin: true\n"},
		{"admin", "listen: 127.0.0.1:0\nadmin: 127.0.0.1:9\nloops: 2\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.head + fmt.Sprintf(rest, up)))
			if err != nil {
				t.Fatal(err)
			}
			line, err := g.srv.Reload(cfg)
			if err == nil {
				t.Fatalf("reload changing %s accepted: %q", tc.name, line)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "engine: reload refused: "+tc.name+" ") || strings.Contains(msg, "\n") {
				t.Fatalf("refusal %q does not name %s first, on one line", msg, tc.name)
			}
			if g.srv.Version() != 1 {
				t.Fatalf("version %d after a refused reload", g.srv.Version())
			}
			resp, _ := g.client(t).get("/new/x")
			if resp.Header.Get("X-New") != "" {
				t.Fatal("the refused config's route answers")
			}
			g.expectServing(t)
		})
	}
}

// A config that does not compile is refused with every error it has, and
// the running config keeps serving.
func TestReloadRefusesWhatDoesNotCompile(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, oneRoute, up)
	cfg := parseTestConfig(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: one, prefix: /one/, upstream: backend}
  - {id: two, prefix: /two/, upstream: backend}
`, up)
	// Parse checks upstream names; a config built in code may still get
	// them wrong.
	cfg.Routes[0].Upstream, cfg.Routes[1].Upstream = "nowhere", "elsewhere"
	_, err := g.srv.Reload(cfg)
	if err == nil {
		t.Fatal("reload of routes to unknown upstreams accepted")
	}
	for _, want := range []string{`route "one": unknown upstream "nowhere"`, `route "two": unknown upstream "elsewhere"`, "still serving config v1"} {
		if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("refusal %q lacks %q (or is not one line)", err, want)
		}
	}
	g.expectServing(t)
}

// Bans, revocations and filter statistics belong to the server, not to a
// config version: they hold across reloads.
func TestReloadKeepsBansRevocationsAndStats(t *testing.T) {
	up := startUpstream(t, okHandler)
	const cfg = `
trusted_proxies: ["127.0.0.1/32"]
filters: [request_id, ip_access, forwarded]
auth:
  jwt: {hs256_secret: reload-secret-reload-secret-0123, issuer: lg, audience: api}
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: api, prefix: /, upstream: backend, auth: required%s}
`
	g := startGateway(t, cfg, up, "")
	exp := time.Now().Add(time.Hour).Unix()
	token := func(sub string) string {
		return "Bearer " + hs256(t, "reload-secret-reload-secret-0123", map[string]any{"sub": sub, "iss": "lg", "aud": "api", "exp": exp})
	}
	revoked, kept := token("revoked"), token("kept")
	call := func(from, auth string) (*http.Response, []byte) {
		resp, _, body := get(t, g, "/x", map[string]string{"X-Forwarded-For": from, "Authorization": auth})
		return resp, body
	}
	if resp, body := call("203.0.113.7", kept); resp.StatusCode != 200 {
		t.Fatalf("before the ban: %d %s", resp.StatusCode, body)
	}
	if err := g.srv.Bans().Ban(netip.MustParsePrefix("203.0.113.7/32"), time.Hour); err != nil {
		t.Fatal(err)
	}
	g.srv.Verifier().Revoke(revoked, time.Time{})
	resp, body := call("203.0.113.7", kept)
	expectError(t, resp, body, 403, 40302)
	resp, body = call("198.51.100.1", revoked)
	expectError(t, resp, body, 401, 40102)
	stats := func() float64 {
		return scrapeMetrics(t, g.srv).get(t, `loopgate_filter_self_seconds_count{route="api",filter="ip_access"}`)
	}
	before := stats()

	// Reload: the route changes (a tighter body limit), the filters and
	// auth are rebuilt.
	g.reload(t, cfg, up, ", limits: {max_body_bytes: 1MiB}")
	resp, body = call("203.0.113.7", kept)
	expectError(t, resp, body, 403, 40302)
	resp, body = call("198.51.100.1", revoked)
	expectError(t, resp, body, 401, 40102)
	if resp, body := call("198.51.100.1", kept); resp.StatusCode != 200 {
		t.Fatalf("a good request after the reload: %d %s", resp.StatusCode, body)
	}
	// Stats are recorded as each exchange ends, just after its answer.
	waitFor(t, "ip_access's stats to count on from before the reload", func() bool { return stats() >= before+3 })
	if after := stats(); after != before+3 {
		t.Fatalf("ip_access ran %v times before the reload and %v after 3 more requests", before, after)
	}
}

// Reloads under load: clients loop keep-alive requests while the config
// alternates between two versions, one moving a route to another upstream
// and adding a route, the other changing a filter. Every response is a 2xx
// and no connection fails.
func TestReloadUnderLoad(t *testing.T) {
	common := startUpstream(t, textHandler("common"))
	alt1 := startUpstream(t, textHandler("alt1"))
	alt2 := startUpstream(t, textHandler("alt2"))
	const cfgA = `
upstreams:
  - {name: common, nodes: ["%s"]}
  - {name: alt1, nodes: ["%s"]}
routes:
  - {id: common, prefix: /common/, upstream: common}
  - {id: moving, prefix: /moving/, upstream: alt1}
`
	const cfgB = `
upstreams:
  - {name: common, nodes: ["%s"]}
  - {name: alt2, nodes: ["%s"]}
routes:
  - {id: common, prefix: /common/, upstream: common, response_headers: {set: {X-B: "1"}}}
  - {id: moving, prefix: /moving/, upstream: alt2}
  - {id: extra, prefix: /extra/, upstream: common}
`
	a, b := parseTestConfig(t, cfgA, common, alt1), parseTestConfig(t, cfgB, common, alt2)
	g := startGateway(t, cfgA, common, alt1)

	const clients, reloads = 4, 200
	var requests, bad atomic.Int64
	var stop atomic.Bool
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- loadClient(g.addr, &stop, &requests, &bad)
		}()
	}
	for i := 0; i < reloads; i++ {
		cfg := b
		if i%2 == 1 {
			cfg = a
		}
		if _, err := g.srv.Reload(cfg); err != nil {
			t.Fatal(err)
		}
		// Let requests run between reloads, without sleeping: wait for
		// a few to complete under this version.
		for n := requests.Load(); requests.Load() < n+clients && bad.Load() == 0 && len(errs) == 0; {
			runtime.Gosched()
		}
	}
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if bad.Load() != 0 {
		t.Fatalf("%d of %d responses were not 2xx", bad.Load(), requests.Load())
	}
	t.Logf("%d requests across %d reloads", requests.Load(), reloads)
}

// loadClient sends keep-alive GETs over one connection until stop, and
// counts the responses and those that were not 2xx. Any connection error
// ends it with that error.
func loadClient(addr string, stop *atomic.Bool, requests, bad *atomic.Int64) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	br := bufio.NewReader(c)
	paths := []string{"/common/x", "/moving/x"}
	for i := 0; !stop.Load(); i++ {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: test\r\n\r\n", paths[i%2]); err != nil {
			return fmt.Errorf("request %d: %w", i, err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			return fmt.Errorf("response %d: %w", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("response %d body: %w", i, err)
		}
		if resp.StatusCode/100 != 2 {
			bad.Add(1)
			return fmt.Errorf("GET %s: %d %s", paths[i%2], resp.StatusCode, body)
		}
		requests.Add(1)
	}
	return nil
}

// Compile and Apply are Reload's two halves: a Compiled changes nothing
// until applied, Apply refuses fixed settings and another server's
// Compiled, and versions count up by one per applied config.
func TestCompileThenApply(t *testing.T) {
	up := startUpstream(t, textHandler("up"))
	g := startGateway(t, oneRoute, up)
	other := startGateway(t, oneRoute, up)
	next, err := g.srv.Compile(parseTestConfig(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: new, prefix: /new/, upstream: backend, response_headers: {set: {X-New: "1"}}}
`, up))
	if err != nil {
		t.Fatal(err)
	}
	cl := g.client(t)
	if resp, _ := cl.get("/new/x"); resp.Header.Get("X-New") != "" || g.srv.Version() != 1 {
		t.Fatal("a compiled config serves before Apply")
	}
	if _, err := other.srv.Apply(next); err == nil {
		t.Fatal("another server applied this server's Compiled")
	}
	fixed, err := g.srv.Compile(parseTestConfig(t, "pin: true\n"+oneRoute, up))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.srv.Apply(fixed); err == nil || !strings.Contains(err.Error(), "pin false -> true") {
		t.Fatalf("Apply of a changed pin: %v", err)
	}
	if v, err := g.srv.Apply(next); err != nil || v != 2 || g.srv.Version() != 2 {
		t.Fatalf("Apply: version %d, %v", v, err)
	}
	if resp, _ := cl.get("/new/x"); resp.Header.Get("X-New") != "1" {
		t.Fatal("the applied config does not serve")
	}
}

// engine.Compile checks a config with no server at hand, reporting every
// error; Server.Apply takes its result, compiles it against the server's
// own state and swaps it in.
func TestPackageCompileThenApply(t *testing.T) {
	up := startUpstream(t, textHandler("up"))
	bad := parseTestConfig(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: one, prefix: /one/, upstream: backend}
  - {id: two, prefix: /two/, upstream: backend}
`, up)
	bad.Routes[0].Upstream, bad.Routes[1].Upstream = "nowhere", "elsewhere"
	if _, err := engine.Compile(bad); err == nil || !strings.Contains(err.Error(), `"nowhere"`) || !strings.Contains(err.Error(), `"elsewhere"`) {
		t.Fatalf("Compile of routes to unknown upstreams: %v, want both named", err)
	}

	g := startGateway(t, oneRoute, up)
	next, err := engine.Compile(parseTestConfig(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: new, prefix: /new/, upstream: backend, response_headers: {set: {X-New: "1"}}}
`, up))
	if err != nil {
		t.Fatal(err)
	}
	if v, err := g.srv.Apply(next); err != nil || v != 2 {
		t.Fatalf("Apply: version %d, %v", v, err)
	}
	if resp, _ := g.client(t).get("/new/x"); resp.Header.Get("X-New") != "1" {
		t.Fatal("the applied config does not serve")
	}
}
