// The rate_limit filter: building it from a route's limits, the local
// decisions, and the 429 a refusal answers with.

package limiter

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/ratelimit"
	"github.com/loopgate/loopgate/filters/ratelimit/cluster"
)

// rateFilter applies one route's limits. Local limits are decided first,
// in config order, so a request they refuse costs no cluster token and no
// Redis call; cluster limits after them, in config order. The filter is
// immutable but for per-loop state, and safe for concurrent use.
type rateFilter struct {
	filters.Base
	local        []localLimit
	remote       []remoteLimit
	tenantHeader string
	loops        []loopState // by Exchange.Loop
	calls        sync.Pool   // *call, for requests that may park
}

var _ filters.Filter = (*rateFilter)(nil)

// localLimit is one local limit: its parameters and its state in the Store.
type localLimit struct {
	key   keyForm
	limit ratelimit.Limit
	st    *state
	rate  []byte // X-RateLimit-Limit
	// keyHeader is the request header the key reads ("" for keys no header
	// gives; for tenant, read only when auth established no tenant), and
	// repeated the message that refuses a request carrying it twice.
	keyHeader, repeated string
}

// remoteLimit is one cluster limit. st holds lim's state in the Store
// alive: the Store only keeps it while a compiled filter does.
type remoteLimit struct {
	lim  *cluster.Limit
	st   *state
	rate []byte
}

// loopState is what one loop keeps for the filter. Owned by that loop.
type loopState struct {
	parked map[*filters.Exchange]*call // requests parked on a cluster limit, for Done
	spare  *call                       // a call ready for the next request, so most take none from the pool
	_      [48]byte
}

// compiled is what Prepare makes for one compiled config: the Store, the
// top-level settings, and the global limits seen so far, which every route
// must state alike.
type compiled struct {
	store   *Store
	global  *Global
	mu      sync.Mutex // routes may be built concurrently
	globals map[scope]globalUse
}

// globalUse is the first route's statement of a global limit.
type globalUse struct {
	route string
	limit *Limit
}

// prepare takes the Store the engine provides and the settings every
// route's filter shares.
func prepare(b *filters.Build) (any, error) {
	store, ok := filters.Service[*Store](b)
	if !ok {
		return nil, errors.New("no *limiter.Store service: the engine must provide one")
	}
	g := b.Global.(*Global)
	store.setSweepEvery(time.Duration(g.RateLimit.KeyIdle) / 2)
	return &compiled{store: store, global: g, globals: map[scope]globalUse{}}, nil
}

// newFilter builds a route's filter, taking each limit's state from the
// Store.
func newFilter(b *filters.Build) (filters.Filter, error) {
	cp := b.Shared.(*compiled)
	g := cp.global
	f := &rateFilter{
		Base:         filters.Base{FilterName: Name, FilterOrder: b.Order},
		tenantHeader: g.RateLimit.TenantHeader,
		loops:        make([]loopState, b.Loops),
	}
	for i := range b.Config.(*Route).RateLimits {
		l := &b.Config.(*Route).RateLimits[i]
		if l.key.kind == keyGlobal {
			if err := cp.sameGlobal(b.RouteID, l); err != nil {
				return nil, err
			}
		}
		rate := []byte(strconv.FormatFloat(l.Rate, 'f', -1, 64))
		if l.scope == clustered {
			st, err := cp.store.remote(b.RouteID, l, g)
			if err != nil {
				return nil, err
			}
			f.remote = append(f.remote, remoteLimit{lim: st.remote, st: st, rate: rate})
			continue
		}
		maxKeys := g.RateLimit.MaxKeys
		if l.MaxKeys > 0 {
			maxKeys = l.MaxKeys
		}
		st, err := cp.store.local(b.RouteID, l, b.Loops, maxKeys, time.Duration(g.RateLimit.KeyIdle))
		if err != nil {
			return nil, err
		}
		ll := localLimit{key: l.key, limit: l.limit, st: st, rate: rate}
		switch l.key.kind {
		case keyHeader:
			ll.keyHeader = l.key.header
		case keyTenant:
			ll.keyHeader = f.tenantHeader
		}
		if ll.keyHeader != "" {
			ll.repeated = "more than one " + ll.keyHeader + " header"
		}
		f.local = append(f.local, ll)
	}
	for i := range f.loops {
		f.loops[i].parked = map[*filters.Exchange]*call{}
	}
	f.calls.New = func() any { return newCall(f) }
	return f, nil
}

