// Tests for the ip_access and limits configs: checked once, with the
// messages engine/config reports, and filters built from what the check
// parsed.

package access

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/filterstest"
)

func TestIPListsProblems(t *testing.T) {
	global := &IPLists{Allow: []string{"10.0.0.0/8", "localhost"}, Deny: []string{"1.2.3.4/", "fe80::1%eth0"}}
	want := []string{
		`ip_allow[1]: "localhost" is not an IP address or CIDR prefix`,
		`ip_deny[0]: "1.2.3.4/" is not an IP address or CIDR prefix`,
		`ip_deny[1]: "fe80::1%eth0" is not an IP address or CIDR prefix`,
	}
	if got := filterstest.Check(global, nil, nil); !reflect.DeepEqual(got, want) {
		t.Errorf("top level: %q\nwant %q", got, want)
	}
	route := &IPLists{Deny: []string{"10.0.0.0/8/8"}}
	if got := filterstest.Check(route, nil, &filters.RouteInfo{Index: 2}); !reflect.DeepEqual(got, []string{`routes[2].ip_deny[0]: "10.0.0.0/8/8" is not an IP address or CIDR prefix`}) {
		t.Errorf("route: %q", got)
	}
}

// TestIPListsParsedOnce: the filter is built from the prefixes Validate
// parsed, not from the strings, which are not parsed again.
func TestIPListsParsedOnce(t *testing.T) {
	global := &IPLists{Deny: []string{" 203.0.113.0/24 "}}
	route := &IPLists{Allow: []string{"::ffff:203.0.113.7", "198.51.100.0/24"}}
	for _, l := range []*IPLists{global, route} {
		if p := filterstest.Check(l, nil, &filters.RouteInfo{}); len(p) > 0 {
			t.Fatal(p)
		}
	}
	if want := []netip.Prefix{netip.MustParsePrefix("203.0.113.7/32"), netip.MustParsePrefix("198.51.100.0/24")}; !reflect.DeepEqual(route.allow, want) {
		t.Fatalf("parsed %v, want %v (4in6 unmapped)", route.allow, want)
	}
	global.Deny, route.Allow = []string{"garbage"}, []string{"garbage"} // would not parse
	reg, _ := filters.Lookup(NameIPAccess)
	f, err := reg.New(&filters.Build{Name: NameIPAccess, Order: 200, Global: global, Config: route})
	if err != nil {
		t.Fatal(err)
	}
	for client, status := range map[string]int{"198.51.100.9": 0, "203.0.113.7": 403, "192.0.2.1": 403} {
		x := exchange(parse(t, "GET / HTTP/1.1", "Host: a"), "127.0.0.1", client)
		if v := f.Request(x); v == filters.Continue && status != 0 || v != filters.Continue && x.Rejection.Status != status {
			t.Errorf("%s: verdict %v %+v, want status %d", client, v, x.Rejection, status)
		}
	}
}

func TestLimitsProblems(t *testing.T) {
	env := &filterstest.Env{RequestLimits: codec.Limits{MaxURIBytes: 1 << 10}}
	cfg := &LimitsRoute{Limits: &RouteLimits{MaxURIBytes: 2 << 10, MaxHeaderCount: 51, MaxBodyBytes: -1}}
	want := []string{
		"routes[0].limits.max_uri_bytes: 2KiB exceeds the global limits.max_uri_bytes 1KiB; a route may only tighten it",
		"routes[0].limits.max_header_count: 51 exceeds the global limits.max_header_count 50; a route may only tighten it",
		"routes[0].limits.max_body_bytes: must not be negative, got -1B",
	}
	if got := filterstest.Check(cfg, env, &filters.RouteInfo{}); !reflect.DeepEqual(got, want) {
		t.Errorf("%q\nwant %q", got, want)
	}
	ok := &LimitsRoute{Limits: &RouteLimits{MaxBodyBytes: 1 << 10}}
	if p := filterstest.Check(ok, env, &filters.RouteInfo{}); len(p) > 0 {
		t.Fatal(p)
	}
	if l, set := ok.RequestLimits(); !set || l != (codec.Limits{MaxBodyBytes: 1 << 10}) || l.MaxBodyBytes != 1<<10 {
		t.Errorf("RequestLimits = %+v, %v", l, set)
	}
	if _, set := (&LimitsRoute{}).RequestLimits(); set {
		t.Error("a route without limits reports some")
	}
}
