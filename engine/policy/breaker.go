// Circuit breakers per route: a count-based window of call outcomes that
// opens the circuit on a failure or slow-call rate, refuses calls while
// open (the engine answers 503/55301), and lets a few calls probe the
// upstream before closing.

package policy

import (
	"log"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/pool/alert"
	"github.com/loopgate/loopgate/pool/loopstat"
)

// BreakerState is where a circuit is: CLOSED → OPEN → HALF_OPEN → CLOSED
// (or OPEN again).
type BreakerState uint8

// The states, in the order of loopgate_route_breaker_state's values.
const (
	BreakerClosed BreakerState = iota
	BreakerOpen
	BreakerHalfOpen
)

var breakerStateNames = [...]string{"closed", "open", "half_open"}

func (s BreakerState) String() string { return breakerStateNames[s] }

// BreakerSettings are a route's compiled CircuitBreaker, per config
// version.
type BreakerSettings struct {
	minCalls           int64
	window             int
	failRate, slowRate int64 // percent
	slowCall, openFor  int64 // nanoseconds
	halfOpenCalls      int64
	failStatus         [10]uint64 // bit s-100 for a status that counts as a failure
}

// NewBreakerSettings compiles a route's effective breaker section.
func NewBreakerSettings(b *CircuitBreaker) BreakerSettings {
	s := BreakerSettings{minCalls: int64(b.MinCalls), window: b.Window,
		failRate: int64(b.FailureRate), slowRate: int64(b.SlowCallRate),
		slowCall: int64(b.SlowCall), openFor: int64(b.OpenFor), halfOpenCalls: int64(b.HalfOpenCalls)}
	for _, st := range b.FailureStatuses {
		i := st - 100
		s.failStatus[i/64] |= 1 << uint(i%64)
	}
	return s
}

// FailsOn reports whether a response status counts as a failed call.
func (s *BreakerSettings) FailsOn(status int) bool {
	i := status - 100
	return i >= 0 && i < 640 && s.failStatus[i/64]&(1<<uint(i%64)) != 0
}

// BreakerPhase is one stay in a state. A transition swaps in a new phase,
// so the counters a phase holds are its own: an outcome is recorded only
// into the phase its call was admitted under, and a call that began before
// a transition changes nothing after it. Only transitions allocate.
type BreakerPhase struct {
	state BreakerState
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

// Breaker is one route's circuit, kept by the Registry under the route id,
// so its state survives reloads. Lock-free: any loop admits and records
// with atomics; only a transition allocates, and one CAS decides it.
type Breaker struct {
	route string
	phase atomic.Pointer[BreakerPhase]

	transitions [3]atomic.Uint64 // into each state
	rejected    atomic.Uint64    // requests answered 55301
}

// NewBreaker makes route's circuit, CLOSED, with a window of window
// calls; Registry.Breaker keeps it by route id.
func NewBreaker(route string, window int) *Breaker {
	b := &Breaker{route: route}
	b.phase.Store(&BreakerPhase{state: BreakerClosed, since: loopstat.Now(), slots: make([]atomic.Uint32, window)})
	return b
}

// Admit lets a call through, returning the phase to record it in, or
// refuses it with the time until the circuit may let calls through again.
func (b *Breaker) Admit(s *BreakerSettings, now int64) (*BreakerPhase, time.Duration) {
	for {
		p := b.phase.Load()
		switch p.state {
		case BreakerClosed:
			return p, 0
		case BreakerOpen:
			if left := p.since + s.openFor - now; left > 0 {
				b.rejected.Add(1)
				return nil, time.Duration(left)
			}
			h := &BreakerPhase{state: BreakerHalfOpen, since: now}
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
func (p *BreakerPhase) takePermit() bool {
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

// Record counts a call's outcome in the phase it was admitted under, and
// makes the transition the outcome calls for.
func (b *Breaker) Record(s *BreakerSettings, p *BreakerPhase, failed, slow bool, now int64) {
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
	if p.state == BreakerClosed {
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
			b.move(p, &BreakerPhase{state: BreakerOpen, since: now}, rates(f, sl, calls))
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
			b.move(p, &BreakerPhase{state: BreakerOpen, since: now}, "probes "+rates(f, sl, calls))
		} else {
			b.move(p, &BreakerPhase{state: BreakerClosed, since: now, slots: make([]atomic.Uint32, s.window)}, "probes "+rates(f, sl, calls))
		}
	}
}

// Abandon gives back a HALF_OPEN permit whose call never reached an
// outcome (the client left first), so the probes can still decide.
func (b *Breaker) Abandon(p *BreakerPhase) {
	if p.state == BreakerHalfOpen && b.phase.Load() == p {
		p.permits.Add(1)
	}
}

// move makes the transition from p to next, once: of racing callers one
// wins the CAS, and only it logs and counts the transition.
func (b *Breaker) move(p, next *BreakerPhase, why string) {
	if !b.phase.CompareAndSwap(p, next) {
		return
	}
	b.transitions[next.state].Add(1)
	// Once per transition; a notice (the engine's log writer), so it never waits on
	// stderr.
	msg := "circuit breaker route=" + b.route + " " + p.state.String() + " -> " + next.state.String() + " (" + why + ")"
	log.Print(msg)
	// An episode runs from opening to closing; OPEN again after HALF_OPEN
	// is the same episode (the dispatcher suppresses it).
	switch next.state {
	case BreakerOpen:
		alert.Raise(alert.Event{Kind: alert.BreakerOpen, Subject: b.route, Message: msg})
	case BreakerClosed:
		alert.Raise(alert.Event{Kind: alert.BreakerOpen, Subject: b.route, Message: msg, Resolved: true})
	}
}

func rates(failed, slow, calls int64) string {
	return "failed " + strconv.FormatInt(failed, 10) + ", slow " + strconv.FormatInt(slow, 10) + " of " + strconv.FormatInt(calls, 10) + " calls"
}

// Route is the id of the route the breaker guards.
func (b *Breaker) Route() string { return b.route }

// State is the circuit's state now. Safe for concurrent use.
func (b *Breaker) State() BreakerState { return b.phase.Load().state }

// State is the state the phase is a stay in.
func (p *BreakerPhase) State() BreakerState { return p.state }

// Slow reports whether a call that took took nanoseconds counts as slow.
func (s *BreakerSettings) Slow(took int64) bool { return took > s.slowCall }
