// resilience: the route and upstream policies kept by stable name across
// reloads (circuit breakers, retry budgets, isolation limits, outlier
// ejection), their activation with the active health checks when a
// snapshot goes live, and their metric series.

package engine

import (
	"io"
	"slices"
	"sync"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/upstream"
)

// resilience holds the state of the resilience mechanisms that outlives a
// configuration version: each upstream's retry budget by upstream name.
// Compiling adds to it; nothing is removed. Loops never touch mu: they
// reach what they need through the compiled snapshot.
type resilience struct {
	loops int

	mu       sync.Mutex
	budgets  map[string]*retryBudget
	upstream []string // budget names in creation order
	breakers map[string]*breaker
	ejection map[string]*upstream.Outliers
	prober   *upstream.Prober // every upstream's active checks; runs while the server does
	isolated map[string]*isolation
	limiters []*isolation // in creation order
	routes   []*breaker   // in creation order
}

func newResilience(loops int, hc config.HealthChecks) *resilience {
	return &resilience{loops: loops, budgets: map[string]*retryBudget{}, breakers: map[string]*breaker{},
		ejection: map[string]*upstream.Outliers{}, isolated: map[string]*isolation{}, prober: upstream.NewProber(hc.MaxInFlight, hc.Batch)}
}

// breaker returns route's circuit breaker, made the first time with a
// window of window calls. A reload keeps its state; a new window size
// applies from its next CLOSED phase. Off-loop only.
func (rs *resilience) breaker(route string, window int) *breaker {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	b := rs.breakers[route]
	if b == nil {
		b = newBreaker(route, window)
		rs.breakers[route] = b
		rs.routes = append(rs.routes, b)
	}
	return b
}

// budget returns upstream name's retry budget, made the first time.
// Off-loop only.
func (rs *resilience) budget(name string) *retryBudget {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	b := rs.budgets[name]
	if b == nil {
		b = newRetryBudget(rs.loops)
		rs.budgets[name] = b
		rs.upstream = append(rs.upstream, name)
	}
	return b
}

// isolation returns route's slow-call limiter, made the first time.
// Off-loop only.
func (rs *resilience) isolation(route string, s *isolationSettings) *isolation {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	iso := rs.isolated[route]
	if iso == nil {
		iso = newIsolation(route, s)
		rs.isolated[route] = iso
		rs.limiters = append(rs.limiters, iso)
	}
	return iso
}

// outliers returns upstream name's ejection state, made the first time.
// Off-loop only.
func (rs *resilience) outliers(name string) *upstream.Outliers {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	o := rs.ejection[name]
	if o == nil {
		o = &upstream.Outliers{}
		rs.ejection[name] = o
	}
	return o
}

// outlierConfig compiles an upstream's ejection policy; nil when off.
func outlierConfig(o *config.Outlier) *upstream.OutlierConfig {
	if !o.On() {
		return nil
	}
	return &upstream.OutlierConfig{Consecutive: int32(o.Consecutive), BaseEjection: time.Duration(o.BaseEjection),
		MaxEjection: time.Duration(o.MaxEjection), MaxEjectedPct: int32(o.MaxEjectedPercent),
		ForgetAfterClean: time.Duration(o.MaxEjection)}
}

// activate sets what the snapshot configures on the server's shared
// state, when it becomes the running version: compiling changes nothing
// that runs (see Server.Compile). Under the reload lock, or before Run.
func (s *snapshot) activate(prober *upstream.Prober) {
	checks := map[*upstream.Node]*upstream.HealthCheckConfig{}
	for _, d := range s.upstreams {
		nodes := make([]*upstream.Node, len(d.group.Nodes))
		for i, n := range d.group.Nodes {
			nodes[i] = n.Node
			if d.healthCfg != nil {
				checks[n.Node] = d.healthCfg
			}
		}
		d.outliers.SetHealthCheck(d.healthCfg)
		d.outliers.Configure(d.outlierCfg, nodes)
	}
	for i := range s.routes {
		if r := &s.routes[i]; r.isolation != nil {
			r.isolation.reset(&r.isolationCfg)
		}
	}
	prober.Set(checks)
}

