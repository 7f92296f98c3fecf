// Circuit breakers per route: a count-based window of call outcomes that
// opens the circuit on a failure or slow-call rate, answers 503/55301
// while open, and lets a few calls probe the upstream before closing.

package engine

import (
	"log"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/upstream"
)

// breakerState is where a circuit is: CLOSED → OPEN → HALF_OPEN → CLOSED
// (or OPEN again).
type breakerState uint8

const (
	breakerClosed breakerState = iota
	breakerOpen
	breakerHalfOpen
)

var breakerStateNames = [...]string{"closed", "open", "half_open"}

func (s breakerState) String() string { return breakerStateNames[s] }

// breakerSettings are a route's compiled config.CircuitBreaker.
type breakerSettings struct {
	minCalls           int64
	window             int
	failRate, slowRate int64 // percent
	slowCall, openFor  int64 // nanoseconds
	halfOpenCalls      int64
	failStatus         [10]uint64 // bit s-100 for a status that counts as a failure
}

func newBreakerSettings(b *config.CircuitBreaker) breakerSettings {
	s := breakerSettings{minCalls: int64(b.MinCalls), window: b.Window,
		failRate: int64(b.FailureRate), slowRate: int64(b.SlowCallRate),
		slowCall: int64(b.SlowCall), openFor: int64(b.OpenFor), halfOpenCalls: int64(b.HalfOpenCalls)}
	for _, st := range b.FailureStatuses {
		i := st - 100
		s.failStatus[i/64] |= 1 << uint(i%64)
	}
	return s
}

func (s *breakerSettings) failsOn(status int) bool {
	i := status - 100
	return i >= 0 && i < 640 && s.failStatus[i/64]&(1<<uint(i%64)) != 0
}

// breakerPhase is one stay in a state. A transition swaps in a new phase,
// so the counters a phase holds are its own: an outcome is recorded only
// into the phase its call was admitted under, and a call that began before
// a transition changes nothing after it. Only transitions allocate.
type breakerPhase struct {
	state breakerState
	since int64 // loopstat.Now when the phase began

	// CLOSED: the window of the last outcomes, a slot each (see outcome
	// bits). HALF_OPEN: calls, failed and slow count the probes.
	slots               []atomic.Uint32
	next                atomic.Uint64
	calls, failed, slow atomic.Int64
	permits             atomic.Int64 // HALF_OPEN: probes still to admit
}

// Outcome bits of a window slot.
const (
	outcomeCall   = 1
	outcomeFailed = 2
	outcomeSlow   = 4
)

// breaker is one route's circuit, kept by the server under the route id,
// so its state survives reloads. Lock-free: any loop admits and records
// with atomics; only a transition allocates, and one CAS decides it.
type breaker struct {
	route string
	phase atomic.Pointer[breakerPhase]

	transitions [3]atomic.Uint64 // into each state
	rejected    atomic.Uint64    // requests answered 55301
}

func newBreaker(route string, window int) *breaker {
	b := &breaker{route: route}
	b.phase.Store(&breakerPhase{state: breakerClosed, since: loopstat.Now(), slots: make([]atomic.Uint32, window)})
	return b
}

// admit lets a call through, returning the phase to record it in, or
// refuses it with the time until the circuit may let calls through again.
func (b *breaker) admit(s *breakerSettings, now int64) (*breakerPhase, time.Duration) {
	for {
		p := b.phase.Load()
		switch p.state {
		case breakerClosed:
			return p, 0
		case breakerOpen:
			if left := p.since + s.openFor - now; left > 0 {
				b.rejected.Add(1)
				return nil, time.Duration(left)
			}
			h := &breakerPhase{state: breakerHalfOpen, since: now}
			h.permits.Store(s.halfOpenCalls)
			b.move(p, h, "open for "+time.Duration(now-p.since).Round(time.Millisecond).String())
			// Whoever won, the circuit is HALF_OPEN (or moved on): look again.
		default: // HALF_OPEN
			if p.takePermit() {
				return p, 0
			}
			b.rejected.Add(1)
			return nil, time.Second // the probes decide; ask again in a second
		}
	}
}

