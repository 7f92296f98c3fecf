// SubRequest: HTTP calls a filter makes through the loop's async client.

package filters

import (
	"errors"
	"time"

	"github.com/loopgate/loopgate/codec"
)

// SubRequest is a request a filter sends to an upstream group from the
// exchange's loop, over the same pooled connections and async client the
// proxy uses. It never blocks the loop.
type SubRequest struct {
	Group   int    // upstream group index (config order)
	Method  string // e.g. "GET"
	Path    string // origin-form target, e.g. "/auth"
	Headers []Header
	// Timeout is the whole-call deadline, armed when Do accepts the call:
	// connecting, waiting for a pooled connection and reading the whole
	// response must all fit in it, however the service paces its bytes.
	// It also bounds the connect and each read, as the proxy's timeouts do.
	// 0 means no whole-call deadline.
	Timeout time.Duration
}

// SubResponse is the outcome of a SubRequest. Headers are valid only while
// the continuation runs, and only until it starts another sub-request; copy
// what you keep (Exchange.Own). Err is set, and Status is 0, when no
// complete response arrived (connect failure, reset, timeout); an Err with a
// Timeout() bool method returning true is a deadline.
type SubResponse struct {
	Status  int
	Headers codec.Headers
	Err     error
}

// ErrSubRequestActive is Do's refusal when the exchange already has a
// sub-request in flight: each exchange runs one at a time.
var ErrSubRequestActive = errors.New("filters: a sub-request is already active on this exchange")

// SubRequester sends sub-requests. The engine sets Exchange.Sub; it is used
// only on the exchange's loop, in a request phase.
type SubRequester interface {
	// Do starts r for the exchange parked on t, which must be the ticket
	// its x.Park just returned. The answer comes back through t: when the
	// whole response has arrived, the call failed, or r.Timeout passed,
	// then runs on the exchange's loop with the outcome, exactly once, and
	// its verdict continues the chain, as a function given to
	// Ticket.Resume does. then never runs when the park ended first (the
	// request timed out or its client left): the call is cancelled. When
	// Do returns an error (ErrSubRequestActive, or a ticket that is not
	// the exchange's current park), nothing was sent, then never runs, and
	// the ticket is untouched: the filter decides the outcome itself.
	//
	// then is kept until it runs: bind it once, as for Ticket.Resume, to
	// keep a sub-request free of allocations.
	Do(t Ticket, r *SubRequest, then func(*Exchange, *SubResponse) Verdict) error
}
