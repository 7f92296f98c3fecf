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

	// Idle and Active are the node's connections on this loop: in the free
	// lists, and carrying or being dialed for a call. Every pool of the
	// node on the loop adds its changes, so a pool draining after a reload
	// and its successor count together.
	Idle   atomic.Int64
	Active atomic.Int64

	// FirstByte is the time from Call.Start (pool wait and connect
	// included, a retry too) to the first complete response head, interim
	// (1xx) heads included.
	FirstByte loopstat.Histogram
	// Duration is the time from Call.Start to the end of every call that
	// reported an outcome: its last response byte, or its failure.
	Duration loopstat.Histogram
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
