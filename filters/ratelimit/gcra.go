// GCRA: a limit's parameters, the lock-free bucket and the decision it makes.

package ratelimit

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// maxSpan bounds burst·T so that TAT arithmetic on a monotonic nanosecond
// clock cannot overflow: about 146 years.
const maxSpan = 1 << 62

// Limit is a rate and a burst in the units a Bucket works in. It is a small
// immutable value; the zero Limit allows nothing.
type Limit struct {
	interval  int64 // T: nanoseconds per token
	burst     int64 // b: tokens an idle bucket allows at once
	tolerance int64 // b·T: how far the TAT may run ahead of now
}

// NewLimit returns the limit of perSecond tokens a second with bursts of
// burst. The rate is rounded to a whole number of nanoseconds per token, so
// it must be at most one billion a second; burst must be at least 1.
func NewLimit(perSecond float64, burst int64) (Limit, error) {
	if !(perSecond > 0) || math.IsInf(perSecond, 1) {
		return Limit{}, fmt.Errorf("ratelimit: rate %v is not a positive number", perSecond)
	}
	interval := 1e9 / perSecond
	if interval < 1 {
		return Limit{}, fmt.Errorf("ratelimit: rate %v is above 1e9 per second", perSecond)
	}
	if burst < 1 {
		return Limit{}, fmt.Errorf("ratelimit: burst %d is below 1", burst)
	}
	if interval*float64(burst) >= maxSpan {
		return Limit{}, fmt.Errorf("ratelimit: rate %v with burst %d spans too long", perSecond, burst)
	}
	t := int64(math.Round(interval))
	return Limit{interval: t, burst: burst, tolerance: t * burst}, nil
}

// PerSecond is the rate, as the X-RateLimit-Limit header reports it.
func (l Limit) PerSecond() float64 {
	if l.interval == 0 {
		return 0
	}
	return 1e9 / float64(l.interval)
}

// Burst is the number of tokens an idle bucket allows at once.
func (l Limit) Burst() int64 { return l.burst }

// Interval is the time one token takes to come back (1/rate).
func (l Limit) Interval() time.Duration { return time.Duration(l.interval) }

// Decision is what Allow decided, with the figures the rate-limit headers
// report.
type Decision struct {
	Allowed bool
	// Remaining is the number of tokens that could still be taken at once.
	Remaining int64
	// Reset is the time until the bucket is full again.
	Reset time.Duration
	// RetryAfter is, for a denial, the time until the same request would
	// be allowed if nothing else took tokens; 0 when allowed. A request
	// for more than the burst never fits: its RetryAfter is only the time
	// until the bucket is full.
	RetryAfter time.Duration
}

// RetryAfterSeconds is RetryAfter in whole seconds, rounded up as the
// Retry-After header needs it: at least 1 for a denial, 0 when allowed.
func (d Decision) RetryAfterSeconds() int64 {
	if d.Allowed {
		return 0
	}
	return max(1, ceilSeconds(d.RetryAfter))
}

// ResetSeconds is Reset in whole seconds, rounded up, for X-RateLimit-Reset.
func (d Decision) ResetSeconds() int64 { return ceilSeconds(d.Reset) }

func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}

// dead is the TAT of a bucket evicted from a Keys table: no decision is
// made on it, and whoever finds it looks the key up again.
const dead = math.MinInt64

// Bucket is one key's GCRA state: its TAT, in nanoseconds on the caller's
// clock. The zero Bucket is full. A Bucket is safe for concurrent use by
// every loop and never blocks; it must not be copied after first use.
type Bucket struct {
	tat atomic.Int64
}

// Allow takes n tokens at now (nanoseconds on a monotonic clock, the same
// clock on every call) if the limit allows it, and says what it decided.
// n = 0 only asks: it takes nothing and reports the bucket. A denial
// changes nothing, so retrying too early costs the client nothing either.
// Lock-free: one load and, when allowed, one compare-and-swap, retried only
// if another loop changed the bucket in between. No allocation.
func (b *Bucket) Allow(l Limit, now, n int64) Decision {
	d, _ := b.allow(l, now, n)
	return d
}

// allow is Allow that reports false, deciding nothing, once the bucket has
// been evicted from its table.
func (b *Bucket) allow(l Limit, now, n int64) (Decision, bool) {
	if l.interval == 0 {
		return Decision{}, true
	}
	for {
		old := b.tat.Load()
		if old == dead {
			return Decision{}, false
		}
		tat := max(old, now)
		next := tat + n*l.interval
		if n > l.burst || next-l.tolerance > now {
			return l.denial(tat, now, n), true
		}
		if n <= 0 {
			return l.granted(tat, now), true
		}
		if b.tat.CompareAndSwap(old, next) {
			return l.granted(next, now), true
		}
	}
}

// granted describes a bucket whose TAT is now tat, after an allowed take.
func (l Limit) granted(tat, now int64) Decision {
	return Decision{Allowed: true, Remaining: l.remaining(tat, now), Reset: time.Duration(tat - now)}
}

// denial describes the refusal of n tokens from a bucket at tat >= now.
func (l Limit) denial(tat, now, n int64) Decision {
	retry := tat + min(n, l.burst)*l.interval - l.tolerance - now
	return Decision{
		Remaining:  l.remaining(tat, now),
		Reset:      time.Duration(tat - now),
		RetryAfter: time.Duration(max(retry, 1)),
	}
}

// remaining counts the whole tokens left between tat and the tolerance.
// After a rate change (a reload, a shadow quota) the TAT can stand beyond
// the new tolerance; that is none left, not a negative count.
func (l Limit) remaining(tat, now int64) int64 {
	return max(0, (now+l.tolerance-tat)/l.interval)
}
