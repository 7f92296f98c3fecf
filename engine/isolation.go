// Adaptive slow-call isolation per route: a concurrency limit on the
// route's upstream calls that falls to a floor while its calls are slow,
// so a slow backend holds a few connections, not everyone's.

package engine

import (
	"log"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/upstream"
)

// isolationSettings are a route's compiled config.Isolation.
type isolationSettings struct {
	limit, floor, step    int64
	slowCall, window      int64 // nanoseconds
	minSamples, slowRatio int64
	coldStart             int64
	queue                 int64         // requests that may wait for a permit, all loops
	queueTimeout          time.Duration // the longest wait
	poolShare             int           // percent of a node's pool per loop the route may hold; 100 = no cap
}

func newIsolationSettings(s *config.Isolation) isolationSettings {
	return isolationSettings{limit: int64(s.Limit), floor: int64(s.Floor), step: int64(s.Step),
		slowCall: int64(s.SlowCall), window: int64(s.Window), minSamples: int64(s.MinSamples),
		slowRatio: int64(s.SlowRatio), coldStart: int64(s.ColdStart),
		queue: int64(*s.Queue), queueTimeout: time.Duration(s.QueueTimeout), poolShare: s.MaxPoolShare}
}

// isolation is one route's limiter, kept by the server under the route id.
// Lock-free: permits are one atomic counter against the current limit,
// and the loop whose call ends a window (one CAS) judges it.
type isolation struct {
	route  string
	tenant *upstream.Tenant // what the route's calls count against in a pool's share (max_pool_share)

	limit    atomic.Int64 // the current limit
	inFlight atomic.Int64 // permits held: upstream calls started and not yet ended
	waiting  atomic.Int64 // requests waiting for a permit, all loops (isolationqueue.go)

	windowStart atomic.Int64 // loopstat.Now when the window began
	// calls ended in the window (low 32 bits) and the slow ones (high 32
	// bits): one add per call, and the window's judge takes both at once.
	window atomic.Int64
	seen   atomic.Int64 // calls ended since the start or the last reload, counted up to cold_start (the guard)

	warned   atomic.Bool   // the limit is below half its base: warned once this episode
	rejected atomic.Uint64 // requests answered 42901
	warnings atomic.Uint64 // episodes below half the base
	shrinks  atomic.Uint64 // windows that shrank the limit
	overPool atomic.Uint64 // calls answered 503, code 50302, over the route's pool share
}

func newIsolation(route string, s *isolationSettings) *isolation {
	iso := &isolation{route: route, tenant: upstream.NewTenant()}
	iso.limit.Store(s.limit)
	iso.windowStart.Store(loopstat.Now())
	return iso
}

// reset applies a config version's settings: the cold-start guard starts
// over, and the limit keeps its value unless the new base is lower.
func (iso *isolation) reset(s *isolationSettings) {
	iso.seen.Store(0)
	if iso.limit.Load() > s.limit {
		iso.limit.Store(s.limit)
	}
}

