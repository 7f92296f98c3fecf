// Leasing: tokens taken from the cluster bucket in batches, spent locally.

package cluster

import (
	"math"
	"strconv"
	"sync/atomic"
	"time"
)

// lease is the tokens one node holds of one cluster limit. Redis counts a
// token as spent when it grants it, so tokens held here are spent as far
// as the cluster is concerned: spending them needs no call, and nothing a
// node does with its lease can make the cluster admit more than the bucket
// granted.
//
// The lease size N is the node's recent demand over the lease window, at
// most Burst / effective nodes. A request that finds tokens takes one with
// a compare-and-swap; the one that leaves fewer than N/2 queues a refill of
// the rest. A request that finds none asks Redis for its own tokens plus
// the room left in the lease. Invariant: held + reserved <= N whenever
// tokens are reserved, so the held count never exceeds N by more than what
// Return adds and the controller hands back within a tick.
type lease struct {
	held       atomic.Int64 // granted by Redis and not yet spent
	reserved   atomic.Int64 // asked for on the lease's behalf, reply pending
	size       atomic.Int64 // N; 0 when leasing is off
	refilling  atomic.Bool  // a refill is queued or running
	emptyUntil atomic.Int64 // clock before which Redis said it has nothing for us
	demand     atomic.Int64 // tokens asked of Take, ever

	leases   atomic.Uint64 // Redis replies that granted tokens
	leased   atomic.Uint64 // tokens they granted
	returned atomic.Uint64 // tokens handed back to Redis

	// Owned by the controller.
	window       int64   // LeaseWindow in nanoseconds; <= 0: leasing off
	rate         float64 // demand estimate, tokens a second
	lastDemand   int64
	lastAt       int64 // clock of the last estimate
	lastActiveAt int64 // clock when demand last moved
}

// idleAfter is how long a node must see no demand for a limit before it
// hands its whole lease back.
const idleAfter = time.Second

// startLease sizes a new lease for a fair share of the cluster rate.
func (l *Limit) startLease(spec LimitSpec, eff int64) {
	l.window = int64(spec.LeaseWindow)
	l.rate = spec.Rate / float64(eff)
	l.size.Store(l.leaseSize(eff))
}

// leaseSize is N for the current demand estimate and eff nodes.
func (l *Limit) leaseSize(eff int64) int64 {
	if l.window <= 0 {
		return 0
	}
	n := int64(math.Ceil(l.rate * float64(l.window) / 1e9))
	return min(max(1, n), max(1, l.spec.Burst/eff))
}

// takeHeld spends n leased tokens if there are that many.
func (l *Limit) takeHeld(n int64) bool {
	for {
		h := l.held.Load()
		if h < n {
			return false
		}
		if l.held.CompareAndSwap(h, h-n) {
			return true
		}
	}
}

// reserve claims the room left in the lease for tokens about to be asked
// for, and returns it (0 when the lease is full or off).
func (l *Limit) reserve() int64 {
	size := l.size.Load()
	for {
		r := l.reserved.Load()
		room := size - l.held.Load() - r
		if room <= 0 {
			return 0
		}
		if l.reserved.CompareAndSwap(r, r+room) {
			return room
		}
	}
}

// refill queues a top-up when fewer than half the lease's tokens are left,
// unless one is already on its way or Redis said it has none. Never blocks.
func (l *Limit) refill(now int64) {
	size := l.size.Load()
	if size < 2 || 2*l.held.Load() >= size || now < l.emptyUntil.Load() ||
		!l.refilling.CompareAndSwap(false, true) {
		return
	}
	room := l.reserve()
	if room == 0 {
		l.refilling.Store(false)
		return
	}
	debt := l.debt.Swap(0)
	if !l.c.submit(job{kind: jobRefill, lim: l, want: room, debt: debt}) {
		l.reserved.Add(-room)
		l.debt.Add(debt)
		l.refilling.Store(false)
	}
}

// deposit adds what Redis granted for the lease and releases the
// reservation it was asked under.
func (l *Limit) deposit(granted, room int64) {
	l.held.Add(granted)
	l.reserved.Add(-room)
}

// exhausted records that Redis granted less than asked: until the tokens
// would be there (at most one lease window, or one token's interval when
// that is longer: asking sooner could not find a new token), requests that
// find the lease empty are refused here without asking. It returns the
// wait.
func (l *Limit) exhausted(r Result) time.Duration {
	wait := r.RetryAfter
	if w := time.Duration(l.window); w > 0 {
		if w = max(w, time.Duration(l.intervalUS)*time.Microsecond); wait > w {
			wait = w
		}
	}
	l.emptyUntil.Store(l.c.now() + int64(wait))
	return wait
}

// adjust is the controller's tick for this limit: it updates the shadow
// quota, what the bucket charges this node for its share, and the demand
// estimate, resizes the lease, and hands back what the lease holds beyond
// its size, or all of it once the limit is idle. While Redis is down
// leased tokens are kept: the failure mode spends them first.
func (l *Limit) adjust(now int64) {
	eff := l.c.effective.Load()
	l.setShadow(eff)
	l.setShare(l.c.live.Load(), l.c.known.Load())
	d := l.demand.Load()
	if l.lastAt != 0 && now > l.lastAt {
		measured := float64(d-l.lastDemand) * 1e9 / float64(now-l.lastAt)
		l.rate = (l.rate + measured) / 2
	}
	if d != l.lastDemand || l.lastActiveAt == 0 {
		l.lastActiveAt = now
	}
	l.lastDemand, l.lastAt = d, now
	size := l.leaseSize(eff)
	l.size.Store(size)
	if l.c.br.health() != Up {
		return
	}
	keep := size
	if now-l.lastActiveAt >= int64(idleAfter) {
		keep = 0
	}
	if h := l.held.Load(); h > keep && l.held.CompareAndSwap(h, keep) {
		if !l.c.submit(job{kind: jobGiveBack, lim: l, n: h - keep}) {
			l.held.Add(h - keep)
		}
	}
}

// giveBack hands n unused tokens back to the cluster bucket, on a worker.
func (l *Limit) giveBack(cl *redisClient, n int64) {
	reply, err := l.c.call(cl, giveBackScript, l.key, l.intervalArg, strconv.FormatInt(n, 10))
	if err == nil && len(reply) == 1 {
		l.returned.Add(uint64(reply[0]))
	}
}

// giveBackHeld hands the whole lease back, at Close.
func (l *Limit) giveBackHeld(cl *redisClient) {
	if h := l.held.Swap(0); h > 0 {
		l.giveBack(cl, h)
	}
}
