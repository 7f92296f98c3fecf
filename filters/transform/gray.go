// The gray filter: canary routing by header, cookie or weight.

package transform

import (
	"math/bits"
	"math/rand/v2"

	"github.com/loopgate/loopgate/filters"
)

type gray struct {
	filters.Base
	header string // "" = not matched on
	cookie string // "" = not matched on
	value  []byte
	weight uint64 // percent of the other requests, 0-100
	group  int    // the canary upstream group
}

var _ filters.Filter = (*gray)(nil)

// NewGray returns the "gray" filter, which sends a request to upstream
// group `group` (x.Upstream.Group) when its cfg.Header field, or its
// cfg.Cookie cookie, equals cfg.Value exactly; and otherwise, when
// cfg.Weight > 0, for Weight percent of the remaining requests (Weight is
// clamped to 0-100).
//
// The weighted choice hashes x.RequestID into 100 buckets: it needs no
// shared counter (no contended atomics across loops), spreads generated IDs
// evenly, and sends a request retried with the same X-Request-Id the same
// way. A client that picks its own ID can thereby pick its side; canary
// weight is a rollout tool, not access control. Without a request ID the
// choice is random. Safe for concurrent use.
func NewGray(order int, cfg *Gray, group int) filters.Filter {
	f := &gray{
		Base:  filters.Base{FilterName: NameGray, FilterOrder: order},
		group: group,
	}
	if cfg != nil {
		f.header, f.cookie, f.value = cfg.Header, cfg.Cookie, []byte(cfg.Value)
		f.weight = uint64(min(max(cfg.Weight, 0), 100))
	}
	return f
}

// Request picks the canary or leaves the route's own group. It does not
// allocate.
func (f *gray) Request(x *filters.Exchange) filters.Verdict {
	if f.matches(x) || (f.weight > 0 && bucket(x.RequestID) < f.weight) {
		x.Upstream.Group = f.group
	}
	return filters.Continue
}

func (f *gray) matches(x *filters.Exchange) bool {
	if f.header != "" {
		if v, ok := header(x.Req.Headers, f.header); ok && string(v) == string(f.value) {
			return true
		}
	}
	if f.cookie != "" {
		if v, ok := cookie(x.Req.Headers, f.cookie); ok && string(v) == string(f.value) {
			return true
		}
	}
	return false
}

// bucket maps id to 0-99: FNV-1a, then a murmur3-style finaliser so that
// IDs differing only in their last hex digits spread over all buckets.
func bucket(id []byte) uint64 {
	var h uint64
	if len(id) == 0 {
		h = rand.Uint64()
	} else {
		h = 14695981039346656037
		for _, c := range id {
			h = (h ^ uint64(c)) * 1099511628211
		}
		h ^= h >> 33
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
		h *= 0xc4ceb9fe1a85ec53
		h ^= h >> 33
	}
	hi, _ := bits.Mul64(h, 100)
	return hi
}
