// Tests of the "external_auth" filter, with a fake SubRequester.

package auth

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool/pooltest"
	"github.com/loopgate/loopgate/pool/units"
)

// fakeSub records sub-requests. With refuse set, Do refuses them; with
// answer set it resumes the ticket inside Do; otherwise the test answers
// later through pending.
type fakeSub struct {
	refuse  error
	answer  *filters.SubResponse
	reqs    []*filters.SubRequest
	pending []func(*filters.SubResponse)
}

func (s *fakeSub) Do(t filters.Ticket, r *filters.SubRequest, then func(*filters.Exchange, *filters.SubResponse) filters.Verdict) error {
	if s.refuse != nil {
		return s.refuse
	}
	s.reqs = append(s.reqs, r)
	answer := func(resp *filters.SubResponse) {
		t.Resume(func(x *filters.Exchange) filters.Verdict { return then(x, resp) })
	}
	if s.answer != nil {
		answer(s.answer)
		return nil
	}
	s.pending = append(s.pending, answer)
	return nil
}

func externalConfig() *ExternalAuth {
	return &ExternalAuth{
		Upstream:       "authsvc",
		Path:           "/auth",
		Timeout:        units.Duration(time.Second),
		ForwardHeaders: []string{"Authorization", "Cookie"},
		CopyHeaders:    []string{"X-User-Id", "X-User-Name", "X-User-Roles"},
	}
}

func headers(kv ...string) codec.Headers {
	var h codec.Headers
	for i := 0; i < len(kv); i += 2 {
		h = append(h, codec.Header{Name: []byte(kv[i]), Value: []byte(kv[i+1])})
	}
	return h
}

func subHeader(r *filters.SubRequest, name string) []string {
	var vs []string
	for _, h := range r.Headers {
		if h.Name == name {
			vs = append(vs, string(h.Value))
		}
	}
	return vs
}

func TestExternalRequestShape(t *testing.T) {
	f := NewExternal(externalConfig(), 3, 350)
	if f.Name() != "external_auth" || f.Order() != 350 {
		t.Fatalf("name %q order %d", f.Name(), f.Order())
	}
	buf := []byte(get("Authorization: Bearer abc\r\nUser-Agent: curl\r\nCookie: a=1\r\ncookie: b=2\r\n"))
	x, resumed := exchangeFrom(t, buf, 0)
	sub := &fakeSub{}
	x.Sub = sub
	if v := f.Request(x); v != filters.Suspend {
		t.Fatalf("verdict %v, want suspend", v)
	}
	// The request's buffer is reused once the callback returns: the
	// sub-request must hold copies.
	for i := range buf {
		buf[i] = '#'
	}
	r := sub.reqs[0]
	if r.Group != 3 || r.Method != "GET" || r.Path != "/auth" || r.Timeout != time.Second {
		t.Fatalf("sub-request %+v", r)
	}
	want := map[string][]string{
		"Authorization":      {"Bearer abc"},
		"Cookie":             {"a=1", "b=2"},
		"User-Agent":         nil,
		"X-Forwarded-Method": {"GET"},
		"X-Forwarded-Uri":    {"/orders?id=7"},
		"X-Forwarded-Host":   {"api.example"},
		"X-Forwarded-For":    {"192.0.2.7"},
	}
	for name, vs := range want {
		if got := subHeader(r, name); !slices.Equal(got, vs) {
			t.Errorf("%s: %q, want %q", name, got, vs)
		}
	}
	sub.pending[0](&filters.SubResponse{Status: 204})
	if v := <-resumed; v != filters.Continue {
		t.Fatalf("resumed with %v", v)
	}
}

func TestExternalAdmit(t *testing.T) {
	f := NewExternal(externalConfig(), 0, 350)
	x, resumed := exchange(t, withAuth("Bearer abc"), 0)
	resp := &filters.SubResponse{Status: 200, Headers: headers("X-User-Id", "u-42", "X-User-Roles", "reader, writer,,", "X-Other", "z")}
	x.Sub = &fakeSub{answer: resp}
	if v := f.Request(x); v != filters.Suspend {
		t.Fatalf("verdict %v", v)
	}
	if v := <-resumed; v != filters.Continue {
		t.Fatalf("resumed with %v: %+v", v, x.Rejection)
	}
	// Response headers are valid only during the callback.
	for _, h := range resp.Headers {
		copy(h.Value, strings.Repeat("#", len(h.Value)))
	}
	sets := map[string]string{}
	for _, h := range x.ReqEdits.Set {
		sets[h.Name] = string(h.Value)
	}
	if len(sets) != 2 || sets["X-User-Id"] != "u-42" || sets["X-User-Roles"] != "reader, writer,," {
		t.Errorf("set edits %v", sets)
	}
	if !slices.Equal(x.ReqEdits.Remove, []string{"X-User-Name"}) {
		t.Errorf("remove edits %v: a client's X-User-Name must not pass", x.ReqEdits.Remove)
	}
	id := x.Identity
	if !id.Authenticated || string(id.Subject) != "u-42" || !slices.Equal(id.Roles, []string{"reader", "writer"}) {
		t.Errorf("identity %+v", id)
	}
}

