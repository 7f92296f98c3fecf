// Adaptive slow-call isolation per route: a concurrency limit on the
// route's upstream calls that falls to a floor while its calls are slow,
// so a slow backend holds a few connections, not everyone's.

package policy

import (
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/pool/alert"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/upstream"
)

// IsolationSettings are a route's compiled Isolation, per config version.
type IsolationSettings struct {
	limit, floor, step    int64
	slowCall, window      int64 // nanoseconds
	minSamples, slowRatio int64
	coldStart             int64
	queue                 int64         // requests that may wait for a permit, all loops
	queueTimeout          time.Duration // the longest wait
	poolShare             int           // percent of a node's pool per loop the route may hold; 100 = no cap
}

// NewIsolationSettings compiles a route's effective isolation section.
func NewIsolationSettings(s *Isolation) IsolationSettings {
	return IsolationSettings{limit: int64(s.Limit), floor: int64(s.Floor), step: int64(s.Step),
		slowCall: int64(s.SlowCall), window: int64(s.Window), minSamples: int64(s.MinSamples),
		slowRatio: int64(s.SlowRatio), coldStart: int64(s.ColdStart),
		queue: int64(*s.Queue), queueTimeout: time.Duration(s.QueueTimeout), poolShare: s.MaxPoolShare}
}

// Limiter is one route's isolation limiter, kept by the Registry under
// the route id. Lock-free: permits are one atomic counter against the current limit,
// and the loop whose call ends a window (one CAS) judges it.
type Limiter struct {
	route  string
	tenant *upstream.Tenant // what the route's calls count against in a pool's share (max_pool_share)

	limit    atomic.Int64 // the current limit
	inFlight atomic.Int64 // permits held: upstream calls started and not yet ended
	waiting  atomic.Int64 // requests waiting for a permit, all loops (Wait)

	windowStart atomic.Int64 // loopstat.Now when the window began
	// calls ended in the window (low 32 bits) and the slow ones (high 32
	// bits): one add per call, and the window's judge takes both at once.
	window atomic.Int64
	seen   atomic.Int64 // calls ended since the start or the last reload, counted up to cold_start (the guard)

	warned   atomic.Bool   // the limit is below half its base: warned once this episode
	alerted  atomic.Bool   // the limit is below alerts.isolation_threshold of its base: alerted once this episode
	rejected atomic.Uint64 // requests answered 42901
	warnings atomic.Uint64 // episodes below half the base
	shrinks  atomic.Uint64 // windows that shrank the limit
	overPool atomic.Uint64 // calls answered 503, code 50302, over the route's pool share
}

// NewLimiter makes route's limiter at its base limit; the engine keeps it
// by route id.
func NewLimiter(route string, s *IsolationSettings) *Limiter {
	iso := &Limiter{route: route, tenant: upstream.NewTenant()}
	iso.limit.Store(s.limit)
	iso.windowStart.Store(loopstat.Now())
	return iso
}

// Reset applies a config version's settings: the cold-start guard starts
// over, and the limit keeps its value unless the new base is lower.
func (iso *Limiter) Reset(s *IsolationSettings) {
	iso.seen.Store(0)
	if iso.limit.Load() > s.limit {
		iso.limit.Store(s.limit)
	}
}

// Acquire takes a permit, or reports that the route is at its limit. A
// CAS rather than add-then-undo: a waiting request polls it every tick,
// and an undone add would briefly refuse a request the limit admits.
func (iso *Limiter) Acquire() bool {
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

// Release returns a permit and records how long its call took; the call
// that ends a window judges it: slow (at least min_samples calls, the slow
// ratio reached, past the cold start) cuts the limit to the floor; too few
// calls with some slow keeps it; any other window adds step.
func (iso *Limiter) Release(s *IsolationSettings, took, now int64) {
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
			// Once per episode; a notice (the engine's log writer), never a wait.
			log.Printf("warning: isolation route=%s limit %d, below half its base %d: %d of %d calls in %v over %v",
				iso.route, limit, s.limit, slow, samples, time.Duration(s.window), time.Duration(s.slowCall))
		}
	} else {
		iso.warned.Store(false)
	}
	// Once per window at most, and only the call that ends it gets here.
	if limit*100 < alert.IsolationThreshold()*s.limit {
		if !iso.alerted.Swap(true) {
			alert.Raise(alert.Event{Kind: alert.IsolationLow, Subject: iso.route,
				Message: fmt.Sprintf("isolation route=%s limit %d, below %d%% of its base %d", iso.route, limit, alert.IsolationThreshold(), s.limit)})
		}
	} else if iso.alerted.Load() && iso.alerted.Swap(false) {
		alert.Raise(alert.Event{Kind: alert.IsolationLow, Subject: iso.route, Resolved: true,
			Message: fmt.Sprintf("isolation route=%s limit %d of its base %d", iso.route, limit, s.limit)})
	}
}

// Route is the id of the route the limiter guards.
func (iso *Limiter) Route() string { return iso.route }

// Tenant is what the route's calls count against in a pool's share.
func (iso *Limiter) Tenant() *upstream.Tenant { return iso.tenant }

// Drop gives back a permit whose call left no sample: answered before it
// began, or refused by the pool rather than answered by the upstream (a
// fast refusal counted as a fast call would hide the slow calls holding
// the pool, and the limit would never shrink). overPool counts a refusal
// over the route's pool share.
func (iso *Limiter) Drop(overPool bool) {
	if overPool {
		iso.overPool.Add(1)
	}
	iso.inFlight.Add(-1)
}

// Refused counts a request answered 429, code 42901, at the limit.
func (iso *Limiter) Refused() { iso.rejected.Add(1) }

// Queue is the number of requests that may wait for a permit, all
// loops, and the longest wait.
func (s *IsolationSettings) Queue() (int64, time.Duration) { return s.queue, s.queueTimeout }

// PoolShare is the percent of a node's pool per loop the route may hold;
// 100 = no cap.
func (s *IsolationSettings) PoolShare() int { return s.poolShare }

// Wait takes a place among the requests waiting for a permit, all loops,
// within the queue's bound; it reports false, taking none, when the queue
// is full or off. Leave gives it back.
func (iso *Limiter) Wait(s *IsolationSettings) bool {
	if iso.waiting.Add(1) > s.queue {
		iso.waiting.Add(-1)
		return false
	}
	return true
}

// Leave gives back a place Wait took: granted, timed out, or ended.
func (iso *Limiter) Leave() { iso.waiting.Add(-1) }
