// The summary the dashboard polls (GET /summary on the admin port): a
// bounded digest of the routes, upstreams, isolation limiters and rate
// limits, read from the counters the loops keep anyway.

package engine

import (
	"cmp"
	"slices"
	"sync"

	"github.com/loopgate/loopgate/engine/policy"
	"github.com/loopgate/loopgate/pool/loopstat"
)

// Summary bounds: MaxSummaryTop is the most routes (and rate limits) a
// caller may ask for as the busiest (the admin port's ?top, default 50),
// maxSummaryNodes the nodes listed per upstream. Past top, up to top more
// routes in a state that is not normal are shown (so a quiet route with
// an open breaker is never hidden by busy ones), and the upstreams listed
// are the shown routes' and those with a node out of rotation, up to
// 2×top.
const (
	MaxSummaryTop   = 1000
	maxSummaryNodes = 32
)

// Summary is the JSON of GET /summary. Counters are totals since the
// start: the dashboard takes rates from two polls.
type Summary struct {
	Version uint64 `json:"version"` // the running config version
	// LatencyBounds are the upper bounds, in seconds, of the latency
	// buckets of every route's Latency; its last bucket is above them all.
	LatencyBounds []float64        `json:"latency_bounds_seconds"`
	Routes        SummaryRoutes    `json:"routes"`
	Upstreams     SummaryUpstreams `json:"upstreams"`
	RateLimits    any              `json:"rate_limits"` // limiter.Summary
}

// SummaryRoutes are the running config's routes: how many, how many are
// in a state that is not normal, and the ones shown.
type SummaryRoutes struct {
	Total    int            `json:"total"`
	Abnormal int            `json:"abnormal"` // breaker not closed, isolation limit below its base, or requests waiting
	List     []RouteSummary `json:"list"`     // the busiest since the last summary, then the abnormal ones
}

// RouteSummary is one route.
type RouteSummary struct {
	ID       string   `json:"id"`
	Upstream string   `json:"upstream"`
	Requests uint64   `json:"requests"` // finished, every status
	Errors   uint64   `json:"errors"`   // of those, 5xx
	Latency  []uint64 `json:"latency"`  // finished requests per latency bucket (not cumulative)
	InFlight int64    `json:"in_flight"`
	Breaker  string   `json:"breaker"` // closed, open, half_open, or off
	Abnormal bool     `json:"abnormal,omitempty"`

	Isolation *policy.LimiterState `json:"isolation,omitempty"` // nil when the route has none
}

// SummaryUpstreams are the running config's upstreams: how many, and the
// ones shown.
type SummaryUpstreams struct {
	Total int               `json:"total"`
	List  []UpstreamSummary `json:"list"`
}

// UpstreamSummary is one upstream: its node count, how many are out of
// rotation, and its first maxSummaryNodes nodes.
type UpstreamSummary struct {
	Name  string        `json:"name"`
	Nodes int           `json:"nodes"`
	Out   int           `json:"out"` // unhealthy or ejected
	List  []NodeSummary `json:"list"`
}

// NodeSummary is one node.
type NodeSummary struct {
	Addr           string  `json:"addr"`
	Healthy        bool    `json:"healthy"`
	EjectedForSecs float64 `json:"ejected_for_seconds"` // 0 when in rotation
	InFlight       int64   `json:"in_flight"`
	FailuresInARow int     `json:"failures_in_a_row"`
}

// summarizer ranks the routes by the requests they finished since the
// previous summary: it keeps each route's total from then, by its
// metrics, which only it reads and writes (under mu, an admin-side lock no
// loop takes).
type summarizer struct {
	mu   sync.Mutex
	prev map[*routeMetrics]uint64
}

// latencyBounds are loopstat.Bounds in seconds.
var latencyBounds = func() []float64 {
	b := make([]float64, len(loopstat.Bounds))
	for i, ns := range loopstat.Bounds {
		b[i] = float64(ns) / 1e9
	}
	return b
}()

// Summary answers GET /summary on the admin port: a *Summary of the
// running config's routes, upstreams and rate limits, with the top routes
// (1 to MaxSummaryTop; other values are clamped) by requests finished
// since the previous call, then the abnormal ones. It reads atomics and
// the running snapshot; its own state is under a lock no loop takes. Its
// size is bounded by top, whatever the number of routes. Safe for
// concurrent use, off the loops.
func (s *Server) Summary(top int) any {
	top = min(max(top, 1), MaxSummaryTop)
	return s.summary.read(s, top)
}

// candidate is a route being ranked.
type candidate struct {
	i       int    // index in the snapshot's routes
	recent  uint64 // finished since the previous summary
	total   uint64
	classes [5]uint64
	bad     bool
}