func TestExternalKeepsIdentity(t *testing.T) {
	f := NewExternal(externalConfig(), 0, 350)
	x, resumed := exchange(t, withAuth("Bearer abc"), 0)
	x.Identity = filters.Identity{Authenticated: true, Subject: []byte("from-jwt")}
	x.Sub = &fakeSub{answer: &filters.SubResponse{Status: 200, Headers: headers("X-User-Id", "other")}}
	f.Request(x)
	if v := <-resumed; v != filters.Continue || string(x.Identity.Subject) != "from-jwt" {
		t.Fatalf("%v %+v", v, x.Identity)
	}
}

func TestExternalRefusals(t *testing.T) {
	down := errors.New("connect: refused")
	cases := []struct {
		name     string
		raw      string
		resp     filters.SubResponse
		failOpen bool
		verdict  filters.Verdict
		status   int
		code     int
		header   string
	}{
		{"401 with credential", withAuth("Bearer abc"), filters.SubResponse{Status: 401}, false, filters.Respond, 401, 40102, `Bearer error="invalid_token"`},
		{"401 cookie only", get("Cookie: s=1\r\n"), filters.SubResponse{Status: 401}, false, filters.Respond, 401, 40102, `Bearer error="invalid_token"`},
		{"401 without credential", get(""), filters.SubResponse{Status: 401}, false, filters.Respond, 401, 40101, `Bearer realm="loopgate"`},
		{"403", withAuth("x"), filters.SubResponse{Status: 403}, false, filters.Respond, 403, 40301, ""},
		{"404", withAuth("x"), filters.SubResponse{Status: 404}, false, filters.Respond, 403, 40301, ""},
		{"302", withAuth("x"), filters.SubResponse{Status: 302}, false, filters.Respond, 403, 40301, ""},
		{"500", withAuth("x"), filters.SubResponse{Status: 500}, false, filters.Respond, 503, 50301, ""},
		{"503 fail open", withAuth("x"), filters.SubResponse{Status: 503}, true, filters.Continue, 0, 0, ""},
		{"error", withAuth("x"), filters.SubResponse{Err: down}, false, filters.Respond, 503, 50301, ""},
		{"error fail open", withAuth("x"), filters.SubResponse{Err: down}, true, filters.Continue, 0, 0, ""},
		{"403 fail open", withAuth("x"), filters.SubResponse{Status: 403}, true, filters.Respond, 403, 40301, ""},
	}
	for _, c := range cases {
		cfg := externalConfig()
		cfg.FailOpen = c.failOpen
		f := NewExternal(cfg, 0, 350)
		x, resumed := exchange(t, c.raw, 0)
		x.Sub = &fakeSub{answer: &c.resp}
		if v := f.Request(x); v != filters.Suspend {
			t.Errorf("%s: request verdict %v", c.name, v)
			continue
		}
		v := <-resumed
		r := x.Rejection
		if v != c.verdict || r.Status != c.status || r.Code != c.code || string(r.Header("WWW-Authenticate")) != c.header {
			t.Errorf("%s: %v %+v, want %v %d %d %q", c.name, v, r, c.verdict, c.status, c.code, c.header)
		}
		if x.Identity.Authenticated || len(x.ReqEdits.Set) != 0 {
			t.Errorf("%s: refused or failed-open request got identity %+v, edits %+v", c.name, x.Identity, x.ReqEdits)
		}
		// A request let through unauthenticated loses the client's own
		// identity headers, so none can pass as the service's.
		if wantRemoved := c.verdict == filters.Continue; wantRemoved != (len(x.ReqEdits.Remove) == len(cfg.CopyHeaders)) {
			t.Errorf("%s: removals %v", c.name, x.ReqEdits.Remove)
		}
	}
}

func TestExternalNoRequester(t *testing.T) {
	for _, open := range []bool{false, true} {
		cfg := externalConfig()
		cfg.FailOpen = open
		x, _ := exchange(t, withAuth("x"), 0)
		got := NewExternal(cfg, 0, 350).Request(x)
		if want := map[bool]filters.Verdict{false: filters.Respond, true: filters.Continue}[open]; got != want || (!open && x.Rejection.Code != 50301) {
			t.Errorf("fail_open %v: %v %+v", open, got, x.Rejection)
		}
	}
}

