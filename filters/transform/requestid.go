// The request_id filter: accept or replace X-Request-Id, and echo it back.

package transform

import "github.com/loopgate/loopgate/filters"

// MaxRequestIDLen is the longest client X-Request-Id kept.
const MaxRequestIDLen = 128

type requestID struct{ filters.Base }

var _ filters.Filter = requestID{}

// NewRequestID returns the "request_id" filter. A client's X-Request-Id is
// kept when it is 1 to MaxRequestIDLen characters of [A-Za-z0-9._-];
// otherwise the ID the engine generated (already in x.RequestID) stands.
// Either way the upstream request and the response carry X-Request-Id set
// to x.RequestID, replacing whatever was there. Safe for concurrent use.
func NewRequestID(order int) filters.Filter {
	return requestID{filters.Base{FilterName: NameRequestID, FilterOrder: order}}
}

// Request adopts a valid client ID and queues both edits. It does not
// allocate once the exchange's arena and edit lists have grown.
func (requestID) Request(x *filters.Exchange) filters.Verdict {
	if id, ok := header(x.Req.Headers, "X-Request-Id"); ok && validRequestID(id) {
		x.RequestID = x.Own(id)
	}
	if len(x.RequestID) == 0 {
		x.ReqEdits.AddRemove("X-Request-Id") // no ID to vouch for: drop an invalid one
		return filters.Continue
	}
	x.ReqEdits.AddSet("X-Request-Id", x.RequestID)
	x.RespEdits.AddSet("X-Request-Id", x.RequestID)
	return filters.Continue
}

// validRequestID keeps client IDs safe to log and echo.
func validRequestID(id []byte) bool {
	if len(id) == 0 || len(id) > MaxRequestIDLen {
		return false
	}
	for _, c := range id {
		if !idChar[c] {
			return false
		}
	}
	return true
}

var idChar = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") {
		t[c] = true
	}
	return t
}()
