// Retries on another node: which failed attempts are tried again (the one
// decision, shouldRetry, made with the route's policy.RetryPolicy and the
// upstream's policy.Budget), and the restart: the edge from a failed
// attempt back to attempting.

package engine

import (
	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/upstream"
)

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
	case kind == failFinal, ex.cc == nil, ex.retry.n >= p.Attempts:
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
		ex.retry.budget.Count(ex.loop.index)
		return true
	}
	return ex.retry.budget.Admit(ex.loop.index, ex.retry.retrying, ex.retry.budgetLim)
}

// retryAfter tries the request again on a node not yet tried (when there is
// one) if shouldRetry allows it, and reports whether it did. The failed
// attempt's call is restarted with the same head; for a status the
// response is abandoned first. On the call's loop, from its CallFailed or
// ResponseHead.
func (ex *exchange) retryAfter(c *upstream.Call, kind failureKind, failed *upstream.Pool) bool {
	if kind == failFinal || ex.chain != nil && ex.fx.Upstream.Node > 0 {
		return false // before the exclusion is worked out: the common case; a directed request stays on its node
	}
	exclude := ex.retry.group.Exclude(ex.retry.tried, failed)
	avoid := exclude.Union(ex.retry.group.Unavailable())
	if !ex.shouldRetry(kind, &avoid) {
		return false
	}
	charged := kind != failUnsent && !ex.retry.retrying // shouldRetry took a retry from the budget
	head := c.TakeHead()
	if head == nil { // cannot happen: the call keeps its head until it ends
		ex.retry.budget.Release(ex.loop.index, charged)
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

// endResilience settles the exchange with its route's breaker and its
// upstream's retry budget, once: putExchange calls it on every path an
// exchange ends by.
func (ex *exchange) endResilience() {
	ex.recordBreaker()
	ex.releaseIsolation()
	if ex.retry.budget != nil {
		ex.retry.budget.End(ex.loop.index, ex.retry.retrying)
		ex.retry.budget = nil
	}
	ex.retry.group, ex.retry.upDef = nil, nil // a recycled exchange holds no config version
}
