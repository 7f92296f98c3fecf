// Tests that each route config is checked once, with the messages
// engine/config reports, and that the filters are built from what the
// check compiled rather than checking or compiling again.

package transform

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/loopgate/loopgate/filters"
	_ "github.com/loopgate/loopgate/filters/auth" // registers auth, which sets identity headers
	"github.com/loopgate/loopgate/filters/filterstest"
)

// TestRewriteRegexCompiledOnce: the filter runs the regex Validate
// compiled; the pattern is not compiled again (a pattern changed after
// the check, even to an invalid one, changes nothing).
func TestRewriteRegexCompiledOnce(t *testing.T) {
	rw := checked(t, &RewriteRoute{Rewrite: &Rewrite{Regex: `^/old/(\d+)$`, Replacement: "/new/$1"}}).Rewrite
	compiled := rw.re
	rw.Regex = "("
	f, err := NewRewrite(500, rw)
	if err != nil {
		t.Fatal(err)
	}
	if f.(*rewrite).re != compiled {
		t.Fatal("the filter compiled its own regex")
	}
	req, _ := request(t, "GET /old/7 HTTP/1.1", "Host: a")
	x := exchange(req, "192.0.2.1")
	f.Request(x)
	if string(x.Path) != "/new/7" {
		t.Errorf("path %q, want /new/7", x.Path)
	}
	p := filterstest.Check(&RewriteRoute{Rewrite: &Rewrite{Regex: "("}}, nil, &filters.RouteInfo{})
	if want := []string{"routes[0].rewrite.regex: error parsing regexp: missing closing ): `(`"}; !reflect.DeepEqual(p, want) {
		t.Errorf("%q, want %q", p, want)
	}
}

// TestHeaderEditsCheckedOnce: names and values are checked by Validate
// alone, with one message each; the filter copies what Validate prepared.
func TestHeaderEditsCheckedOnce(t *testing.T) {
	cfg := checked(t, &HeadersRoute{Request: &HeaderOps{Set: map[string]string{"X-B": " b ", "X-A": "a"}}})
	cfg.Request.Set["Bad Name"] = "\r\n" // after the check: not looked at again
	f, err := NewHeaders(400, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := request(t, "GET / HTTP/1.1", "Host: a")
	x := exchange(r, "192.0.2.1")
	f.Request(x)
	if got := editList(x.ReqEdits.Set); got != "X-A=a X-B=b" {
		t.Errorf("request sets %s, want the checked edits in name order", got)
	}
	if _, err := NewHeaders(400, &HeadersRoute{Response: &HeaderOps{Remove: []string{"X-A"}}}); err == nil {
		t.Error("built from edits Validate never saw")
	}

	for _, c := range []struct {
		ops  *HeaderOps
		want string
	}{
		{&HeaderOps{Set: map[string]string{"Bad Name": "x"}}, `routes[0].request_headers.set: "Bad Name" is not a valid header name`},
		{&HeaderOps{Remove: []string{""}}, `routes[0].request_headers.remove[0]: "" is not a valid header name`},
		{&HeaderOps{Add: map[string]string{"content-length": "5"}},
			`routes[0].request_headers.add: "content-length" is managed by the proxy: framing and hop-by-hop headers cannot be edited`},
		{&HeaderOps{Set: map[string]string{"X-A": "a\r\nX-B: b"}}, "routes[0].request_headers.set.X-A: value holds a control character (only tab is allowed)"},
	} {
		p := filterstest.Check(&HeadersRoute{Request: c.ops}, nil, &filters.RouteInfo{})
		if !reflect.DeepEqual(p, []string{c.want}) {
			t.Errorf("%+v: %q, want %q", c.ops, p, c.want)
		}
	}
}

// TestMaxHeaderOpsIsTheOneLimit: MaxHeaderOps entries pass, one more is
// refused, by the check and with the count in the message.
func TestMaxHeaderOpsIsTheOneLimit(t *testing.T) {
	list := func(n int) (m map[string]string, names []string) {
		m = map[string]string{}
		for i := range n {
			m[fmt.Sprintf("X-H%d", i)] = "v"
			names = append(names, fmt.Sprintf("X-H%d", i))
		}
		return m, names
	}
	full, fullNames := list(MaxHeaderOps)
	checked(t, &HeadersRoute{Request: &HeaderOps{Set: full, Add: full, Remove: fullNames}})
	over, overNames := list(MaxHeaderOps + 1)
	p := filterstest.Check(&HeadersRoute{Response: &HeaderOps{Add: over, Remove: overNames}}, nil, &filters.RouteInfo{})
	want := []string{
		fmt.Sprintf("routes[0].response_headers.add: %d entries, at most %d", MaxHeaderOps+1, MaxHeaderOps),
		fmt.Sprintf("routes[0].response_headers.remove: %d entries, at most %d", MaxHeaderOps+1, MaxHeaderOps),
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("%q\nwant %q", p, want)
	}
}

// TestIdentityEditsRefused: a route whose chain sets identity headers may
// not set them with request_headers; other routes may.
func TestIdentityEditsRefused(t *testing.T) {
	env := &filterstest.Env{Identity: []string{"X-User-Id"}}
	cfg := func() *HeadersRoute {
		return &HeadersRoute{Request: &HeaderOps{Set: map[string]string{"x-user-id": "a"}}}
	}
	p := filterstest.Check(cfg(), env, &filters.RouteInfo{Chain: []string{"auth", NameHeaders}})
	if want := []string{"routes[0].request_headers.set.x-user-id: X-User-Id is an identity header, set by the route's auth filters"}; !reflect.DeepEqual(p, want) {
		t.Errorf("%q, want %q", p, want)
	}
	if p := filterstest.Check(cfg(), env, &filters.RouteInfo{Chain: []string{NameHeaders}}); len(p) > 0 {
		t.Errorf("without auth: %q", p)
	}
}

func TestGrayAndHashProblems(t *testing.T) {
	env := &filterstest.Env{Upstreams: []string{"u", "v"}}
	route := &filters.RouteInfo{Upstream: "u"}
	for _, c := range []struct {
		cfg  filterstest.Config
		want []string
	}{
		{&GrayRoute{Gray: &Gray{Upstream: "u", Header: "X Gray", Weight: 101}}, []string{
			`routes[0].gray.upstream: "u" is the route's own upstream`,
			`routes[0].gray.header: "X Gray" is not a valid header name`,
			"routes[0].gray.weight: 101 is not a percentage from 0 to 100",
		}},
		{&GrayRoute{Gray: &Gray{Upstream: "w", Cookie: "a=b"}}, []string{
			`routes[0].gray.upstream: unknown upstream "w"`,
			`routes[0].gray.cookie: "a=b" is not a valid cookie name`,
		}},
		{&HashRoute{Hash: &Hash{Header: "X;U", User: true}}, []string{
			"routes[0].hash: set exactly one of header, cookie and user",
			`routes[0].hash.header: "X;U" is not a valid header name`,
		}},
	} {
		if got := filterstest.Check(c.cfg, env, route); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%+v: %q\nwant %q", c.cfg, got, c.want)
		}
	}
	g := &GrayRoute{Gray: &Gray{Upstream: "v", Header: "X-Gray"}}
	if p := filterstest.Check(g, env, route); len(p) > 0 || g.Gray.Value != "true" {
		t.Errorf("%q, value %q (default true)", p, g.Gray.Value)
	}
}
