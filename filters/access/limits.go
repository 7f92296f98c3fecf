// The limits filter: per-route limits tighter than the global ones.

package access

import (
	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

// limitsFilter holds one route's limits; zero fields are not checked.
// Immutable; safe for concurrent use.
type limitsFilter struct {
	filters.Base
	uriBytes    int
	headerCount int
	headerBytes int
	bodyBytes   int64
}

var _ filters.Filter = (*limitsFilter)(nil)

// NewLimitsFilter returns the "limits" filter. The request was parsed under
// the global limits; this refuses what the route's tighter limits do not
// allow, with the same answers the parser gives: a longer request-target
// 414/41401, more header fields or a bigger head (request line included,
// Request.HeadLen) 431/43101, a larger Content-Length 413/41301. Zero fields
// inherit the global limit and are not checked here. A chunked body is
// checked as it streams, by the engine, with l.MaxBodyBytes (the route's
// limits reach it through filters.RequestLimiter; 0 inherits).
func NewLimitsFilter(order int, l codec.Limits) filters.Filter {
	return &limitsFilter{
		Base:        filters.Base{FilterName: NameLimits, FilterOrder: order},
		uriBytes:    l.MaxURIBytes,
		headerCount: l.MaxHeaderCount,
		headerBytes: l.MaxHeaderBytes,
		bodyBytes:   l.MaxBodyBytes,
	}
}

// Request checks the parsed head against the route limits. It does not
// allocate.
func (f *limitsFilter) Request(x *filters.Exchange) filters.Verdict {
	r := x.Req
	switch {
	case f.uriBytes > 0 && len(r.URI) > f.uriBytes:
		return reject(x, codec.ErrURITooLong)
	case f.headerCount > 0 && len(r.Headers) > f.headerCount,
		f.headerBytes > 0 && r.HeadLen > f.headerBytes:
		return reject(x, codec.ErrHeadersTooLarge)
	case f.bodyBytes > 0 && r.ContentLength > f.bodyBytes:
		return reject(x, codec.ErrBodyTooLarge)
	}
	return filters.Continue
}

func reject(x *filters.Exchange, e *codec.Error) filters.Verdict {
	return x.Reject(e.Status, e.Code, e.Message)
}
