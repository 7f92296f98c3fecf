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

// SubResponse is the outcome of a SubRequest. Headers are valid only during
// the callback; copy what you keep (Exchange.Own). Err is set, and Status is
// 0, when no complete response arrived (connect failure, reset, timeout);
// an Err with a Timeout() bool method returning true is a deadline.
type SubResponse struct {
	Status  int
	Headers codec.Headers
	Err     error
}

// ErrSubRequestActive is Do's refusal when the exchange already has a
// sub-request in flight: each exchange runs one at a time.
var ErrSubRequestActive = errors.New("filters: a sub-request is already active on this exchange")

// SubRequester sends sub-requests. The engine sets Exchange.Sub; it is used
// only on the exchange's loop.
type SubRequester interface {
	// Do starts r. When it returns nil, done runs exactly once, on the
	// exchange's loop, possibly before Do returns (a call that fails at
	// once). When it returns an error (ErrSubRequestActive), nothing was
	// sent and done never runs; the caller decides the outcome itself.
	Do(x *Exchange, r *SubRequest, done func(*SubResponse)) error
}
