// SubRequest: HTTP calls a filter makes through the loop's async client.

package filters

import (
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
	Timeout time.Duration // whole-call deadline
}

// SubResponse is the outcome of a SubRequest. Headers are valid only during
// the callback; copy what you keep (Exchange.Own). Err is set, and Status is
// 0, when no complete response arrived (connect failure, reset, timeout).
type SubResponse struct {
	Status  int
	Headers codec.Headers
	Err     error
}

// SubRequester sends sub-requests. The engine sets Exchange.Sub; done runs
// on the exchange's loop, exactly once.
type SubRequester interface {
	Do(x *Exchange, r *SubRequest, done func(*SubResponse))
}