// acquire takes a permit, or reports that the route is at its limit. A
// CAS rather than add-then-undo: a waiting request polls it every tick,
// and an undone add would briefly refuse a request the limit admits.
func (iso *isolation) acquire() bool {
	limit := iso.limit.Load()
	for {
		n := iso.inFlight.Load()
		if n >= limit {
			return false
		}
		if iso.inFlight.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release returns a permit and records how long its call took; the call
// that ends a window judges it: slow (at least min_samples calls, the slow
// ratio reached, past the cold start) cuts the limit to the floor; too few
// calls with some slow keeps it; any other window adds step.
func (iso *isolation) release(s *isolationSettings, took, now int64) {
	iso.inFlight.Add(-1)
	sample := int64(1)
	if took > s.slowCall {
		sample |= 1 << 32
	}
	iso.window.Add(sample)
	// Past the cold start the guard is only read: every loop ends calls
	// here, and a shared line written once per call costs them all.
	if iso.seen.Load() < s.coldStart {
		iso.seen.Add(1)
	}
	start := iso.windowStart.Load()
	if now-start < s.window || !iso.windowStart.CompareAndSwap(start, now) {
		return
	}
	w := iso.window.Swap(0)
	samples, slow := w&(1<<32-1), w>>32
	limit := iso.limit.Load()
	switch {
	case iso.seen.Load() >= s.coldStart && samples >= s.minSamples && slow*100 >= s.slowRatio*samples:
		if limit != s.floor {
			iso.shrinks.Add(1)
		}
		limit = s.floor
	case samples < s.minSamples && slow > 0:
		// Too few calls to judge, some of them slow: at the floor with a
		// slow upstream this is every window, and it must not count as
		// healthy. A quiet window of fast calls still does.
	default:
		limit = min(limit+s.step, s.limit)
	}
	iso.limit.Store(limit)
	if limit*2 < s.limit {
		if !iso.warned.Swap(true) {
			iso.warnings.Add(1)
			// Once per episode; a notice (notices.go), never a wait.
			log.Printf("warning: isolation route=%s limit %d, below half its base %d: %d of %d calls in %v over %v",
				iso.route, limit, s.limit, slow, samples, time.Duration(s.window), time.Duration(s.slowCall))
		}
	} else {
		iso.warned.Store(false)
	}
}

var errIsolated = &codec.Error{Status: 429, Code: 42901, Message: "route at its concurrency limit (slow upstream); retry later"}

// acquireIsolation takes a permit of the route's limiter before its
// upstream call. At the limit the request waits for one in the loop's
// queue (isolationqueue.go), or, with the queue full, is answered 429,
// code 42901. Done (endResilience) gives a permit back on every path, so
// a client that leaves leaks nothing.
func (ex *exchange) acquireIsolation() bool {
	iso := ex.route.isolation
	if iso.acquire() {
		ex.policy.isoHeld = true
		return true
	}
	if !ex.waitForPermit() {
		ex.refuseIsolated()
	}
	return false
}

// refuseIsolated answers 429, code 42901, with Retry-After: 1.
func (ex *exchange) refuseIsolated() {
	ex.route.isolation.rejected.Add(1)
	ex.fx.Rejection.AddHeader("Retry-After", retryAfterOne)
	ex.localReply(errIsolated)
}

// releaseIsolation gives the permit back with the call's duration. A
// request that never got one left the queue with its waiting phase
// (putExchange).
func (ex *exchange) releaseIsolation() {
	if !ex.policy.isoHeld {
		return
	}
	ex.policy.isoHeld = false
	r := ex.route
	if l := ex.loop; l.permitWaiters.head != nil {
		l.grantDue = true // leave or the next tick hands it on
	}
	switch ex.end.upErr {
	case upstream.ErrPoolShare, upstream.ErrQueueFull, upstream.ErrPoolFull:
		// Refused by the pool, not answered by the upstream: a fast
		// refusal counted as a fast call would hide the slow calls
		// holding the pool, and the limit would never shrink.
		if ex.end.upErr == upstream.ErrPoolShare {
			r.isolation.overPool.Add(1)
		}
		r.isolation.inFlight.Add(-1)
		return
	}
	if ex.retry.n == 0 { // answered before its call began: no sample
		r.isolation.inFlight.Add(-1)
		return
	}
	now := loopstat.Now()
	r.isolation.release(&r.isolationCfg, now-ex.end.callStart, now)
}

// poolShare is what the route's upstream calls count against in each
// pool: its tenant and share, or none when isolation is off or the share
// is the whole pool.
func (r *route) poolShare() (*upstream.Tenant, int) {
	if r.isolation == nil || r.isolationCfg.poolShare >= 100 {
		return nil, 0
	}
	return r.isolation.tenant, r.isolationCfg.poolShare
}