// healthConfig compiles an upstream's active check; nil when it has none.
func healthConfig(h *config.HealthCheck) *upstream.HealthCheckConfig {
	if h == nil {
		return nil
	}
	return &upstream.HealthCheckConfig{TCP: h.Type == config.HealthTCP, Method: h.Method, Path: h.Path, Host: h.Host,
		Expect: h.Expected, Timeout: time.Duration(h.Timeout), Healthy: h.HealthyThreshold, Unhealthy: h.UnhealthyThreshold,
		New: time.Duration(h.Interval), Stable: time.Duration(h.StableInterval), Degraded: time.Duration(h.DegradedInterval),
		StableAfter: h.StableAfter, DegradedAfter: h.DegradedAfter, PanicPercent: int32(*h.PanicThreshold)}
}

var errNoHealthyNode = &codec.Error{Status: 503, Code: 50301, Message: "no healthy upstream node"}

// writeResilienceSeries is the metrics.Set writer for the resilience
// series: retry budgets, breakers, and the nodes' ejections.
func (s *Server) writeResilienceSeries(w io.Writer) {
	reg := s.metrics
	reg.mu.Lock()
	nodes := append([]*upstream.Node(nil), reg.nodes...)
	reg.mu.Unlock()
	rs := s.resilience
	rs.mu.Lock()
	names := append([]string(nil), rs.upstream...)
	budgets := make([]budgetTotals, len(names))
	for i, n := range names {
		budgets[i] = rs.budgets[n].totals()
	}
	breakers := append([]*breaker(nil), rs.routes...)
	limiters := append([]*isolation(nil), rs.limiters...)
	rs.mu.Unlock()
	// A route's breaker and isolation series follow its route series:
	// written once a request has reached the route, gone with it once a
	// reload has removed it (registry.sweep).
	reg.mu.Lock()
	shown := func(route string) bool { m := reg.routeIx[route]; return m != nil && m.touched() }
	breakers = slices.DeleteFunc(breakers, func(b *breaker) bool { return !shown(b.route) })
	limiters = slices.DeleteFunc(limiters, func(iso *isolation) bool { return !shown(iso.route) })
	reg.mu.Unlock()

	p := newPromWriter(w)
	p.family("loopgate_upstream_retries_total", "counter", "Attempts made again on another node after a retryable failure.")
	for i, t := range budgets {
		p.sample("loopgate_upstream_retries_total", p.labels("upstream", names[i]), t.retried)
	}
	p.family("loopgate_upstream_retries_exhausted_total", "counter", "Retries refused by the upstream's retry budget; the client got the attempt's own error.")
	for i, t := range budgets {
		p.sample("loopgate_upstream_retries_exhausted_total", p.labels("upstream", names[i]), t.exhausted)
	}
	p.family("loopgate_upstream_retries_in_flight", "gauge", "Requests to the upstream that are on a retry now.")
	for i, t := range budgets {
		p.gauge("loopgate_upstream_retries_in_flight", p.labels("upstream", names[i]), t.inFlight)
	}
	p.family("loopgate_route_breaker_state", "gauge", "The route's circuit: 0 closed, 1 open, 2 half-open.")
	for _, br := range breakers {
		p.gauge("loopgate_route_breaker_state", p.labels("route", br.route), int64(br.phase.Load().state))
	}
	p.family("loopgate_route_breaker_transitions_total", "counter", "Circuit state changes, by the state entered.")
	for _, br := range breakers {
		for st := range br.transitions {
			p.sample("loopgate_route_breaker_transitions_total", p.labels("route", br.route, "to", breakerState(st).String()), br.transitions[st].Load())
		}
	}
	p.family("loopgate_route_breaker_rejected_total", "counter", "Requests answered 503, code 55301, by an open circuit, without an upstream call.")
	for _, br := range breakers {
		p.sample("loopgate_route_breaker_rejected_total", p.labels("route", br.route), br.rejected.Load())
	}
	for _, f := range isolationSeries {
		p.family(f.name, f.typ, f.help)
		for _, iso := range limiters {
			p.sample(f.name, p.labels("route", iso.route), f.value(iso))
		}
	}
	now := loopstat.Now()
	p.family("loopgate_upstream_node_ejected_seconds", "gauge", "Seconds the node stays ejected by outlier detection; 0 when in rotation.")
	for _, n := range nodes {
		p.gaugeFloat("loopgate_upstream_node_ejected_seconds", p.labels("upstream", n.Upstream, "node", n.Addr), n.EjectedFor(now).Seconds())
	}
	p.family("loopgate_upstream_node_healthy", "gauge", "1 while the node passes its active health checks (or has none), 0 while they hold it out of rotation.")
	for _, n := range nodes {
		up := int64(1)
		if n.Down() {
			up = 0
		}
		p.gauge("loopgate_upstream_node_healthy", p.labels("upstream", n.Upstream, "node", n.Addr), up)
	}
	p.family("loopgate_upstream_node_health_probes_total", "counter", "Active health probes of the node, and how many failed.")
	for _, n := range nodes {
		probes, failed := n.HealthProbes()
		p.sample("loopgate_upstream_node_health_probes_total", p.labels("upstream", n.Upstream, "node", n.Addr, "result", "pass"), probes-failed)
		p.sample("loopgate_upstream_node_health_probes_total", p.labels("upstream", n.Upstream, "node", n.Addr, "result", "fail"), failed)
	}
	p.family("loopgate_upstream_node_failures_in_a_row", "gauge", "The node's current run of failed calls (connect errors, resets, timeouts, 5xx); outlier ejection acts on it.")
	for _, n := range nodes {
		p.gauge("loopgate_upstream_node_failures_in_a_row", p.labels("upstream", n.Upstream, "node", n.Addr), int64(n.FailuresInARow()))
	}
	p.family("loopgate_upstream_node_ejections_total", "counter", "Times outlier detection ejected the node.")
	for _, n := range nodes {
		p.sample("loopgate_upstream_node_ejections_total", p.labels("upstream", n.Upstream, "node", n.Addr), n.Ejections())
	}
}

