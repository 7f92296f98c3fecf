// The hash filter: the key for consistent-hash node selection.

package transform

import (
	"github.com/loopgate/loopgate/filters"
)

type hashFilter struct {
	filters.Base
	header   string // "" = not used
	repeated string // the 400's message for a request repeating header
	cookie   string // "" = not used
	user     bool
}

var _ filters.Filter = (*hashFilter)(nil)

// NewHash returns the "hash" filter, which sets x.Upstream.HashKey so the
// balancer keeps the same key on the same node. The key is the first
// non-empty one of: the cfg.Header field, the cfg.Cookie cookie, and (with
// cfg.User) the authenticated subject, x.Identity.Subject. With none, the
// key stays nil and the route balances normally. A request with more than
// one cfg.Header field is refused (400, code 40001). Header and cookie
// values are copied into the exchange's arena. Safe for concurrent use.
func NewHash(order int, cfg *Hash) filters.Filter {
	f := &hashFilter{Base: filters.Base{FilterName: NameHash, FilterOrder: order}}
	if cfg != nil {
		f.header, f.cookie, f.user = cfg.Header, cfg.Cookie, cfg.User
		f.repeated = "more than one " + cfg.Header + " header"
	}
	return f
}

// Request sets the hash key. It does not allocate once the exchange's arena
// has grown.
func (f *hashFilter) Request(x *filters.Exchange) filters.Verdict {
	if f.header != "" {
		v, n := x.Req.Headers.Only(f.header)
		if n > 1 {
			// Which field would be the key is a guess, as for a rate
			// limit's key header: the node must follow the value the
			// upstream sees.
			return x.Reject(400, 40001, f.repeated)
		}
		if len(v) > 0 {
			x.Upstream.HashKey = x.Own(v)
			return filters.Continue
		}
	}
	if f.cookie != "" {
		if v, _ := cookie(x.Req.Headers, f.cookie); len(v) > 0 {
			x.Upstream.HashKey = x.Own(v)
			return filters.Continue
		}
	}
	if f.user && len(x.Identity.Subject) > 0 {
		x.Upstream.HashKey = x.Identity.Subject
	}
	return filters.Continue
}
