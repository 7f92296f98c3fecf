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

// keySource is what a limit counts by, and where a request gives it.
type keySource struct {
	key keyForm
	// keyHeader is the request header the key reads ("" for keys no header
	// gives; for tenant, read only when auth established no tenant), and
	// repeated the message that refuses a request carrying it twice.
	keyHeader, repeated string
}

func newKeySource(k keyForm, tenantHeader string) keySource {
	ks := keySource{key: k}
	switch k.kind {
	case keyHeader:
		ks.keyHeader = k.header
	case keyTenant:
		ks.keyHeader = tenantHeader
	}
	if ks.keyHeader != "" {
		ks.repeated = "more than one " + ks.keyHeader + " header"
	}
	return ks
}

// value is x's key for a keyed limit: the client IP (written into ip), the
// subject, the tenant (auth's, else the tenant header) or the header's
// value. A request without one has the empty key, which every such request
// shares: leaving a header out does not escape its limit.
func (ks *keySource) value(x *filters.Exchange, ip *[16]byte) []byte {
	switch ks.key.kind {
	case keyIP:
		*ip = x.ClientIP.As16()
		return ip[:]
	case keyUser:
		return x.Identity.Subject
	case keyTenant:
		if t := x.Identity.Tenant; len(t) > 0 {
			return t
		}
	}
	return x.Req.Headers.Get(ks.keyHeader)
}

// localLimit is one local limit: its parameters and its state in the Store.
type localLimit struct {
	keySource
	limit ratelimit.Limit
	st    *state
	rate  []byte // X-RateLimit-Limit
}

// remoteLimit is one cluster limit: lim for one bucket (global, route),
// keyed for a bucket per key. st holds its state in the Store alive: the
// Store only keeps it while a compiled filter does.
type remoteLimit struct {
	keySource
	lim   *cluster.Limit
	keyed *cluster.KeyedLimit
	st    *state
	rate  []byte
}

// take is Take on the limit's bucket for x, or on x's key's.
func (r *remoteLimit) take(x *filters.Exchange, now int64, done func(cluster.Decision)) cluster.Decision {
	if r.keyed == nil {
		return r.lim.Take(now, 1, done)
	}
	var ip [16]byte
	return r.keyed.Take(now, r.value(x, &ip), 1, done)
}

// giveBack returns what an Allow of take took.
func (r *remoteLimit) giveBack(d cluster.Decision) {
	if r.keyed == nil {
		r.lim.Return(d)
	} else {
		r.keyed.Return(d)
	}
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
			f.remote = append(f.remote, remoteLimit{keySource: newKeySource(l.key, f.tenantHeader),
				lim: st.remote, keyed: st.keyed, st: st, rate: rate})
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
		f.local = append(f.local, localLimit{keySource: newKeySource(l.key, f.tenantHeader), limit: l.limit, st: st, rate: rate})
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
		if msg := f.local[i].repeatedIn(x); msg != "" {
			return msg
		}
	}
	for i := range f.remote {
		if msg := f.remote[i].repeatedIn(x); msg != "" {
			return msg
		}
	}
	return ""
}

// repeatedIn is the refusal for x when it repeats the key's header.
func (ks *keySource) repeatedIn(x *filters.Exchange) string {
	if ks.keyHeader == "" || ks.key.kind == keyTenant && len(x.Identity.Tenant) > 0 {
		return ""
	}
	if _, n := x.Req.Headers.Only(ks.keyHeader); n > 1 {
		return ks.repeated
	}
	return ""
}

// allowLocal takes a token from the limit's bucket for x: the one bucket,
// or the bucket of x's key (keySource.value).
func (f *rateFilter) allowLocal(l *localLimit, x *filters.Exchange, now int64) ratelimit.Decision {
	if !l.key.keyed() {
		return l.st.bucket.Allow(l.limit, now, 1)
	}
	var ip [16]byte
	return l.st.keys.Allow(l.limit, l.value(x, &ip), now, 1)
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
