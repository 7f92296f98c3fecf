// ConnStats: how one node's connections on one loop were dialed, reused
// and closed, so connection churn shows per node.

package upstream

import "sync/atomic"

// closeReason is why a pooled connection closed.
type closeReason uint8

const (
	closeIdleTimeout closeReason = iota // idle in the free list for idle_timeout
	closeIdleCap                        // released with max_idle connections already idle
	closeUpstream                       // the upstream closed it, or its response asked to close (Connection: close, HTTP/1.0)
	closeError                          // reset, write failure, protocol error, response timeout, bytes while idle
	closeAborted                        // its call's owner gave up mid-exchange (the client left)
	closeRetired                        // its node left the config, or the engine stopped
	closeUpgraded                       // a 101 made it a tunnel: it left the pool (Call.Detach)
	closeReasons                        // number of reasons
)

var closeReasonNames = [closeReasons]string{"idle_timeout", "idle_cap", "upstream_close", "error", "aborted", "retired", "upgraded"}

func (r closeReason) String() string { return closeReasonNames[r] }

// CloseReasons returns the names of the reasons a connection closes, in
// the order of ConnStats.Closes.
func CloseReasons() []string { return closeReasonNames[:] }

// ConnStats counts one node's connection lifecycle on one loop. The loop
// writes it; any goroutine may read it.
type ConnStats struct {
	// Reuses counts exchanges started on an idle pooled connection
	// instead of a new dial.
	Reuses atomic.Uint64
	// Closes counts connections closed after they were established, by
	// reason (see CloseReasons). A dial that failed is a ConnectFailure,
	// not a close.
	Closes [closeReasons]atomic.Uint64
}
