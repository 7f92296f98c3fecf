// Retries on another node: which failed attempts are tried again (the one
// decision, shouldRetry), the per-upstream retry budget, and the restart.

package engine

import (
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/upstream"
)

// retryPolicy is a route's compiled retry settings (config.Retry).
type retryPolicy struct {
	attempts int
	methods  []string      // retried after their bytes reached a node
	onStatus uint8         // bit s-502 for a retried status 502, 503, 504
	perTry   time.Duration // each attempt's response timeout; 0 = the route's
}

func newRetryPolicy(r *config.Retry) retryPolicy {
	p := retryPolicy{attempts: r.Attempts, methods: r.Methods, perTry: time.Duration(r.PerTryTimeout)}
	for _, s := range r.OnStatus {
		p.onStatus |= 1 << uint(s-502)
	}
	return p
}

// retriesStatus reports whether status is on the route's on_status list.
func (p *retryPolicy) retriesStatus(status int) bool {
	return status >= 502 && status <= 504 && p.onStatus&(1<<uint(status-502)) != 0
}

// allowsMethod reports whether method may be retried after its bytes
// reached a node. string(method) in a comparison does not allocate.
func (p *retryPolicy) allowsMethod(method []byte) bool {
	for _, m := range p.methods {
		if m == string(method) {
			return true
		}
	}
	return false
}

// failureKind is what a failed attempt says about trying it again,
// judged from the error's kind and how far the call got, never from what
// happened to the client since.
type failureKind uint8

const (
	failFinal   failureKind = iota // not retried: a malformed response, a local limit, a response already begun
	failUnsent                     // the request never reached a node: connect error or connect timeout
	failReset                      // the node closed or reset the connection before any response byte
	failTimeout                    // the attempt's per_try_timeout passed before any response byte
	failStatus                     // the node answered a status on the route's on_status list
)

// classifyFailure names the kind of a failed call's error.
func classifyFailure(c *upstream.Call, err *upstream.Error, perTry bool) failureKind {
	switch {
	case c.Answered():
		return failFinal
	case err == upstream.ErrConnect && !c.Wrote():
		return failUnsent
	case err == upstream.ErrReset, err == upstream.ErrConnect:
		return failReset // the head was written (a resend on a fresh connection failed): it may have arrived
	case err == upstream.ErrTimeout && perTry:
		return failTimeout
	}
	return failFinal
}

// shouldRetry is the one place a failed attempt is judged: it reports
// whether the exchange tries again, on a node outside exclude (those tried
// and those out of rotation). The last condition takes a retry from the
// upstream's budget.
func (ex *exchange) shouldRetry(kind failureKind, exclude *upstream.NodeSet) bool {
	p := &ex.route.retry
	switch {
	case kind == failFinal, ex.cc == nil, ex.retry.n >= p.attempts:
		return false
	case !hasNodeOutside(ex.retry.group, exclude):
		return false // as nginx: a node is not tried twice for one request
	case ex.responding() || ex.resp.interims > 0:
		return false // part of a response reached the client
	case ex.retry.hostFromNode:
		return false // the head names the failed node as its Host
	case kind != failUnsent && !ex.retry.retryMethod:
		return false // its bytes reached a node, and the method may not be sent twice
	case kind != failUnsent && ex.body.mode != codec.BodyNone && !ex.body.keep:
		return false // the body that went out was not kept for a replay (streamed, or over request_buffer_bytes)
	}
	if kind == failUnsent {
		// The request reached no node, so trying the next one adds no
		// load anywhere: nginx's proxy_next_upstream error has no budget
		// either. Charging it would turn a dead node into 502s as soon as
		// the budget's floor is in use.
		ex.retry.budget.count(ex.loop.index)
		return true
	}
	return ex.retry.budget.admit(ex.loop.index, ex.retry.retrying, ex.retry.budgetLim)
}

// retryAfter tries the request again on a node not yet tried (when there is
// one) if shouldRetry allows it, and reports whether it did. The failed
// attempt's call is restarted with the same head; for a status the
// response is abandoned first. On the call's loop, from its CallFailed or
// ResponseHead.
func (ex *exchange) retryAfter(c *upstream.Call, kind failureKind, failed *upstream.Pool) bool {
	if kind == failFinal {
		return false // before the exclusion is worked out: the common case
	}
	exclude := ex.retry.group.Exclude(ex.retry.tried, failed)
	avoid := exclude.Union(ex.retry.group.Unavailable())
	if !ex.shouldRetry(kind, &avoid) {
		return false
	}
	charged := kind != failUnsent && !ex.retry.retrying // shouldRetry took a retry from the budget
	head := c.TakeHead()
	if head == nil { // cannot happen: the call keeps its head until it ends
		ex.retry.budget.release(ex.loop.index, charged)
		return false
	}
	if kind == failStatus {
		c.Abort()
	}
	ex.retry.retrying = ex.retry.retrying || charged
	ex.retry.n++
	ex.retry.tried = exclude
	ex.retry.attached = false
	ex.rewindBody()
	ex.startCall(ex.pickRetryNode(avoid), head)
	return true
}