// Several exchanges suspended at once on one loop, answered out of order,
// each get their own answer (call state is per request, then reused).
func TestExternalInterleaved(t *testing.T) {
	f := NewExternal(externalConfig(), 0, 350)
	sub := &fakeSub{}
	const n = 4
	var xs [n]*filters.Exchange
	var res [n]chan filters.Verdict
	for i := range n {
		xs[i], res[i] = exchange(t, withAuth("Bearer t"+string(rune('0'+i))), 0)
		xs[i].Sub = sub
		if f.Request(xs[i]) != filters.Suspend {
			t.Fatal("not suspended")
		}
	}
	for i := n - 1; i >= 0; i-- {
		sub.pending[i](&filters.SubResponse{Status: 200, Headers: headers("X-User-Id", "u"+string(rune('0'+i)))})
	}
	for i := range n {
		if v := <-res[i]; v != filters.Continue || string(xs[i].Identity.Subject) != "u"+string(rune('0'+i)) {
			t.Errorf("exchange %d: %v %q", i, v, xs[i].Identity.Subject)
		}
		if got := subHeader(sub.reqs[i], "Authorization"); len(got) != 0 {
			t.Errorf("exchange %d: finished call still references its headers: %q", i, got)
		}
	}
	// A second round reuses the calls.
	x, r := exchange(t, withAuth("Bearer again"), 0)
	x.Sub = sub
	f.Request(x)
	if got := subHeader(sub.reqs[n], "Authorization"); !slices.Equal(got, []string{"Bearer again"}) {
		t.Fatalf("reused call sent %q", got)
	}
	sub.pending[n](&filters.SubResponse{Status: 403})
	if v := <-r; v != filters.Respond {
		t.Fatalf("reused call: %v", v)
	}
}

func TestExternalAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	f := NewExternal(externalConfig(), 0, 350)
	buf := []byte(withAuth("Bearer abc"))
	req := new(codec.Request)
	if _, err := codec.ParseRequest(buf, req, nil); err != nil {
		t.Fatal(err)
	}
	sub := newSyncSub(&filters.SubResponse{Status: 200, Headers: headers("X-User-Id", "u-42")})
	x := new(filters.Exchange)
	p := &syncParker{x: x}
	peer := netip.MustParseAddr("192.0.2.7")
	run := func() {
		x.Reset(req, nil, peer, 0, p)
		x.Sub = sub
		if f.Request(x) != filters.Suspend || p.got != filters.Continue {
			t.Fatalf("%v %+v", p.got, x.Rejection)
		}
	}
	run() // warm the arena, the edit lists and the pool
	if allocs := testing.AllocsPerRun(100, run); allocs != 0 {
		t.Fatalf("%.1f allocs per request, want 0", allocs)
	}
}

func BenchmarkExternalAuth(b *testing.B) {
	f := NewExternal(externalConfig(), 0, 350)
	req := new(codec.Request)
	if _, err := codec.ParseRequest([]byte(withAuth("Bearer abc")), req, nil); err != nil {
		b.Fatal(err)
	}
	sub := newSyncSub(&filters.SubResponse{Status: 200, Headers: headers("X-User-Id", "u-42")})
	x := new(filters.Exchange)
	p := &syncParker{x: x}
	peer := netip.MustParseAddr("192.0.2.7")
	b.ReportAllocs()
	for b.Loop() {
		x.Reset(req, nil, peer, 0, p)
		x.Sub = sub
		f.Request(x)
	}
}

// syncSub answers at once through the ticket and records nothing, without
// allocating: its resume function is bound once.
type syncSub struct {
	resp    *filters.SubResponse
	then    func(*filters.Exchange, *filters.SubResponse) filters.Verdict
	deliver func(*filters.Exchange) filters.Verdict
}

func newSyncSub(resp *filters.SubResponse) *syncSub {
	s := &syncSub{resp: resp}
	s.deliver = func(x *filters.Exchange) filters.Verdict { return s.then(x, s.resp) }
	return s
}

func (s *syncSub) Do(t filters.Ticket, _ *filters.SubRequest, then func(*filters.Exchange, *filters.SubResponse) filters.Verdict) error {
	s.then = then
	t.Resume(s.deliver)
	return nil
}

// syncParker runs a resume at once and keeps its verdict.
type syncParker struct {
	x   *filters.Exchange
	got filters.Verdict
}

func (p *syncParker) Park() filters.Ticket { return filters.NewTicket(p, 1) }

