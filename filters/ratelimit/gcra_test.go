package ratelimit

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

func mustLimit(t testing.TB, perSecond float64, burst int64) Limit {
	t.Helper()
	l, err := NewLimit(perSecond, burst)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestNewLimitRejectsNonsense(t *testing.T) {
	for _, c := range []struct {
		rate  float64
		burst int64
	}{{0, 1}, {-1, 1}, {2e9, 1}, {10, 0}, {1e-9, 1 << 40}} {
		if _, err := NewLimit(c.rate, c.burst); err == nil {
			t.Errorf("NewLimit(%v, %d) accepted", c.rate, c.burst)
		}
	}
	l := mustLimit(t, 3, 5)
	if l.Interval() != 333333333 || l.Burst() != 5 {
		t.Errorf("3/s burst 5 = interval %v burst %d", l.Interval(), l.Burst())
	}
}

// An idle bucket allows the burst at once, then one token per interval;
// each denial says exactly when the request would fit.
func TestBucketBurstThenRate(t *testing.T) {
	l := mustLimit(t, 10, 3) // one token per 100 ms
	var b Bucket
	now := 1000 * ms
	for i := int64(0); i < 3; i++ {
		d := b.Allow(l, now, 1)
		if !d.Allowed || d.Remaining != 2-i || d.Reset != time.Duration((i+1)*100*ms) {
			t.Fatalf("take %d: %+v", i, d)
		}
	}
	d := b.Allow(l, now, 1)
	if d.Allowed || d.Remaining != 0 || d.RetryAfter != 100*time.Millisecond || d.Reset != 300*time.Millisecond {
		t.Fatalf("fourth take at once: %+v", d)
	}
	if d.RetryAfterSeconds() != 1 || d.ResetSeconds() != 1 {
		t.Errorf("seconds: retry %d reset %d", d.RetryAfterSeconds(), d.ResetSeconds())
	}
	if d := b.Allow(l, now+99*ms, 1); d.Allowed || d.RetryAfter != time.Millisecond {
		t.Fatalf("1 ms early: %+v", d)
	}
	if d := b.Allow(l, now+100*ms, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("on time: %+v", d)
	}
	// A request for two when one is back waits for the second.
	if d := b.Allow(l, now+200*ms, 2); d.Allowed || d.RetryAfter != 100*time.Millisecond || d.Remaining != 1 {
		t.Fatalf("two with one back: %+v", d)
	}
	// More than the burst never fits.
	if d := b.Allow(l, now+time.Hour.Nanoseconds(), 4); d.Allowed {
		t.Fatalf("take above the burst allowed: %+v", d)
	}
}

// A denial takes nothing: hammering a limited bucket does not push its
// next allowed time further out.
func TestBucketDenialTakesNothing(t *testing.T) {
	l := mustLimit(t, 10, 1)
	var b Bucket
	b.Allow(l, 0, 1)
	for i := int64(1); i < 100; i++ {
		if d := b.Allow(l, i*ms/2, 1); d.Allowed {
			t.Fatalf("allowed at %d ms/2", i)
		}
	}
	if d := b.Allow(l, 100*ms, 1); !d.Allowed {
		t.Fatalf("not allowed after one interval: %+v", d)
	}
}

// Over any window of random arrivals, the allowed count stays within
// rate·t + burst, and a steady overload is allowed the rate.
func TestBucketWithinRateOverAnyWindow(t *testing.T) {
	l := mustLimit(t, 50, 10)
	var b Bucket
	rng := rand.New(rand.NewPCG(1, 2))
	var allowed []int64
	now := int64(0)
	for range 100_000 {
		now += rng.Int64N(2 * ms) // about 1000 a second offered, 20x the rate
		if b.Allow(l, now, 1).Allowed {
			allowed = append(allowed, now)
		}
	}
	for _, window := range []int64{10 * ms, 100 * ms, 1000 * ms, 10_000 * ms} {
		bound := window*50/1000 + 10 + 1 // the +1: a window closed at both ends
		j := 0
		for i := range allowed {
			for allowed[i]-allowed[j] > window {
				j++
			}
			if n := int64(i - j + 1); n > bound {
				t.Fatalf("%d allowed within %d ms, bound %d", n, window/ms, bound)
			}
		}
	}
	if got, want := float64(len(allowed)), float64(now)/1e9*50; got < want*0.99 || got > want*1.01+10 {
		t.Errorf("allowed %v over %.1fs, want about %v", got, float64(now)/1e9, want)
	}
}

// Loops racing on one bucket at one instant are allowed exactly the burst
// between them: no lost update lets an extra request through.
func TestBucketConcurrentExactBurst(t *testing.T) {
	l := mustLimit(t, 1, 100_000)
	var b Bucket
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50_000 {
				if b.Allow(l, 5*ms, 1).Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if allowed.Load() != 100_000 {
		t.Fatalf("allowed %d of 200,000 racing requests, want exactly the burst of 100,000", allowed.Load())
	}
}

// A reload that lowers the rate keeps the bucket: a client in debt stays
// in debt under the new limit, and reports nothing remaining.
func TestBucketKeepsStateAcrossLimitChange(t *testing.T) {
	fast, slow := mustLimit(t, 100, 50), mustLimit(t, 10, 5)
	var b Bucket
	for range 50 {
		b.Allow(fast, 0, 1)
	}
	d := b.Allow(slow, 0, 1)
	if d.Allowed || d.Remaining != 0 {
		t.Fatalf("fresh burst after the limit changed: %+v", d)
	}
}
