// Cluster rate limits through real sockets and a real redis-server: two
// gateways in one process are two nodes sharing a limit.

package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/limiter"
	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

// clusterNode is the config of one gateway node sharing rate limits
// through the Redis at the first %s; the second is its node ID, the third
// its routes, and the %%s left is the backend. The call deadline is
// generous for a loaded machine under -race; probes are fast.
const clusterNode = `
redis: {addrs: ["%s"], call_timeout: 2s, key_prefix: "t:"}
cluster: {node_id: %s, fallback_nodes: 2, probe_min: 50ms, probe_max: 400ms}
upstreams: [{name: backend, nodes: ["%%s"]}]
routes:
%s`

// apiRoute is the route every request goes to, with the given limits.
func apiRoute(limits string) string {
	return "  - {id: api, prefix: /, upstream: backend, rate_limits: [" + limits + "]}\n"
}

// startNodes starts one gateway per node ID with routes, sharing their
// limits through r, and waits until each sees them all in the membership
// set.
func startNodes(t *testing.T, r *redistest.Server, up, routes string, nodes ...string) []*gateway {
	t.Helper()
	var gs []*gateway
	for _, id := range nodes {
		gs = append(gs, startGateway(t, fmt.Sprintf(clusterNode, r.Addr(), id, routes), up))
	}
	for _, g := range gs {
		waitFor(t, "every node in the membership set", func() bool {
			c := g.srv.Limits().Status().Cluster
			return c != nil && c.LiveNodes == len(nodes)
		})
	}
	return gs
}

// stopAll shuts the gateways down in the test body, so that no gateway
// still runs when the first cleanup checks for leaked buffers.
func stopAll(t *testing.T, gs []*gateway) {
	t.Helper()
	for _, g := range gs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := g.srv.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		cancel()
	}
}

func addrsOf(gs []*gateway) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.addr)
	}
	return out
}

// Two gateways sharing a global limit of R admit R ± 10 % between them
// under an offered load several times R; each node's status, GET /limits
// and series show the limit. The burst is a second's worth, as in
// TestRateLimitOneGatewayAdmitsRate; each run has a Redis and nodes of its
// own.
func TestRateLimitClusterTwoGatewaysShareLimit(t *testing.T) {
	up := startRawUpstream(t, rawBenchUpstream)
	const rate, burst = 200, 200
	var gs []*gateway
	defer func() { stopAll(t, gs) }()
	var calls int64
	res := expectAdmitted(t, rate, burst, func() (counts, time.Duration) {
		stopAll(t, gs)
		r := redistest.Start(t)
		gs = startNodes(t, r, up, apiRoute("{key: global, rate: 200, burst: 200, scope: cluster}"), "a", "b")
		before := r.CommandCalls("evalsha", "eval")
		res, elapsed := hammer(addrsOf(gs), 2, 4*time.Second, "/a")
		calls = r.CommandCalls("evalsha", "eval") - before
		return res, elapsed
	})
	// Far above the limit the nodes find the bucket empty most times they
	// ask; leases still save calls, but fewer (see the test below).
	t.Logf("Redis calls (scripts) per admitted request, 4× over the limit: %.3f", float64(calls)/float64(res.ok))
	if calls >= res.ok {
		t.Fatalf("%d Redis calls for %d admitted requests", calls, res.ok)
	}

	var grants, rejections uint64
	for _, g := range gs {
		l := findLimit(t, g, "global", "cluster")
		grants += l.Grants
		rejections += l.Rejections
		if l.Lease == nil || l.Lease.Leases == 0 || l.Quota != rate {
			t.Fatalf("node status %+v: want leases and the full quota", l)
		}
	}
	if grants != uint64(res.ok) || rejections != uint64(res.limited) {
		t.Fatalf("nodes counted %d grants, %d rejections; the clients saw %+v", grants, rejections, res)
	}

	// GET /limits and the series, on one node.
	rec := httptest.NewRecorder()
	gs[0].srv.Limits().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/limits", nil))
	var st limiter.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != 200 {
		t.Fatalf("GET /limits: %d %v\n%s", rec.Code, err, rec.Body)
	}
	if c := st.Cluster; c == nil || c.Redis != "up" || c.LiveNodes != 2 || c.EffectiveNodes != 2 || c.Calls == 0 {
		t.Fatalf("GET /limits cluster %+v", st.Cluster)
	}
	var series strings.Builder
	gs[0].srv.WriteMetrics(&series)
	for _, want := range []string{
		"loopgate_ratelimit_redis_up 1\n",
		"loopgate_ratelimit_live_nodes 2\n",
		"loopgate_ratelimit_effective_nodes 2\n",
		`loopgate_ratelimit_quota{limit="global",scope="cluster"} 200` + "\n",
		`loopgate_ratelimit_shadow_rate{limit="global",scope="cluster"} 100` + "\n",
		`loopgate_ratelimit_leases_total{limit="global",scope="cluster"} `,
		`loopgate_ratelimit_grants_total{limit="global",scope="cluster"} `,
	} {
		if !strings.Contains(series.String(), want) {
			t.Errorf("series lack %q", want)
		}
	}
}

