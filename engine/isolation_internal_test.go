package engine

import (
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/policy"
	"github.com/loopgate/loopgate/pool/loopstat"
)

// A HALF_OPEN probe permit whose call never reached an outcome (refused by
// isolation, no node, the client gone) comes back when the exchange
// settles with its breaker, so the probes can still decide.
func TestBreakerPermitBackWithoutOutcome(t *testing.T) {
	bs := policy.NewBreakerSettings(&config.CircuitBreaker{Window: 10, MinCalls: 5, FailureRate: 50, SlowCallRate: 80,
		SlowCall: config.Duration(time.Minute), OpenFor: config.Duration(time.Second), HalfOpenCalls: 1})
	br := policy.NewBreaker("r", 10)
	now := loopstat.Now()
	for range 5 { // five failures two seconds ago opened the circuit then
		p, _ := br.Admit(&bs, now-int64(2*time.Second))
		br.Record(&bs, p, true, false, now-int64(2*time.Second))
	}
	if br.State() != policy.BreakerOpen {
		t.Fatalf("circuit %s after 5 failures of 5, want open", br.State())
	}
	p, _ := br.Admit(&bs, now) // the open time is over: HALF_OPEN, its one probe
	if p == nil || p.State() != policy.BreakerHalfOpen {
		t.Fatal("the open time passed, but no probe was admitted")
	}
	if q, _ := br.Admit(&bs, now); q != nil {
		t.Fatal("a second probe admitted with half_open_calls 1")
	}
	ex := &exchange{route: &route{breaker: br, breakerCfg: &bs}, policy: admission{brk: p}}
	ex.recordBreaker() // no upstream error, no status: the call never ran
	if q, _ := br.Admit(&bs, now); q != p {
		t.Fatal("the permit of a call without an outcome was not given back")
	}
}