// isolationSeries are the series of each route's isolation limiter.
var isolationSeries = []struct {
	name, typ, help string
	value           func(*isolation) uint64
}{
	{"loopgate_route_isolation_limit", "gauge", "The route's current concurrency limit on upstream calls (adaptive slow-call isolation).",
		func(iso *isolation) uint64 { return uint64(iso.limit.Load()) }},
	{"loopgate_route_isolation_in_flight", "gauge", "The route's upstream calls holding an isolation permit.",
		func(iso *isolation) uint64 { return uint64(max(iso.inFlight.Load(), 0)) }},
	{"loopgate_route_isolation_waiting", "gauge", "Requests over the route's limit waiting for a permit (isolation queue).",
		func(iso *isolation) uint64 { return uint64(max(iso.waiting.Load(), 0)) }},
	{"loopgate_route_isolation_rejected_total", "counter", "Requests answered 429, code 42901, at the route's limit.",
		func(iso *isolation) uint64 { return iso.rejected.Load() }},
	{"loopgate_route_isolation_pool_share_rejected_total", "counter", "Upstream calls of the route answered 503, code 50302, because the route held its max_pool_share of the node's pool.",
		func(iso *isolation) uint64 { return iso.overPool.Load() }},
	{"loopgate_route_isolation_warnings_total", "counter", "Episodes of the route's limit below half its base (the alert hook; each logged once).",
		func(iso *isolation) uint64 { return iso.warnings.Load() }},
}

// balancerKinds maps config.Upstream.Balancer to the upstream package's.
var balancerKinds = map[string]upstream.BalancerKind{
	config.RoundRobin:         upstream.BalanceRoundRobin,
	config.WeightedRoundRobin: upstream.BalanceWeighted,
	config.Random:             upstream.BalanceRandom,
	config.LeastRequest:       upstream.BalanceLeastRequest,
}