// Leasing: under a cluster limit above the offered load, two nodes make
// far fewer Redis calls than requests (INFO commandstats: scripts, each one
// round trip); with leasing off, one a request.
func TestRateLimitClusterLeasingCutsRedisCalls(t *testing.T) {
	r := redistest.Start(t)
	up := startRawUpstream(t, rawBenchUpstream)
	gs := startNodes(t, r, up, `
  - {id: leased, path: /leased, upstream: backend, rate_limits: [{key: route, rate: 20000, burst: 2000, scope: cluster}]}
  - {id: unleased, path: /unleased, upstream: backend, rate_limits: [{key: route, rate: 20000, burst: 2000, scope: cluster, lease_window: 0s}]}
`, "a", "b")
	defer stopAll(t, gs)
	perRequest := func(path string) float64 {
		before, commands := r.CommandCalls("evalsha", "eval"), r.AllCommandCalls()
		res, _ := hammer(addrsOf(gs), 2, 1500*time.Millisecond, path)
		if res.ok != res.total() || res.errs != 0 {
			t.Fatalf("%s: %+v, want every request admitted", path, res)
		}
		calls := r.CommandCalls("evalsha", "eval") - before
		all := r.AllCommandCalls() - commands
		t.Logf("%s: %d requests, %d Redis calls (%.4f a request), %d commands counting those inside scripts (%.4f)",
			path, res.ok, calls, float64(calls)/float64(res.ok), all, float64(all)/float64(res.ok))
		return float64(calls) / float64(res.ok)
	}
	if leased := perRequest("/leased"); leased > 0.25 {
		t.Fatalf("%.3f Redis calls per request with leasing; want well below 1", leased)
	}
	if unleased := perRequest("/unleased"); unleased < 0.9 {
		t.Fatalf("%.3f Redis calls per request without leasing; want about 1", unleased)
	}
}

// Killing Redis under load: both nodes fall back to their shadow quota of
// R/2, no request fails, and the two together stay within about 1.2 R.
// Restarting Redis brings the cluster limit back.
func TestRateLimitRedisKilledKeepsClusterLimit(t *testing.T) {
	r := redistest.Start(t)
	up := startRawUpstream(t, rawBenchUpstream)
	const rate, burst = 200.0, 20.0
	gs := startNodes(t, r, up, apiRoute("{key: global, rate: 200, burst: 20, scope: cluster}"), "a", "b")
	defer stopAll(t, gs)

	l := startLoad(addrsOf(gs), 2, "/a", nil)
	time.Sleep(1500 * time.Millisecond) // load with Redis up
	up1 := l.snapshot()
	r.Kill()
	for _, g := range gs {
		waitFor(t, "a node on its shadow quota", func() bool {
			s := findLimit(t, g, "global", "cluster")
			return g.srv.Limits().Status().Cluster.Redis == "down" && s.Quota == rate/2
		})
	}
	t.Logf("both nodes on their shadow quota %v after the kill", time.Since(up1.at).Round(time.Millisecond))
	time.Sleep(2 * time.Second) // load with Redis down
	down := l.snapshot()
	r.Restart()
	for _, g := range gs {
		waitFor(t, "a node calling Redis again", func() bool { return g.srv.Limits().Status().Cluster.Redis == "up" })
	}
	back := l.snapshot()
	time.Sleep(1500 * time.Millisecond) // load after the recovery
	total, elapsed := l.finish()

	if total.other != 0 || total.errs != 0 {
		t.Fatalf("%+v: a failing Redis must never fail a request", total)
	}
	phase := func(name string, c counts, from time.Time) {
		dt := c.at.Sub(from).Seconds()
		t.Logf("%s: %d admitted in %.2fs (%.0f/s)", name, c.ok, dt, float64(c.ok)/dt)
		if bound := 1.2*rate*dt + burst; float64(c.ok) > bound {
			t.Errorf("%s: admitted %d, more than 1.2 R·t + burst = %.0f", name, c.ok, bound)
		}
	}
	phase("redis up", up1, l.start)
	phase("redis down", down.minus(up1), up1.at)
	phase("after restart", total.minus(back), back.at)
	if bound := 1.2*rate*elapsed.Seconds() + burst; float64(total.ok) > bound {
		t.Fatalf("admitted %d in all, more than 1.2 R·t + burst = %.0f", total.ok, bound)
	}
	// At least half of what the shadow quotas give (R/2 each) while Redis
	// was down. A node's shadow bucket, of burst 10, fills in 90 ms: a
	// stretch in which a loaded machine left a node without answers wastes
	// its quota from then on, so each node's share counts only its time
	// with answers.
	fill := time.Duration((burst/2 - 1) / (rate / 2) * float64(time.Second))
	var least float64
	for node := range gs {
		idle := total.idle(node, up1.at, down.at, fill)
		least += 0.5 * rate / 2 * max(0, (down.at.Sub(up1.at)-idle).Seconds())
		t.Logf("node %d without answers for %v of the outage", node, idle.Round(time.Millisecond))
	}
	if d := down.minus(up1); float64(d.ok) < least {
		t.Fatalf("admitted %d while Redis was down, fewer than %.0f: the shadow quotas were not used", d.ok, least)
	}
	// The cluster limit is back: Redis keeps its bucket and grants leases.
	if n := r.CommandCalls("evalsha", "eval"); n == 0 {
		t.Fatal("no script ran on the restarted Redis")
	}
	for _, g := range gs {
		if c := g.srv.Limits().Status().Cluster; c.Trips == 0 || c.Recoveries == 0 {
			t.Fatalf("node status %+v: want a trip and a recovery", c)
		}
	}
}

