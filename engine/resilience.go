// resilience: how a snapshot's upstream policies (outlier ejection, active
// health checks) and route policies (package policy) go live, and the
// resilience series: the policies' and the nodes' ejection and health.

package engine

import (
	"io"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/policy"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/upstream"
)

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
	// Every route's limiter starts its cold start over, those of the
	// chunks this version kept from the last too: no window shrinks a
	// limit before cold_start calls after any reload or API write
	// (docs/resilience.md). An empty slot has no isolation.
	for i := range s.routes.len() {
		if r := s.routes.at(i); r.isolationCfg != nil {
			if iso := r.metrics.isolation.Load(); iso != nil { // made by the route's first request
				iso.Reset(r.isolationCfg)
			}
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
	p := newPromWriter(w)
	// A route's breaker and isolation series follow its route series:
	// written once a request has reached the route, gone with it once a
	// reload has removed it (registry.sweep).
	s.resilience.WriteSeries(policySeries{p}, func(route string) bool {
		reg.mu.Lock()
		defer reg.mu.Unlock()
		m := reg.routeIx[route]
		return m != nil && m.touched()
	}, reg.limiters())
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

// policySeries writes the policies' series (policy.Series) as
// Prometheus text.
type policySeries struct{ p promWriter }

func (w policySeries) Family(name, typ, help string) { w.p.family(name, typ, help) }

func (w policySeries) Counter(name string, l policy.Labels, v uint64) {
	w.p.sample(name, w.labels(&l), v)
}

func (w policySeries) Gauge(name string, l policy.Labels, v int64) {
	w.p.gauge(name, w.labels(&l), v)
}

func (w policySeries) labels(l *policy.Labels) string {
	if l[2] == "" {
		return w.p.labels(l[0], l[1])
	}
	return w.p.labels(l[:]...)
}

var _ policy.Series = policySeries{}

// balancerKinds maps config.Upstream.Balancer to the upstream package's.
var balancerKinds = map[string]upstream.BalancerKind{
	config.RoundRobin:         upstream.BalanceRoundRobin,
	config.WeightedRoundRobin: upstream.BalanceWeighted,
	config.Random:             upstream.BalanceRandom,
	config.LeastRequest:       upstream.BalanceLeastRequest,
}
