// Admission: what the exchange asks of its route's policies (package
// policy) before its upstream call, the circuit breaker and the isolation
// permit, and how it settles with them when it ends. The wait for a
// permit is in isolationqueue.go.

package engine

import (
	"strconv"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/upstream"
)

var errBreakerOpen = &codec.Error{Status: 503, Code: 55301, Message: "circuit breaker open for this route; retry later"}

// admitBreaker asks the route's breaker for the call, and answers 503,
// code 55301, with Retry-After (the seconds until the circuit may let
// calls through) when it refuses. It reports whether the call may go on.
func (ex *exchange) admitBreaker() bool {
	r := ex.route
	p, left := r.breaker.Admit(r.breakerCfg, loopstat.Now())
	if p != nil {
		ex.policy.brk = p
		return true
	}
	secs := int64((left + time.Second - 1) / time.Second)
	ex.fx.Rejection.AddHeader("Retry-After", strconv.AppendInt(ex.retryAfterBuf[:0], max(secs, 1), 10))
	ex.localReply(errBreakerOpen)
	return false
}

// recordBreaker tells the route's breaker how the exchange's upstream call
// ended: failed by a connect error, timeout or reset, or by a status the
// route counts, and whether it was slow. A call that ended with neither
// (the client left first) gives its permit back.
func (ex *exchange) recordBreaker() {
	p := ex.policy.brk
	if p == nil {
		return
	}
	ex.policy.brk = nil
	r := ex.route
	s := r.breakerCfg
	now := loopstat.Now()
	var failed bool
	switch {
	case ex.end.upErr == upstream.ErrConnect, ex.end.upErr == upstream.ErrTimeout, ex.end.upErr == upstream.ErrReset:
		failed = true
	case ex.end.upStatus != 0:
		failed = s.FailsOn(ex.end.upStatus)
	default:
		r.breaker.Abandon(p)
		return
	}
	r.breaker.Record(s, p, failed, s.Slow(now-ex.end.callStart), now)
}

var errIsolated = &codec.Error{Status: 429, Code: 42901, Message: "route at its concurrency limit (slow upstream); retry later"}

// acquireIsolation takes a permit of the route's limiter before its
// upstream call. At the limit the request waits for one in the loop's
// queue (isolationqueue.go), or, with the queue full, is answered 429,
// code 42901. Done (endResilience) gives a permit back on every path, so
// a client that leaves leaks nothing.
func (ex *exchange) acquireIsolation() bool {
	if iso := ex.route.limiter(); iso.Acquire() {
		ex.policy.iso = iso // kept for the call's pool share and the release
		return true
	}
	if !ex.waitForPermit() {
		ex.refuseIsolated()
	}
	return false
}

// refuseIsolated answers 429, code 42901, with Retry-After: 1.
func (ex *exchange) refuseIsolated() {
	ex.route.limiter().Refused()
	ex.fx.Rejection.AddHeader("Retry-After", retryAfterOne)
	ex.localReply(errIsolated)
}

// releaseIsolation gives the permit back with the call's duration. A
// request that never got one left the queue with its waiting phase
// (putExchange).
func (ex *exchange) releaseIsolation() {
	iso := ex.policy.iso
	if iso == nil {
		return
	}
	ex.policy.iso = nil
	if l := ex.loop; l.permitWaiters.head != nil {
		l.grantDue = true // leave or the next tick hands it on
	}
	switch ex.end.upErr {
	case upstream.ErrPoolShare, upstream.ErrQueueFull, upstream.ErrPoolFull:
		// Refused by the pool, not answered by the upstream: no sample.
		iso.Drop(ex.end.upErr == upstream.ErrPoolShare)
		return
	}
	if ex.retry.n == 0 { // answered before its call began: no sample
		iso.Drop(false)
		return
	}
	now := ex.loop.fresh()
	iso.Release(ex.route.isolationCfg, now-ex.end.callStart, now)
}

// poolShare is what the route's upstream calls count against in each
// pool: its tenant and share, or none when isolation is off or the share
// is the whole pool. The tenant is the limiter whose permit the exchange
// holds (every call of a route with isolation starts holding one).
func (ex *exchange) poolShare() (*upstream.Tenant, int) {
	r := ex.route
	if r.isolationCfg == nil {
		return nil, 0
	}
	if share := r.isolationCfg.PoolShare(); share < 100 {
		iso := ex.policy.iso
		if iso == nil {
			iso = r.limiter()
		}
		return iso.Tenant(), share
	}
	return nil, 0
}
