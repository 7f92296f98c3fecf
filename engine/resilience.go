// resilience: the server's retry budgets and circuit breakers, kept by
// stable name across reloads, and their metric series.

package engine

import (
	"bytes"
	"io"
	"sync"

	"github.com/loopgate/loopgate/engine/config"
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
	routes   []*breaker // in creation order
}

func newResilience(loops int) *resilience {
	return &resilience{loops: loops, budgets: map[string]*retryBudget{}, breakers: map[string]*breaker{}}
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

// budget returns upstream u's retry budget, made the first time, with u's
// settings. Off-loop only.
func (rs *resilience) budget(u *config.Upstream) *retryBudget {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	b := rs.budgets[u.Name]
	if b == nil {
		b = newRetryBudget(rs.loops)
		rs.budgets[u.Name] = b
		rs.upstream = append(rs.upstream, u.Name)
	}
	b.percent.Store(int64(u.RetryBudget.Percent))
	b.floor.Store(int64(u.RetryBudget.MinRetries))
	return b
}

// writeSeries is the metrics.Set writer for the resilience series.
func (rs *resilience) writeSeries(w io.Writer) {
	rs.mu.Lock()
	names := append([]string(nil), rs.upstream...)
	budgets := make([]*retryBudget, len(names))
	for i, n := range names {
		budgets[i] = rs.budgets[n]
	}
	breakers := append([]*breaker(nil), rs.routes...)
	rs.mu.Unlock()

	var b bytes.Buffer
	p := promWriter{b: &b}
	p.family("loopgate_upstream_retries_total", "counter", "Attempts made again on another node after a retryable failure.")
	for i, bg := range budgets {
		var n uint64
		for j := range bg.shards {
			n += bg.shards[j].retried.Load()
		}
		p.sample("loopgate_upstream_retries_total", p.labels("upstream", names[i]), n)
	}
	p.family("loopgate_upstream_retries_exhausted_total", "counter", "Retries refused by the upstream's retry budget; the client got the attempt's own error.")
	for i, bg := range budgets {
		var n uint64
		for j := range bg.shards {
			n += bg.shards[j].exhausted.Load()
		}
		p.sample("loopgate_upstream_retries_exhausted_total", p.labels("upstream", names[i]), n)
	}
	p.family("loopgate_upstream_retries_in_flight", "gauge", "Requests to the upstream that are on a retry now.")
	for i, bg := range budgets {
		var n int64
		for j := range bg.shards {
			n += bg.shards[j].retries.Load()
		}
		p.gauge("loopgate_upstream_retries_in_flight", p.labels("upstream", names[i]), n)
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
	_, _ = w.Write(b.Bytes())
}
