// The hash filter: the key for consistent-hash node selection.

package transform

import (
	"github.com/loopgate/loopgate/filters"
)

type hashFilter struct {
	filters.Base
	header string // "" = not used
	cookie string // "" = not used
	user   bool
}

var _ filters.Filter = (*hashFilter)(nil)

// NewHash returns the "hash" filter, which sets x.Upstream.HashKey so the
// balancer keeps the same key on the same node. The key is the first
// non-empty one of: the cfg.Header field, the cfg.Cookie cookie, and (with
// cfg.User) the authenticated subject, x.Identity.Subject. With none, the
// key stays nil and the route balances normally. Header and cookie values
// are copied into the exchange's arena. Safe for concurrent use.
func NewHash(order int, cfg *Hash) filters.Filter {
	f := &hashFilter{Base: filters.Base{FilterName: NameHash, FilterOrder: order}}
	if cfg != nil {
		f.header, f.cookie, f.user = cfg.Header, cfg.Cookie, cfg.User
	}
	return f
}

// Request sets the hash key. It does not allocate once the exchange's arena
// has grown.
func (f *hashFilter) Request(x *filters.Exchange) filters.Verdict {
	if f.header != "" {
		if v, _ := header(x.Req.Headers, f.header); len(v) > 0 {
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