// sameGlobal requires every route's global limit of one scope to be stated
// alike: it is one bucket (and, for a cluster one, one lease).
func (cp *compiled) sameGlobal(route string, l *Limit) error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	first, seen := cp.globals[l.scope]
	if !seen {
		cp.globals[l.scope] = globalUse{route: route, limit: l}
		return nil
	}
	if f := first.limit; f.Rate != l.Rate || f.Burst != l.Burst {
		return fmt.Errorf("rate_limits: the %s global limit is one bucket for every route, but route %q gives it rate %v, burst %d and route %q rate %v, burst %d",
			l.scope, first.route, f.Rate, f.Burst, route, l.Rate, l.Burst)
	}
	if a, b := first.limit.spec(""), l.spec(""); l.scope == clustered && a != b {
		return fmt.Errorf("rate_limits: the cluster global limit is one bucket for every route, but routes %q and %q give it different on_redis_failure or lease_window",
			first.route, route)
	}
	return nil
}

// Request decides the local limits, then the cluster ones, which may park
// the request until Redis answers (see call).
func (f *rateFilter) Request(x *filters.Exchange) filters.Verdict {
	if msg := f.repeatedKey(x); msg != "" {
		return x.Reject(400, 40001, msg)
	}
	now := x.Now()
	for i := range f.local {
		l := &f.local[i]
		d := f.allowLocal(l, x, now)
		l.st.count(x.Loop, d.Allowed)
		if !d.Allowed {
			return reject(x, l.rate, d.Remaining, d.RetryAfterSeconds(), d.ResetSeconds())
		}
	}
	if len(f.remote) == 0 {
		return filters.Continue
	}
	return f.takeRemote(x, f.getCall(x.Loop), 0, now)
}

// repeatedKey returns the refusal for a request that repeats a header a
// limit keys on, before any limit takes a token; "" when there is none.
// Which field would count is a guess: a limiter that reads the first while
// the upstream reads the last (or joins them) lets a client rotate the one
// counted and spend the other's quota without limit. A single field is the
// key whole, commas included, the bytes the upstream receives.
func (f *rateFilter) repeatedKey(x *filters.Exchange) string {
	for i := range f.local {
		l := &f.local[i]
		if l.keyHeader == "" || l.key.kind == keyTenant && len(x.Identity.Tenant) > 0 {
			continue
		}
		if _, n := x.Req.Headers.Only(l.keyHeader); n > 1 {
			return l.repeated
		}
	}
	return ""
}

// allowLocal takes a token from the limit's bucket for x: the one bucket,
// or the bucket of x's key. A request without a value for the key (no
// user, no header) counts in the bucket of the empty key, which every such
// request shares: leaving a header out does not escape its limit.
func (f *rateFilter) allowLocal(l *localLimit, x *filters.Exchange, now int64) ratelimit.Decision {
	switch l.key.kind {
	case keyGlobal, keyRoute:
		return l.st.bucket.Allow(l.limit, now, 1)
	case keyIP:
		ip := x.ClientIP.As16()
		return l.st.keys.Allow(l.limit, ip[:], now, 1)
	case keyUser:
		return l.st.keys.Allow(l.limit, x.Identity.Subject, now, 1)
	case keyTenant:
		t := x.Identity.Tenant
		if len(t) == 0 {
			t = x.Req.Headers.Get(f.tenantHeader)
		}
		return l.st.keys.Allow(l.limit, t, now, 1)
	default:
		return l.st.keys.Allow(l.limit, x.Req.Headers.Get(l.key.header), now, 1)
	}
}

// reject answers 429, code 42902, with the refusing limit's figures.
func reject(x *filters.Exchange, rate []byte, remaining, retryAfter, reset int64) filters.Verdict {
	x.Reject(429, 42902, "rate limit exceeded")
	addHeaders(x, rate, remaining, retryAfter, reset)
	return filters.Respond
}

// unavailable answers 503, code 50304: a fail-closed cluster limit while
// Redis is down.
func unavailable(x *filters.Exchange, rate []byte, retryAfter int64) filters.Verdict {
	x.Reject(503, 50304, "rate limiter unavailable")
	addHeaders(x, rate, 0, retryAfter, 0)
	return filters.Respond
}

func addHeaders(x *filters.Exchange, rate []byte, remaining, retryAfter, reset int64) {
	r := &x.Rejection
	r.AddHeader("Retry-After", ownInt(x, retryAfter))
	r.AddHeader("X-RateLimit-Limit", rate) // the filter's, which outlives the exchange
	r.AddHeader("X-RateLimit-Remaining", ownInt(x, remaining))
	r.AddHeader("X-RateLimit-Reset", ownInt(x, reset))
}

// ownInt formats n into the exchange's arena, so the header value lives
// until the response is written.
func ownInt(x *filters.Exchange, n int64) []byte {
	var b [20]byte
	return x.Own(strconv.AppendInt(b[:0], n, 10))
}
