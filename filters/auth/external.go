// The "external_auth" route filter: an asynchronous sub-request to an auth
// service decides each request.

package auth

import (
	"strings"
	"sync"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

// externalFilter asks an auth service about each request. It is immutable
// and safe for concurrent use; each request's call state comes from calls.
type externalFilter struct {
	filters.Base
	group    int
	path     string
	timeout  time.Duration
	forward  []string // request headers sent to the service
	single   string   // of forward, the credential header a request may carry once; "" = none
	copy     []string // service response headers set on the upstream request
	failOpen bool
	calls    sync.Pool // *extCall, reused so a request does not allocate
}

var _ filters.Filter = (*externalFilter)(nil)

// NewExternal is a route's "external_auth" filter. For each request it
// sends GET cfg.Path to upstream group `group`, carrying the request's
// cfg.ForwardHeaders plus X-Forwarded-Method, X-Forwarded-Uri,
// X-Forwarded-Host and X-Forwarded-For (the client IP), and parks the
// request until the answer, which comes back through the park's ticket:
//
//	2xx           continue; each cfg.CopyHeaders field the service sent is
//	              set on the upstream request, and each it did not send is
//	              removed (a client cannot forge X-User-Id); a header an
//	              earlier filter already sets (auth's identity headers) keeps
//	              that value; x.Identity is set from X-User-Id and
//	              X-User-Roles unless auth already set it
//	401           401, 40101 if the request carried none of the forwarded
//	              headers, else 40102
//	5xx, no answer, timeout, or a sub-request refused (Do's error)
//	              503/50301 "auth service unavailable", or with
//	              cfg.FailOpen continue unauthenticated, the client's
//	              cfg.CopyHeaders fields removed
//	anything else 403/40301 "denied by auth service"
//
// A request carrying Authorization more than once, when Authorization is
// forwarded, is refused with 400/40001 before any sub-request: the service
// would judge one field and the upstream might read the other.
//
// A request costs no allocations beyond its roles: when the service sends
// X-User-Roles, the identity's role strings are allocated.
func NewExternal(cfg *ExternalAuth, group int, order int) filters.Filter {
	f := &externalFilter{
		Base:     filters.Base{FilterName: NameExternal, FilterOrder: order},
		group:    group,
		path:     cfg.Path,
		timeout:  time.Duration(cfg.Timeout),
		forward:  append([]string(nil), cfg.ForwardHeaders...),
		copy:     append([]string(nil), cfg.CopyHeaders...),
		failOpen: cfg.FailOpen,
	}
	for _, name := range f.forward {
		if strings.EqualFold(name, "Authorization") {
			f.single = name
		}
	}
	f.calls.New = func() any {
		c := &extCall{f: f}
		c.then = c.decide // bound once: handing it to Do does not allocate
		return c
	}
	return f
}

// extCall is one request's sub-request. It belongs to that request from
// Request until its continuation (decide) has run; a request whose park
// ended first (timeout, client gone) never gives it back, and the pool
// makes another.
type extCall struct {
	f          *externalFilter
	req        filters.SubRequest
	credential bool // the request carried at least one forwarded header
	then       func(*filters.Exchange, *filters.SubResponse) filters.Verdict
	ip         [64]byte // scratch for formatting the client IP
	uri        []byte   // scratch for X-Forwarded-Uri
}

// forwardedURI is the target the auth service judges: the normalised path
// the route matched and the upstream will receive, with the query. The raw
// target would let "/pub/../admin" be judged as one path and served as
// another.
func (c *extCall) forwardedURI(r *codec.Request) []byte {
	c.uri = append(c.uri[:0], r.Path...)
	if len(r.Query) > 0 {
		c.uri = append(c.uri, '?')
		c.uri = append(c.uri, r.Query...)
	}
	return c.uri
}

func (f *externalFilter) Request(x *filters.Exchange) filters.Verdict {
	if f.single != "" {
		if _, n := onlyField(x.Req.Headers, f.single); n > 1 {
			return x.Reject(400, 40001, "more than one Authorization header")
		}
	}
	if x.Sub == nil {
		return f.unavailable(x)
	}
	c := f.calls.Get().(*extCall)
	c.credential = false
	// Every value is copied into the exchange's arena: the call is
	// asynchronous and the request's own buffer may move meanwhile.
	h := c.req.Headers[:0]
	for _, rh := range x.Req.Headers {
		for _, name := range f.forward {
			if codec.EqualFold(rh.Name, name) {
				h = append(h, filters.Header{Name: name, Value: x.Own(rh.Value)})
				c.credential = true
				break
			}
		}
	}
	h = append(h,
		filters.Header{Name: "X-Forwarded-Method", Value: x.Own(x.Req.Method)},
		filters.Header{Name: "X-Forwarded-Uri", Value: x.Own(c.forwardedURI(x.Req))})
	if len(x.Req.Host) > 0 {
		h = append(h, filters.Header{Name: "X-Forwarded-Host", Value: x.Own(x.Req.Host)})
	}
	if x.ClientIP.IsValid() {
		h = append(h, filters.Header{Name: "X-Forwarded-For", Value: x.Own(x.ClientIP.AppendTo(c.ip[:0]))})
	}
	c.req = filters.SubRequest{Group: f.group, Method: "GET", Path: f.path, Headers: h, Timeout: f.timeout}
	if err := x.Sub.Do(x.Park(), &c.req, c.then); err != nil {
		// Refused (another sub-request is in flight): then never runs, so
		// the call is given back here and the service counts as down. The
		// verdict below is not Suspend, so the park is void.
		c.release()
		return f.unavailable(x)
	}
	return filters.Suspend
}

// release returns c to the pool, dropping its views into the exchange.
func (c *extCall) release() {
	clear(c.req.Headers) // drop views into the exchange's arena
	c.f.calls.Put(c)
}

// decide is the sub-request's continuation, on the exchange's loop: it
// turns the service's answer into the verdict, with its edits or rejection
// applied to x, and gives c back.
func (c *extCall) decide(x *filters.Exchange, resp *filters.SubResponse) filters.Verdict {
	v := c.f.judge(x, resp, c.credential)
	c.release()
	return v
}

// judge maps the service's answer to the verdict.
func (f *externalFilter) judge(x *filters.Exchange, resp *filters.SubResponse, credential bool) filters.Verdict {
	switch s := resp.Status; {
	case resp.Err != nil || s == 0 || s >= 500:
		return f.unavailable(x)
	case s >= 200 && s < 300:
		return f.admit(x, resp.Headers)
	case s == 401:
		if !credential {
			return reject(x, FailMissing, challengeMissing)
		}
		return reject(x, FailInvalid, challengeInvalid)
	}
	return x.Reject(403, 40301, "denied by auth service")
}

func (f *externalFilter) unavailable(x *filters.Exchange) filters.Verdict {
	if f.failOpen {
		// Let the request through unauthenticated: identity headers the
		// client sent itself must not pass as the service's.
		for _, name := range f.copy {
			if !x.ReqEdits.AddRemove(name) {
				return x.Reject(500, 50001, "external_auth: too many header edits")
			}
		}
		return filters.Continue
	}
	return x.Reject(503, 50301, "auth service unavailable")
}

// admit copies the identity headers onto the upstream request and sets
// x.Identity from them.
func (f *externalFilter) admit(x *filters.Exchange, hs codec.Headers) filters.Verdict {
	for _, name := range f.copy {
		if x.ReqEdits.Sets(name) {
			continue // auth set it from a verified credential: one value, auth's
		}
		var ok bool
		if v := hs.Get(name); v != nil {
			ok = x.ReqEdits.AddSet(name, x.Own(v))
		} else {
			ok = x.ReqEdits.AddRemove(name) // the client's own copy must not pass
		}
		if !ok {
			return x.Reject(500, 50001, "external_auth: too many header edits")
		}
	}
	if !x.Identity.Authenticated {
		x.Identity = filters.Identity{Authenticated: true, Kind: filters.KindExternal}
		if id := hs.Get("X-User-Id"); len(id) > 0 {
			x.Identity.Subject = x.Own(id)
		}
		x.Identity.Roles = splitRoles(hs.Get("X-User-Roles"))
	}
	return filters.Continue
}

// splitRoles splits a comma-separated list, dropping blanks.
func splitRoles(v []byte) []string {
	if len(v) == 0 {
		return nil
	}
	var roles []string
	for _, r := range strings.Split(string(v), ",") {
		if r = strings.TrimSpace(r); r != "" {
			roles = append(roles, r)
		}
	}
	return roles
}
