// NodeStats: what happened on one node's pool on one loop, for metrics.

package upstream

import (
	"sync/atomic"

	"github.com/loopgate/loopgate/engine/loopstat"
)

// NodeStats counts one node's connections and call outcomes on one loop.
// The pool's loop writes them; any goroutine may read them. Every Pool
// starts with stats of its own; the engine replaces Pool.Stats with its
// long-lived, per-loop shard before the loop serves traffic.
type NodeStats struct {
	Connects        atomic.Uint64 // dials started
	ConnectFailures atomic.Uint64 // dials (or enrolls) that failed
	Resets          atomic.Uint64 // calls failed by a close or reset before the response was complete (ErrReset)
	Timeouts        atomic.Uint64 // calls failed by the response timeout (ErrTimeout)
	PoolExhausted   atomic.Uint64 // calls failed waiting for a connection (ErrPoolFull, ErrQueueFull)
	BadResponses    atomic.Uint64 // calls failed by a malformed or oversized response head (ErrBadResponse, ErrHeadTooLarge)

	Idle   atomic.Int64 // connections in the free list
	Active atomic.Int64 // connections carrying or being dialed for a call

	// FirstByte is the time from Call.Start (pool wait and connect
	// included, a retry too) to the first complete response head, interim
	// (1xx) heads included.
	FirstByte loopstat.Histogram
}

// failed counts a call's failure by its cause. Connect failures are
// counted at the dial, where a failure with no call waiting is seen too.
func (s *NodeStats) failed(err *Error) {
	switch err {
	case ErrReset:
		s.Resets.Add(1)
	case ErrTimeout:
		s.Timeouts.Add(1)
	case ErrPoolFull, ErrQueueFull:
		s.PoolExhausted.Add(1)
	case ErrBadResponse, ErrHeadTooLarge:
		s.BadResponses.Add(1)
	}
}
