// NodeStats: what happened to one node's calls and connections on one loop.

package upstream

import (
	"sync/atomic"

	"github.com/loopgate/loopgate/pool/loopstat"
)

// NodeStats counts one node's connections and call outcomes on one loop:
// a shard of its Node. The loop writes them; any goroutine may read them.
type NodeStats struct {
	Connects        atomic.Uint64 // dials started
	ConnectFailures atomic.Uint64 // dials (or enrolls) that failed
	Resets          atomic.Uint64 // calls failed by a close or reset before the response was complete (ErrReset)
	Timeouts        atomic.Uint64 // calls failed by the response timeout (ErrTimeout)
	PoolExhausted   atomic.Uint64 // calls failed waiting for a connection (ErrPoolFull, ErrQueueFull) or over their route's share (ErrPoolShare)
	BadResponses    atomic.Uint64 // calls failed by a malformed or oversized response head (ErrBadResponse, ErrHeadTooLarge)

	ConnStats // reuses and closes by reason

	// Responses counts final response heads by status class, 1xx to 5xx
	// (a final 1xx cannot happen; its slot stays 0).
	Responses [5]atomic.Uint64

	// idle and active are the base of the Idle and Active gauges: every
	// change but the two each exchange makes, a reuse (Reuses: one from
	// idle to active) and a park (parks: a connection released to a free
	// list, one from active to idle), which the gauges take from those
	// counters. Each exchange then costs two atomic adds, not five. Every
	// pool of the node on the loop adds its changes, so a pool draining
	// after a reload and its successor count together.
	idle, active atomic.Int64
	parks        atomic.Uint64

	// FirstByte is the time from Call.Start (pool wait and connect
	// included, a retry too) to the first complete response head, interim
	// (1xx) heads included.
	FirstByte loopstat.Histogram
	// Duration is the time from Call.Start to the end of every call that
	// reported an outcome: its last response byte, or its failure.
	Duration loopstat.Histogram
}

// Idle is how many of the node's connections on this loop wait in the free
// lists. Reuses is read before parks, so a park or reuse between the loads
// can only make it high, by at most those in flight, never negative.
func (s *NodeStats) Idle() int64 {
	r := s.Reuses.Load()
	return max(0, s.idle.Load()+int64(s.parks.Load()-r))
}

// Active is how many of the node's connections on this loop carry a call
// or are dialed for one; read as Idle, with the counters' order reversed.
func (s *NodeStats) Active() int64 {
	p := s.parks.Load()
	return max(0, s.active.Load()+int64(s.Reuses.Load()-p))
}

// failed counts a call's failure by its cause. Connect failures are
// counted at the dial, where a failure with no call waiting is seen too.
func (s *NodeStats) failed(err *Error) {
	switch err {
	case ErrReset:
		s.Resets.Add(1)
	case ErrTimeout:
		s.Timeouts.Add(1)
	case ErrPoolFull, ErrQueueFull, ErrPoolShare:
		s.PoolExhausted.Add(1)
	case ErrBadResponse, ErrHeadTooLarge:
		s.BadResponses.Add(1)
	}
}