func (p *syncParker) Resume(_ uint64, fn func(*filters.Exchange) filters.Verdict) { p.got = fn(p.x) }

// Two Authorization fields are refused before the service is asked: it
// would judge one and the upstream might read the other.
func TestExternalDuplicateAuthorization(t *testing.T) {
	f := NewExternal(externalConfig(), 0, 350)
	sub := &fakeSub{answer: &filters.SubResponse{Status: 200}}
	x, _ := exchange(t, get("Authorization: Bearer a\r\nauthorization: Bearer b\r\n"), 0)
	x.Sub = sub
	r := &x.Rejection
	if v := f.Request(x); v != filters.Respond || r.Status != 400 || r.Code != 40001 || r.Message != "more than one Authorization header" {
		t.Fatalf("%v %+v", v, *r)
	}
	if len(sub.reqs) != 0 {
		t.Fatal("the auth service was asked")
	}
	// Cookie may repeat, and Authorization may when it is not forwarded.
	x, resumed := exchange(t, get("Authorization: Bearer a\r\nCookie: a=1\r\nCookie: b=2\r\n"), 0)
	x.Sub = sub
	if f.Request(x) != filters.Suspend || <-resumed != filters.Continue {
		t.Fatalf("cookies: %+v", x.Rejection)
	}
	cfg := externalConfig()
	cfg.ForwardHeaders = []string{"Cookie"}
	x, resumed = exchange(t, get("Authorization: a\r\nAuthorization: b\r\n"), 0)
	x.Sub = sub
	if NewExternal(cfg, 0, 350).Request(x) != filters.Suspend || <-resumed != filters.Continue {
		t.Fatalf("Authorization not forwarded: %+v", x.Rejection)
	}
}

// A sub-request the requester refuses (one is already in flight) counts as
// the service being down: 503, or through without identity with fail_open.
// The call state goes back to the pool untouched by a callback.
func TestExternalRefusedSubRequest(t *testing.T) {
	for _, open := range []bool{false, true} {
		cfg := externalConfig()
		cfg.FailOpen = open
		f := NewExternal(cfg, 0, 350)
		x, resumed := exchange(t, get("Authorization: Bearer a\r\nX-User-Id: forged\r\n"), 0)
		x.Sub = &fakeSub{refuse: filters.ErrSubRequestActive}
		v := f.Request(x)
		switch {
		case !open && (v != filters.Respond || x.Rejection.Status != 503 || x.Rejection.Code != 50301):
			t.Errorf("fail_open off: %v %+v", v, x.Rejection)
		case open && (v != filters.Continue || !slices.Contains(x.ReqEdits.Remove, "X-User-Id")):
			t.Errorf("fail_open on: %v, removals %v", v, x.ReqEdits.Remove)
		}
		select {
		case got := <-resumed:
			t.Errorf("fail_open %v: resumed with %v after a synchronous verdict", open, got)
		default:
		}
		if x.Identity.Authenticated {
			t.Errorf("fail_open %v: identity set", open)
		}
	}
}

// After auth set an identity header from a verified credential, the
// service's copy of it does not add a second field.
func TestExternalLeavesAuthHeaders(t *testing.T) {
	f := NewExternal(externalConfig(), 0, 350)
	x, resumed := exchange(t, withAuth("Bearer abc"), 0)
	x.Identity = filters.Identity{Authenticated: true, Subject: []byte("from-jwt"), Kind: filters.KindJWT}
	x.ReqEdits.AddSet("X-User-Id", []byte("from-jwt"))
	x.Sub = &fakeSub{answer: &filters.SubResponse{Status: 200, Headers: headers("x-user-id", "from-service", "X-User-Name", "n")}}
	f.Request(x)
	if v := <-resumed; v != filters.Continue {
		t.Fatalf("%v %+v", v, x.Rejection)
	}
	var ids []string
	for _, h := range x.ReqEdits.Set {
		if strings.EqualFold(h.Name, "X-User-Id") {
			ids = append(ids, string(h.Value))
		}
	}
	if !slices.Equal(ids, []string{"from-jwt"}) {
		t.Fatalf("X-User-Id set to %q, want auth's value only", ids)
	}
	if x.Identity.Kind != filters.KindJWT {
		t.Fatalf("identity %+v replaced", x.Identity)
	}
	x, resumed = exchange(t, withAuth("Bearer abc"), 0)
	x.Sub = &fakeSub{answer: &filters.SubResponse{Status: 200, Headers: headers("X-User-Id", "u")}}
	f.Request(x)
	if <-resumed; x.Identity.Kind != filters.KindExternal {
		t.Fatalf("identity kind %q, want %q", x.Identity.Kind, filters.KindExternal)
	}
}
