// Tests for the rewrite filter.

package transform

import (
	"testing"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/filterstest"
)

func TestRewrite(t *testing.T) {
	const unchanged = "(nil)"
	for _, tc := range []struct {
		name string
		cfg  Rewrite
		uri  string
		want string
	}{
		{"strip", Rewrite{StripPrefix: "/api"}, "/api/users", "/users"},
		{"strip whole path", Rewrite{StripPrefix: "/api"}, "/api", "/"},
		{"strip with slash keeps a leading slash", Rewrite{StripPrefix: "/api/"}, "/api/users", "/users"},
		{"strip cuts whole segments only", Rewrite{StripPrefix: "/api"}, "/apiv2/x", unchanged},
		{"strip with slash cuts whole segments only", Rewrite{StripPrefix: "/api/"}, "/apiv2/x", unchanged},
		{"strip with slash strips the bare prefix", Rewrite{StripPrefix: "/api/"}, "/api", "/"},
		{"strip ignores ASCII case", Rewrite{StripPrefix: "/rw", AddPrefix: "/internal"}, "/RW/v1/users", "/internal/v1/users"},
		{"strip ignores a segment's ;params, as routing does", Rewrite{StripPrefix: "/admin"}, "/admin;x/y", "/y"},
		{"strip multi-segment with params", Rewrite{StripPrefix: "/a/b/"}, "/A;p/b;q=1/c", "/c"},
		{"strip ignores ASCII case, prefix with slash", Rewrite{StripPrefix: "/Rw/", AddPrefix: "/internal"}, "/rW/v1/users", "/internal/v1/users"},
		{"strip case-insensitive still needs a boundary", Rewrite{StripPrefix: "/rw"}, "/RWX/v1", unchanged},
		{"strip of several segments", Rewrite{StripPrefix: "/a/b"}, "/A/b/c", "/c"},
		{"strip of several segments needs each one", Rewrite{StripPrefix: "/a/b"}, "/a/bc", unchanged},
		{"strip prefix is normalised", Rewrite{StripPrefix: "//%61pi//"}, "/api/users", "/users"},
		{"strip root strips nothing", Rewrite{StripPrefix: "/"}, "/users", unchanged},
		{"strip keeps the rest's case", Rewrite{StripPrefix: "/api"}, "/API/Users", "/Users"},
		{"strip miss leaves the path", Rewrite{StripPrefix: "/api"}, "/other/api", unchanged},
		{"strip miss with add", Rewrite{StripPrefix: "/api", AddPrefix: "/v1"}, "/apix", "/v1/apix"},
		{"query untouched", Rewrite{StripPrefix: "/api"}, "/api/users?id=7", "/users"},
		{"add", Rewrite{AddPrefix: "/v1"}, "/users", "/v1/users"},
		{"add with trailing slash", Rewrite{AddPrefix: "/v1/"}, "/users", "/v1/users"},
		{"add root", Rewrite{AddPrefix: "/"}, "/users", "/users"},
		{"strip and add", Rewrite{StripPrefix: "/api", AddPrefix: "/internal"}, "/api/users", "/internal/users"},
		{"strip all and add", Rewrite{StripPrefix: "/api", AddPrefix: "/internal"}, "/api", "/internal"},
		{"strip slash-ended and add", Rewrite{StripPrefix: "/api/", AddPrefix: "/internal"}, "/api/users", "/internal/users"},
		{"strip slash-ended and add slash-ended", Rewrite{StripPrefix: "/api/", AddPrefix: "/internal/"}, "/api/users", "/internal/users"},
		{"regex groups", Rewrite{Regex: `^/old/(\w+)/(\d+)$`, Replacement: "/new/$2/$1"}, "/old/item/42", "/new/42/item"},
		{"regex every match", Rewrite{Regex: `//+`, Replacement: "/"}, "/a//b///c", "/a/b/c"},
		{"regex miss", Rewrite{Regex: `^/nomatch`, Replacement: "/x"}, "/keep", "/keep"},
		{"regex to empty", Rewrite{Regex: `.*`, Replacement: ""}, "/gone", "/"},
		{"regex without leading slash", Rewrite{Regex: `^/`, Replacement: ""}, "/a/b", "/a/b"},
		{"all three", Rewrite{StripPrefix: "/api", Regex: `^/v(\d)/`, Replacement: "/version$1/", AddPrefix: "/svc"}, "/api/v2/users", "/svc/version2/users"},
		{"docs example", Rewrite{StripPrefix: "/api/", Regex: `^/v1/(.*)$`, Replacement: "/$1", AddPrefix: "/internal"}, "/API/v1/users", "/internal/users"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRewrite(t, &tc.cfg)
			req, raw := request(t, "GET "+tc.uri+" HTTP/1.1", "Host: a")
			x := exchange(req, "192.0.2.1")
			f.Request(x)
			scribble(raw)
			got := unchanged
			if x.Path != nil {
				got = string(x.Path)
			}
			if got != tc.want {
				t.Errorf("path %q -> %q, want %q", tc.uri, got, tc.want)
			}
		})
	}
}

// TestRewriteStartsFromEarlierPath checks that a path set by an earlier
// filter is the input, and that the result survives the request buffer.
func TestRewriteStartsFromEarlierPath(t *testing.T) {
	f := newRewrite(t, &Rewrite{StripPrefix: "/a", AddPrefix: "/z"})
	req, raw := request(t, "GET /original HTTP/1.1", "Host: a")
	x := exchange(req, "192.0.2.1")
	x.Path = []byte("/a/b")
	f.Request(x)
	scribble(raw)
	if string(x.Path) != "/z/b" {
		t.Errorf("Path = %q, want /z/b", x.Path)
	}
}

func TestRewriteRefused(t *testing.T) {
	if _, err := NewRewrite(500, nil); err == nil {
		t.Error("no configuration: accepted")
	}
	if _, err := NewRewrite(500, &Rewrite{StripPrefix: "/a"}); err == nil {
		t.Error("a config Validate never saw: accepted")
	}
	for name, cfg := range map[string]*Rewrite{
		"bad regex":           {Regex: `(`},
		"replacement only":    {Replacement: "/x"},
		"space in add_prefix": {AddPrefix: "/a b"},
		"query in add_prefix": {AddPrefix: "/a?b=1"},
		"fragment in strip":   {StripPrefix: "/a#"},
		"CRLF in replacement": {Regex: "a", Replacement: "/\r\nX: y"},
		"control in strip":    {StripPrefix: "/\x01"},
		"relative strip":      {StripPrefix: "api"},
		"bad escape in strip": {StripPrefix: "/a%zz"},
	} {
		if p := filterstest.Check(&RewriteRoute{Rewrite: cfg}, nil, &filters.RouteInfo{}); len(p) == 0 {
			t.Errorf("%s: accepted", name)
		}
	}
}