// takePermit takes one of a HALF_OPEN phase's probe permits, if one is
// left. A refusal leaves the count as it was: were it driven below zero,
// a permit given back (abandon) would never be taken again, and the
// probes that did run would never reach half_open_calls to decide.
func (p *breakerPhase) takePermit() bool {
	for {
		n := p.permits.Load()
		if n <= 0 {
			return false
		}
		if p.permits.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// record counts a call's outcome in the phase it was admitted under, and
// makes the transition the outcome calls for.
func (b *breaker) record(s *breakerSettings, p *breakerPhase, failed, slow bool, now int64) {
	if b.phase.Load() != p {
		return // admitted under a phase that has ended
	}
	o := uint32(outcomeCall)
	if failed {
		o |= outcomeFailed
	}
	if slow {
		o |= outcomeSlow
	}
	if p.state == breakerClosed {
		old := p.slots[(p.next.Add(1)-1)%uint64(len(p.slots))].Swap(o)
		// Every loop records here: a counter the outcome leaves as it was
		// (calls, once the window is full; failed and slow, mostly) is not
		// written, so its cache line stays shared.
		if d := int64(o&outcomeCall) - int64(old&outcomeCall); d != 0 {
			p.calls.Add(d)
		}
		if d := int64(o&outcomeFailed>>1) - int64(old&outcomeFailed>>1); d != 0 {
			p.failed.Add(d)
		}
		if d := int64(o&outcomeSlow>>2) - int64(old&outcomeSlow>>2); d != 0 {
			p.slow.Add(d)
		}
		calls, f, sl := p.calls.Load(), p.failed.Load(), p.slow.Load()
		if calls >= s.minCalls && (f*100 >= s.failRate*calls || sl*100 >= s.slowRate*calls) {
			b.move(p, &breakerPhase{state: breakerOpen, since: now}, rates(f, sl, calls))
		}
		return
	}
	// HALF_OPEN: decide once every probe has answered.
	if failed {
		p.failed.Add(1)
	}
	if slow {
		p.slow.Add(1)
	}
	if calls := p.calls.Add(1); calls >= s.halfOpenCalls {
		f, sl := p.failed.Load(), p.slow.Load()
		if f*100 >= s.failRate*calls || sl*100 >= s.slowRate*calls {
			b.move(p, &breakerPhase{state: breakerOpen, since: now}, "probes "+rates(f, sl, calls))
		} else {
			b.move(p, &breakerPhase{state: breakerClosed, since: now, slots: make([]atomic.Uint32, s.window)}, "probes "+rates(f, sl, calls))
		}
	}
}

// abandon gives back a HALF_OPEN permit whose call never reached an
// outcome (the client left first), so the probes can still decide.
func (b *breaker) abandon(p *breakerPhase) {
	if p.state == breakerHalfOpen && b.phase.Load() == p {
		p.permits.Add(1)
	}
}

// move makes the transition from p to next, once: of racing callers one
// wins the CAS, and only it logs and counts the transition.
func (b *breaker) move(p, next *breakerPhase, why string) {
	if !b.phase.CompareAndSwap(p, next) {
		return
	}
	b.transitions[next.state].Add(1)
	// Once per transition; a notice (notices.go), so it never waits on
	// stderr.
	log.Printf("circuit breaker route=%s %s -> %s (%s)", b.route, p.state, next.state, why)
}

func rates(failed, slow, calls int64) string {
	return "failed " + strconv.FormatInt(failed, 10) + ", slow " + strconv.FormatInt(slow, 10) + " of " + strconv.FormatInt(calls, 10) + " calls"
}

var errBreakerOpen = &codec.Error{Status: 503, Code: 55301, Message: "circuit breaker open for this route; retry later"}

// admitBreaker asks the route's breaker for the call, and answers 503,
// code 55301, with Retry-After (the seconds until the circuit may let
// calls through) when it refuses. It reports whether the call may go on.
func (ex *exchange) admitBreaker() bool {
	r := ex.route
	p, left := r.breaker.admit(&r.breakerCfg, loopstat.Now())
	if p != nil {
		ex.policy.brk = p
		return true
	}
	secs := int64((left + time.Second - 1) / time.Second)
	ex.fx.Rejection.AddHeader("Retry-After", strconv.AppendInt(ex.policy.retryAfter[:0], max(secs, 1), 10))
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
	s := &r.breakerCfg
	now := loopstat.Now()
	var failed bool
	switch {
	case ex.end.upErr == upstream.ErrConnect, ex.end.upErr == upstream.ErrTimeout, ex.end.upErr == upstream.ErrReset:
		failed = true
	case ex.end.upStatus != 0:
		failed = s.failsOn(ex.end.upStatus)
	default:
		r.breaker.abandon(p)
		return
	}
	r.breaker.record(s, p, failed, now-ex.end.callStart > s.slowCall, now)
}
