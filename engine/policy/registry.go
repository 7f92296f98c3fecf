// Registry: the policies' runtime state kept by stable name across
// reloads, and their metric series.

package policy

import (
	"slices"
	"sync"

	"github.com/loopgate/loopgate/upstream"
)

// Registry holds the state of the resilience mechanisms that outlives a
// configuration version: each route's breaker by route id, each
// upstream's retry budget and outlier ejection state by upstream name,
// and the active health prober. A route's isolation limiter is kept with
// the route's metrics by the engine, made by its first request. Compiling adds to it;
// nothing is removed. Its methods take mu and are for the control plane
// (compiling, the metrics page); loops never call them: they reach what
// they need through the compiled snapshot.
type Registry struct {
	loops  int
	prober *upstream.Prober // every upstream's active checks; runs while the server does

	mu       sync.Mutex
	budgets  map[string]*Budget
	upstream []string // budget names in creation order
	breakers map[string]*Breaker
	routes   []*Breaker // in creation order
	ejection map[string]*upstream.Outliers
}

// NewRegistry makes an empty registry for loops event loops, with a
// prober of at most maxInFlight probes at once, batch started per tick.
func NewRegistry(loops, maxInFlight, batch int) *Registry {
	return &Registry{loops: loops, budgets: map[string]*Budget{}, breakers: map[string]*Breaker{},
		ejection: map[string]*upstream.Outliers{}, prober: upstream.NewProber(maxInFlight, batch)}
}

// Prober is the active health prober every upstream's checks run on.
func (rs *Registry) Prober() *upstream.Prober { return rs.prober }

// Breaker returns route's circuit breaker, made the first time with a
// window of window calls. A reload keeps its state; a new window size
// applies from its next CLOSED phase.
func (rs *Registry) Breaker(route string, window int) *Breaker {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	b := rs.breakers[route]
	if b == nil {
		b = NewBreaker(route, window)
		rs.breakers[route] = b
		rs.routes = append(rs.routes, b)
	}
	return b
}

// Budget returns upstream name's retry budget, made the first time.
func (rs *Registry) Budget(name string) *Budget {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	b := rs.budgets[name]
	if b == nil {
		b = NewBudget(rs.loops)
		rs.budgets[name] = b
		rs.upstream = append(rs.upstream, name)
	}
	return b
}

// Outliers returns upstream name's ejection state, made the first time.
func (rs *Registry) Outliers(name string) *upstream.Outliers {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	o := rs.ejection[name]
	if o == nil {
		o = &upstream.Outliers{}
		rs.ejection[name] = o
	}
	return o
}

// Series is where the policies' series are written: the engine's
// Prometheus text writer.
type Series interface {
	Family(name, typ, help string)
	Counter(name string, labels Labels, v uint64)
	Gauge(name string, labels Labels, v int64)
}

// Labels are a sample's label pairs: name, value, and a second name and
// value or two empty strings. A value, so a sample allocates nothing to
// pass them (a page holds tens of thousands of samples).
type Labels [4]string

// WriteSeries writes the retry budgets', breakers' and limiters' series:
// limiters are those of the routes whose series are written. A route's
// breaker series follow its route series: shown says whether the route's
// are written (a request has reached it, and no reload has removed it).
// Safe for concurrent use.
func (rs *Registry) WriteSeries(w Series, shown func(route string) bool, limiters []*Limiter) {
	rs.mu.Lock()
	names := append([]string(nil), rs.upstream...)
	budgets := make([]BudgetTotals, len(names))
	for i, n := range names {
		budgets[i] = rs.budgets[n].Totals()
	}
	breakers := append([]*Breaker(nil), rs.routes...)
	rs.mu.Unlock()
	breakers = slices.DeleteFunc(breakers, func(b *Breaker) bool { return !shown(b.route) })

	w.Family("loopgate_upstream_retries_total", "counter", "Attempts made again on another node after a retryable failure.")
	for i, t := range budgets {
		w.Counter("loopgate_upstream_retries_total", Labels{"upstream", names[i]}, t.Retried)
	}
	w.Family("loopgate_upstream_retries_exhausted_total", "counter", "Retries refused by the upstream's retry budget; the client got the attempt's own error.")
	for i, t := range budgets {
		w.Counter("loopgate_upstream_retries_exhausted_total", Labels{"upstream", names[i]}, t.Exhausted)
	}
	w.Family("loopgate_upstream_retries_in_flight", "gauge", "Requests to the upstream that are on a retry now.")
	for i, t := range budgets {
		w.Gauge("loopgate_upstream_retries_in_flight", Labels{"upstream", names[i]}, t.InFlight)
	}
	w.Family("loopgate_route_breaker_state", "gauge", "The route's circuit: 0 closed, 1 open, 2 half-open.")
	for _, br := range breakers {
		w.Gauge("loopgate_route_breaker_state", Labels{"route", br.route}, int64(br.State()))
	}
	w.Family("loopgate_route_breaker_transitions_total", "counter", "Circuit state changes, by the state entered.")
	for _, br := range breakers {
		for st := range br.transitions {
			w.Counter("loopgate_route_breaker_transitions_total", Labels{"route", br.route, "to", BreakerState(st).String()}, br.transitions[st].Load())
		}
	}
	w.Family("loopgate_route_breaker_rejected_total", "counter", "Requests answered 503, code 55301, by an open circuit, without an upstream call.")
	for _, br := range breakers {
		w.Counter("loopgate_route_breaker_rejected_total", Labels{"route", br.route}, br.rejected.Load())
	}
	for _, f := range isolationSeries {
		w.Family(f.name, f.typ, f.help)
		for _, iso := range limiters {
			w.Counter(f.name, Labels{"route", iso.route}, f.value(iso))
		}
	}
}

// isolationSeries are the series of each route's isolation limiter.
var isolationSeries = []struct {
	name, typ, help string
	value           func(*Limiter) uint64
}{
	{"loopgate_route_isolation_limit", "gauge", "The route's current concurrency limit on upstream calls (adaptive slow-call isolation).",
		func(iso *Limiter) uint64 { return uint64(iso.limit.Load()) }},
	{"loopgate_route_isolation_in_flight", "gauge", "The route's upstream calls holding an isolation permit.",
		func(iso *Limiter) uint64 { return uint64(max(iso.inFlight.Load(), 0)) }},
	{"loopgate_route_isolation_waiting", "gauge", "Requests over the route's limit waiting for a permit (isolation queue).",
		func(iso *Limiter) uint64 { return uint64(max(iso.waiting.Load(), 0)) }},
	{"loopgate_route_isolation_rejected_total", "counter", "Requests answered 429, code 42901, at the route's limit.",
		func(iso *Limiter) uint64 { return iso.rejected.Load() }},
	{"loopgate_route_isolation_pool_share_rejected_total", "counter", "Upstream calls of the route answered 503, code 50302, because the route held its max_pool_share of the node's pool.",
		func(iso *Limiter) uint64 { return iso.overPool.Load() }},
	{"loopgate_route_isolation_warnings_total", "counter", "Episodes of the route's limit below half its base (the alert hook; each logged once).",
		func(iso *Limiter) uint64 { return iso.warnings.Load() }},
}