// A request parked on Redis whose client leaves before the answer never
// runs, and its token goes back: the next client gets the whole burst.
func TestRateLimitClusterClientGoneReturnsTokens(t *testing.T) {
	r := redistest.Start(t)
	up := startRawUpstream(t, rawBenchUpstream)
	// A token every 100 s, and no leasing: every request asks Redis. The
	// call deadline outlasts the pause below on a loaded machine.
	g := startGateway(t, strings.Replace(fmt.Sprintf(clusterNode, r.Addr(), "solo",
		apiRoute("{key: route, rate: 0.01, burst: 5, scope: cluster, lease_window: 0s}")), "call_timeout: 2s", "call_timeout: 30s", 1), up)
	status := func() limiter.LimitStatus { return findLimit(t, g, "api/route", "cluster") }
	calls := func() uint64 { return g.srv.Limits().Status().Cluster.Calls }

	// Redis holds every script until told to go on: the five requests park.
	before := calls()
	if err := r.Do("CLIENT", "PAUSE", "20000", "WRITE").Error(); err != nil {
		t.Fatal(err)
	}
	var conns []*rawClient
	for range 5 {
		c := g.client(t)
		c.send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n")
		conns = append(conns, c)
	}
	waitFor(t, "five calls to the paused Redis", func() bool { return calls() >= before+5 })
	for _, c := range conns {
		c.Close() // the clients leave while their requests wait
	}
	waitFor(t, "the gateway to see the clients leave", func() bool { return g.srv.Clients() == 0 })
	if err := r.Do("CLIENT", "UNPAUSE").Error(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "Redis to grant the five tokens and the gateway to give them back", func() bool {
		s := status()
		return s.Grants == 5 && s.Lease.Held+int64(s.Lease.Returned) == 5
	})
	c := g.client(t)
	for i := range 5 {
		if resp, body := c.get("/a"); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s; the tokens of the requests that never ran were lost", i, resp.StatusCode, body)
		}
	}
	resp, body := c.get("/a")
	expectError(t, resp, body, 429, 42902)
}

// A closed cluster limit while Redis is down answers 503, code 50304, with
// a JSON body and Retry-After, on a connection that goes on serving; once
// Redis is back, the same connection's requests go through again.
func TestRateLimitFailClosedAnswers503(t *testing.T) {
	r := redistest.Start(t)
	up := startRawUpstream(t, rawBenchUpstream)
	g := startGateway(t, fmt.Sprintf(clusterNode, r.Addr(), "solo",
		apiRoute("{key: route, rate: 1000, burst: 1000, scope: cluster, on_redis_failure: closed}")), up)
	health := func() string { return g.srv.Limits().Status().Cluster.Redis }
	c := g.client(t)
	if resp, body := c.get("/a"); resp.StatusCode != 200 {
		t.Fatalf("with Redis up: %d %s", resp.StatusCode, body)
	}
	r.Kill()
	waitFor(t, "Redis marked down", func() bool { return health() == "down" })
	for range 2 {
		resp, body := c.get("/a")
		expectError(t, resp, body, 503, 50304)
		if resp.Header.Get("Retry-After") == "" {
			t.Fatal("503 without Retry-After")
		}
	}
	r.Restart()
	waitFor(t, "Redis up again", func() bool { return health() == "up" })
	if resp, body := c.get("/a"); resp.StatusCode != 200 {
		t.Fatalf("with Redis back: %d %s", resp.StatusCode, body)
	}
}