// pickRetryNode picks the next attempt's node: for a consistent-hash
// request the key's next node on the ring, so the same key keeps going to
// the same fallback while its own node fails; else the balancer's pick.
// The key lives in the filters' arena, which holds it until the exchange
// ends.
func (ex *exchange) pickRetryNode(avoid upstream.NodeSet) *upstream.Pool {
	if ex.chain != nil {
		if key := ex.fx.Upstream.HashKey; key != nil {
			return ex.retry.group.PickHash(key, avoid)
		}
	}
	return ex.retry.group.Pick(avoid)
}

// hasNodeOutside reports whether g has a node not in s. Only a failed
// attempt asks, so a walk over the nodes is affordable.
func hasNodeOutside(g *upstream.Group, s *upstream.NodeSet) bool {
	for i := range g.Pools() {
		if !s.Has(i) {
			return true
		}
	}
	return false
}

// retryBudget is one upstream's retry budget (Envoy's): retries in flight
// at most percent of the requests in flight, and always floor. Kept by the
// server under the upstream's name, so reloads keep the counts; a loop
// writes only its own shard.
type retryBudget struct {
	shards []budgetShard
}

// budgetLimits are an upstream's config.RetryBudget, per config version.
type budgetLimits struct{ percent, floor int64 }

type budgetShard struct {
	_         cacheLine
	requests  atomic.Int64  // exchanges with an upstream call, from its start to the exchange's end
	retries   atomic.Int64  // those of them that retried
	retried   atomic.Uint64 // retries made
	exhausted atomic.Uint64 // retries refused by the budget
	_         cacheLine
}

func newRetryBudget(loops int) *retryBudget {
	return &retryBudget{shards: make([]budgetShard, loops)}
}

// begin counts a request in flight on loop.
func (b *retryBudget) begin(loop int) { b.shards[loop].requests.Add(1) }

// end counts it out, with its retry when it held one.
func (b *retryBudget) end(loop int, retried bool) {
	s := &b.shards[loop]
	s.requests.Add(-1)
	if retried {
		s.retries.Add(-1)
	}
}

// admit takes a retry for a request on loop within lim; one that holds a
// retry already keeps it. It sums the shards, which only a retry pays for.
func (b *retryBudget) admit(loop int, holding bool, lim budgetLimits) bool {
	s := &b.shards[loop]
	if holding {
		s.retried.Add(1)
		return true
	}
	var requests, retries int64
	for i := range b.shards {
		requests += b.shards[i].requests.Load()
		retries += b.shards[i].retries.Load()
	}
	if retries >= max(lim.floor, requests*lim.percent/100) {
		s.exhausted.Add(1)
		return false
	}
	s.retries.Add(1)
	s.retried.Add(1)
	return true
}

// count counts a retry on loop that the budget does not limit (see
// shouldRetry): it is made, but holds no place among the retries in flight.
func (b *retryBudget) count(loop int) { b.shards[loop].retried.Add(1) }

// budgetTotals are a budget's counters summed over its shards, for the
// metrics page.
type budgetTotals struct {
	retried, exhausted uint64
	inFlight           int64 // requests on a retry now
}

// totals sums the shards; the admin goroutine reads them while loops write.
func (b *retryBudget) totals() budgetTotals {
	var t budgetTotals
	for i := range b.shards {
		s := &b.shards[i]
		t.retried += s.retried.Load()
		t.exhausted += s.exhausted.Load()
		t.inFlight += s.retries.Load()
	}
	return t
}

// release gives back a retry admit took but the exchange could not use.
func (b *retryBudget) release(loop int, taken bool) {
	s := &b.shards[loop]
	s.retried.Add(^uint64(0))
	if taken {
		s.retries.Add(-1)
	}
}

// endResilience settles the exchange with its route's breaker and its
// upstream's retry budget, once: putExchange calls it on every path an
// exchange ends by.
func (ex *exchange) endResilience() {
	ex.recordBreaker()
	ex.releaseIsolation()
	if ex.retry.budget != nil {
		ex.retry.budget.end(ex.loop.index, ex.retry.retrying)
		ex.retry.budget = nil
	}
	ex.retry.group, ex.retry.upDef = nil, nil // a recycled exchange holds no config version
}