func (z *summarizer) read(s *Server, top int) *Summary {
	st := s.state.Load()
	snap := st.snap
	summary := &Summary{Version: st.version, LatencyBounds: latencyBounds}

	// One pass over every route keeps the top by recent traffic in a
	// bounded min-heap, and the abnormal ones up to top more.
	busy := make([]candidate, 0, top)
	var bad []candidate
	z.mu.Lock()
	if z.prev == nil || len(z.prev) > 2*snap.routes.count()+64 {
		z.prev = make(map[*routeMetrics]uint64, snap.routes.count()) // drops the removed routes' totals
	}
	for i := range snap.routes.len() {
		r := snap.routes.at(i)
		if r.empty() {
			continue
		}
		c := candidate{i: i, bad: abnormal(r)}
		if sr := r.metrics.series.Load(); sr != nil { // nil: no request has reached the route
			for j := range sr.shards {
				for k := range c.classes {
					c.classes[k] += sr.shards[j].classes[k].Load()
				}
			}
		}
		for _, n := range c.classes {
			c.total += n
		}
		c.recent = c.total - min(z.prev[r.metrics], c.total)
		z.prev[r.metrics] = c.total
		if c.bad {
			summary.Routes.Abnormal++
		}
		switch {
		case len(busy) < top:
			busy = append(busy, c)
			heapUp(busy, len(busy)-1)
		case busier(c, busy[0]):
			if busy[0].bad && len(bad) < top {
				bad = append(bad, busy[0])
			}
			busy[0] = c
			heapDown(busy, 0)
		case c.bad && len(bad) < top:
			bad = append(bad, c)
		}
	}
	z.mu.Unlock()
	slices.SortFunc(busy, func(a, b candidate) int {
		switch {
		case a.i == b.i:
			return 0
		case busier(a, b):
			return -1
		}
		return 1
	})
	summary.Routes.Total = snap.routes.count()
	summary.Routes.List = make([]RouteSummary, 0, len(busy)+len(bad))
	shownUp := map[*upstreamDef]bool{}
	for _, c := range append(busy, bad...) {
		r := snap.routes.at(c.i)
		summary.Routes.List = append(summary.Routes.List, routeSummary(r, snap.upstreams[r.upstream].name, &c))
		shownUp[snap.upstreams[r.upstream]] = true
	}

	// The shown routes' upstreams, and those with a node out of rotation,
	// in config order, up to 2×top.
	now := loopstat.Now()
	summary.Upstreams.Total = len(snap.upstreams)
	summary.Upstreams.List = []UpstreamSummary{}
	for _, d := range snap.upstreams {
		if len(summary.Upstreams.List) >= 2*top {
			break
		}
		out := 0
		for _, nc := range d.group.Nodes {
			if n := nc.Node; n.Down() || n.EjectedFor(now) > 0 {
				out++
			}
		}
		if !shownUp[d] && out == 0 {
			continue // read, not listed: nothing is made for it
		}
		u := UpstreamSummary{Name: d.name, Nodes: len(d.group.Nodes), Out: out, List: []NodeSummary{}}
		for _, nc := range d.group.Nodes[:min(len(d.group.Nodes), maxSummaryNodes)] {
			n := nc.Node
			u.List = append(u.List, NodeSummary{Addr: n.Addr, Healthy: !n.Down(), EjectedForSecs: n.EjectedFor(now).Seconds(),
				InFlight: n.InFlight(), FailuresInARow: n.FailuresInARow()})
		}
		summary.Upstreams.List = append(summary.Upstreams.List, u)
	}

	summary.RateLimits = s.rateLimitSummary(top)
	return summary
}

// abnormal reports a route whose breaker is not closed, whose isolation
// limit is below its base, or whose requests wait for a permit.
func abnormal(r *route) bool {
	if r.breaker != nil && r.breaker.State() != policy.BreakerClosed {
		return true
	}
	if r.isolationCfg != nil {
		iso := r.isolationState()
		return iso.Limit < iso.Base || iso.Waiting > 0
	}
	return false
}

// busier orders candidates: more recent requests, then more in total,
// then config order.
func busier(a, b candidate) bool {
	if c := cmp.Compare(a.recent, b.recent); c != 0 {
		return c > 0
	}
	if c := cmp.Compare(a.total, b.total); c != 0 {
		return c > 0
	}
	return a.i < b.i
}

// heapUp and heapDown keep h a min-heap by busier: h[0] is the least
// busy of the kept candidates, the one a busier route replaces.
func heapUp(h []candidate, i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !busier(h[p], h[i]) {
			return
		}
		h[p], h[i] = h[i], h[p]
		i = p
	}
}

func heapDown(h []candidate, i int) {
	for {
		least := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(h) && busier(h[least], h[c]) {
				least = c
			}
		}
		if least == i {
			return
		}
		h[i], h[least] = h[least], h[i]
		i = least
	}
}

func routeSummary(r *route, upstream string, c *candidate) RouteSummary {
	var lat loopstat.Sum
	if sr := r.metrics.series.Load(); sr != nil {
		for j := range sr.shards {
			lat.Add(&sr.shards[j].latency)
		}
	}
	rs := RouteSummary{ID: r.id, Upstream: upstream, Requests: c.total, Errors: c.classes[4],
		Latency: lat.Counts[:], InFlight: r.metrics.inFlight(), Breaker: "off", Abnormal: c.bad}
	if r.breaker != nil {
		rs.Breaker = r.breaker.State().String()
	}
	if r.isolationCfg != nil {
		iso := r.isolationState()
		rs.Isolation = &iso
	}
	return rs
}

// rateLimitSummary is the digest of the filter object that keeps rate
// limits (limiter.Store.Summary), or nil when none does: the engine knows
// no filter's types.
func (s *Server) rateLimitSummary(top int) any {
	for _, v := range s.services.owned {
		if rs, ok := v.(interface{ Summary(top int) any }); ok {
			return rs.Summary(top)
		}
	}
	return nil
}
