package policy

import (
	"testing"
	"time"

	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/pool/units"
)

// The cold-start guard: no shrink before cold_start calls after a start or
// a reload, however slow; after it, a slow window cuts the limit to the
// floor and each healthy one adds step, up to the base.
func TestIsolationColdStartAndSteps(t *testing.T) {
	s := IsolationSettings{limit: 200, floor: 5, step: 50, slowCall: 1e9, window: 3e9, minSamples: 20, slowRatio: 30, coldStart: 50}
	iso := NewLimiter("r", &s)
	now := iso.windowStart.Load()
	window := func(calls int, took int64) {
		for range calls {
			if !iso.Acquire() {
				t.Fatal("permit refused under the limit")
			}
			now += 1e6
			iso.Release(&s, took, now)
		}
		now += s.window
		iso.Acquire()
		iso.Release(&s, 0, now) // ends the window
	}
	window(40, 2e9) // 41 calls so far: under the guard
	if l := iso.limit.Load(); l != 200 {
		t.Fatalf("limit %d within the cold start, want 200", l)
	}
	window(30, 2e9)
	if l := iso.limit.Load(); l != 5 {
		t.Fatalf("limit %d after a slow window, want the floor 5", l)
	}
	for range 5 {
		if !iso.Acquire() {
			t.Fatal("a permit under the floor was refused")
		}
	}
	if iso.Acquire() {
		t.Fatal("a 6th call admitted at a limit of 5")
	}
	for range 5 {
		now += 1e6
		iso.Release(&s, 0, now)
	}
	window(3, 2e9) // at the floor a slow upstream gives a few slow calls a window: no recovery
	if l := iso.limit.Load(); l != 5 {
		t.Fatalf("limit %d after a window of 4 calls, 3 slow; want the floor kept", l)
	}
	window(30, 1e6)
	window(30, 1e6)
	if l := iso.limit.Load(); l != 105 {
		t.Fatalf("limit %d after two healthy windows, want 5+50+50", l)
	}
	iso.Reset(&s) // a reload: the guard starts over
	window(30, 2e9)
	if l := iso.limit.Load(); l != 155 {
		t.Fatalf("limit %d after a slow window within the new cold start, want 155 (a healthy step)", l)
	}
	if iso.inFlight.Load() != 0 {
		t.Fatalf("%d permits leaked", iso.inFlight.Load())
	}
}

// BenchmarkResiliencePerRequest is what a request pays for a breaker and
// isolation on its route, alone: admit, acquire, release and record.
func BenchmarkResiliencePerRequest(b *testing.B) {
	bs := NewBreakerSettings(&CircuitBreaker{Window: 10, MinCalls: 5, FailureRate: 50, SlowCallRate: 80,
		SlowCall: units.Duration(time.Minute), OpenFor: units.Duration(30 * time.Second), HalfOpenCalls: 3})
	br := NewBreaker("r", 10)
	is := IsolationSettings{limit: 200, floor: 5, step: 50, slowCall: 1e9, window: 3e9, minSamples: 20, slowRatio: 30, coldStart: 50}
	iso := NewLimiter("r", &is)
	b.ReportAllocs()
	for range b.N {
		now := loopstat.Now()
		p, _ := br.Admit(&bs, now)
		iso.Acquire()
		end := loopstat.Now()
		iso.Release(&is, end-now, end)
		br.Record(&bs, p, false, false, end)
	}
}
