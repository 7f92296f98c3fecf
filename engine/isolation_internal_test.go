package engine

import (
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/pool/loopstat"
)

// The cold-start guard: no shrink before cold_start calls after a start or
// a reload, however slow; after it, a slow window cuts the limit to the
// floor and each healthy one adds step, up to the base.
func TestIsolationColdStartAndSteps(t *testing.T) {
	s := isolationSettings{limit: 200, floor: 5, step: 50, slowCall: 1e9, window: 3e9, minSamples: 20, slowRatio: 30, coldStart: 50}
	iso := newIsolation("r", &s)
	now := iso.windowStart.Load()
	window := func(calls int, took int64) {
		for range calls {
			if !iso.acquire() {
				t.Fatal("permit refused under the limit")
			}
			now += 1e6
			iso.release(&s, took, now)
		}
		now += s.window
		iso.acquire()
		iso.release(&s, 0, now) // ends the window
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
		if !iso.acquire() {
			t.Fatal("a permit under the floor was refused")
		}
	}
	if iso.acquire() {
		t.Fatal("a 6th call admitted at a limit of 5")
	}
	for range 5 {
		now += 1e6
		iso.release(&s, 0, now)
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
	iso.reset(&s) // a reload: the guard starts over
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
	bs := newBreakerSettings(&config.CircuitBreaker{Window: 10, MinCalls: 5, FailureRate: 50, SlowCallRate: 80,
		SlowCall: config.Duration(time.Minute), OpenFor: config.Duration(30 * time.Second), HalfOpenCalls: 3})
	br := newBreaker("r", 10)
	is := isolationSettings{limit: 200, floor: 5, step: 50, slowCall: 1e9, window: 3e9, minSamples: 20, slowRatio: 30, coldStart: 50}
	iso := newIsolation("r", &is)
	b.ReportAllocs()
	for range b.N {
		now := loopstat.Now()
		p, _ := br.admit(&bs, now)
		iso.acquire()
		end := loopstat.Now()
		iso.release(&is, end-now, end)
		br.record(&bs, p, false, false, end)
	}
}

// A HALF_OPEN probe permit whose call never reached an outcome (refused by
// isolation, no node, the client gone) comes back when the exchange
// settles with its breaker, so the probes can still decide.
func TestBreakerPermitBackWithoutOutcome(t *testing.T) {
	bs := newBreakerSettings(&config.CircuitBreaker{Window: 10, MinCalls: 5, FailureRate: 50, SlowCallRate: 80,
		SlowCall: config.Duration(time.Minute), OpenFor: config.Duration(time.Second), HalfOpenCalls: 1})
	br := newBreaker("r", 10)
	now := loopstat.Now()
	br.phase.Store(&breakerPhase{state: breakerOpen, since: now - int64(2*time.Second)})
	p, _ := br.admit(&bs, now) // the open time is over: HALF_OPEN, its one probe
	if p == nil || p.state != breakerHalfOpen {
		t.Fatal("the open time passed, but no probe was admitted")
	}
	if q, _ := br.admit(&bs, now); q != nil {
		t.Fatal("a second probe admitted with half_open_calls 1")
	}
	ex := &exchange{route: &route{breaker: br, breakerCfg: bs}, policy: admission{brk: p}}
	ex.recordBreaker() // no upstream error, no status: the call never ran
	if q, _ := br.admit(&bs, now); q != p {
		t.Fatal("the permit of a call without an outcome was not given back")
	}
}
