// Tests for Warnings: no routes, and shadowed routes checked against an
// exhaustive search of the router.

package config

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/engine/router"
)

// withRoutes is a valid config with upstream u and the given routes list.
func withRoutes(routes string) string {
	return "upstreams:\n  - {name: u, nodes: [\"127.0.0.1:9001\"]}\nroutes:\n" + routes
}

func TestWarnings(t *testing.T) {
	cases := []struct {
		name, yaml string
		want       []string
	}{
		{"no routes", "upstreams:\n  - {name: u, nodes: [\"h:1\"]}\n",
			[]string{"config: routes: none, so every request gets 404 (code 40401)"}},
		{"empty config", "", []string{"config: routes: none, so every request gets 404 (code 40401)"}},
		{"methods a subset of an earlier route's, same path after normalisation", withRoutes(`
  - {id: items, path: /Items/, methods: [get, POST], upstream: u}
  - {id: reader, path: /items, methods: [GET], upstream: u}
`), []string{`config: routes[1] (id "reader"): shadowed, no request can reach it: routes[0] (id "items") decides every request it matches`}},
		{"HEAD alone after GET", withRoutes(`
  - {path: /a/*, methods: [GET], upstream: u}
  - {path: /a/*, methods: [HEAD], upstream: u}
`), []string{"config: routes[1]: shadowed, no request can reach it: routes[0] decides every request it matches"}},
		{"same prefix and host, methods a subset", withRoutes(`
  - {prefix: /s/, host: A.test, methods: [GET, PUT], upstream: u}
  - {prefix: /s, host: a.test., methods: [PUT], upstream: u}
`), []string{"config: routes[1]: shadowed, no request can reach it: routes[0] decides every request it matches"}},
		{"prefix under a ** pattern, which is tried first", withRoutes(`
  - {id: api, path: /api/**, upstream: u}
  - {id: v2, prefix: /api/v2/, upstream: u}
`), []string{`config: routes[1] (id "v2"): shadowed, no request can reach it: routes[0] (id "api") decides every request it matches`}},
		{"the ** pattern answers 405 for the prefix's methods", withRoutes(`
  - {id: api, path: /api/**, methods: [GET], upstream: u}
  - {id: writes, prefix: /api/v2/, methods: [POST], upstream: u}
`), []string{`config: routes[1] (id "writes"): shadowed, no request can reach it: routes[0] (id "api") decides every request it matches`}},
		{"a prefix covered by two routes together", withRoutes(`
  - {id: root, path: /, upstream: u}
  - {id: rest, path: /**, upstream: u}
  - {id: all, prefix: /, upstream: u}
`), []string{`config: routes[2] (id "all"): shadowed, no request can reach it: routes[0] (id "root") and routes[1] (id "rest") decide every request it matches`}},

		// Reachable, though they may look shadowed.
		{"method-restricted routes come before any-method ones", withRoutes(`
  - {path: /a, upstream: u}
  - {path: /a, methods: [GET], upstream: u}
`), nil},
		{"a subset in a later route on another host", withRoutes(`
  - {path: /a, methods: [GET, POST], upstream: u}
  - {path: /a, host: b.test, methods: [GET], upstream: u}
`), nil},
		{"a host-restricted ** leaves other hosts to the prefix", withRoutes(`
  - {path: /api/**, host: a.test, upstream: u}
  - {prefix: /api/v2, upstream: u}
`), nil},
		{"the prefix itself is not under **", withRoutes(`
  - {path: /api/**, upstream: u}
  - {prefix: /api, upstream: u}
`), nil},
		{"a literal segment beats *", withRoutes(`
  - {path: /a/*, upstream: u}
  - {path: /a/b, upstream: u}
  - {path: /*/b, upstream: u}
`), nil},
		{"the embedded config", string(embeddedYAML), nil},
	}
	for _, tc := range cases {
		c, err := Parse([]byte(tc.yaml))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := c.Warnings(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got: %q\nwant: %q", tc.name, got, tc.want)
		}
	}
}

// TestShadowedMatchesExhaustiveSearch checks the probe's claim on random
// route tables: a route is reported shadowed exactly when no request in a
// universe that includes every named segment, host and method, plus an
// unnamed one of each and longer paths than any pattern, is routed to it.
func TestShadowedMatchesExhaustiveSearch(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var universe []string
	var grow func(path string, depth int)
	grow = func(path string, depth int) {
		universe = append(universe, path)
		if depth == 5 {
			return
		}
		if path == "/" {
			path = ""
		}
		for _, seg := range []string{"a", "b", "c"} {
			grow(path+"/"+seg, depth+1)
		}
	}
	grow("/", 0)
	hosts := []string{"h1.test", "h2.test"}
	methods := []string{"GET", "HEAD", "POST", "PUT"}

	tables, shadowed := 0, 0
	for range 400 {
		c := &Config{}
		for i := range 1 + rng.IntN(5) {
			r := randomRoute(rng, i)
			c.Routes = append(c.Routes, &r)
		}
		table, err := router.Compile(c.RouterSpecs())
		if err != nil {
			continue // duplicates: Validate's job
		}
		tables++
		reached := make([]bool, len(c.Routes))
		scratch := make([]byte, 0, 64)
		for _, path := range universe {
			for _, h := range hosts {
				for _, m := range methods {
					if r := table.Match([]byte(h), []byte(m), []byte(path), scratch); r.Found {
						reached[r.Index] = true
					}
				}
			}
		}
		got := make([]bool, len(c.Routes))
		for _, s := range c.shadowedRoutes() {
			got[s.route] = true
			shadowed++
		}
		for i := range c.Routes {
			if got[i] == reached[i] {
				t.Errorf("routes[%d] reported shadowed=%v, but the search reached it=%v; routes:\n%s", i, got[i], reached[i], describeRoutes(c))
			}
		}
	}
	t.Logf("%d tables, %d shadowed routes", tables, shadowed)
	if tables < 200 || shadowed < 50 {
		t.Fatalf("the random tables test too little: %d tables, %d shadowed routes", tables, shadowed)
	}
}

// randomRoute draws a route over segments a, b and "*", hosts h1.test or
// any, and a few method sets.
func randomRoute(rng *rand.Rand, i int) Route {
	segs := make([]string, rng.IntN(3))
	for j := range segs {
		segs[j] = []string{"a", "b", "*"}[rng.IntN(3)]
	}
	r := Route{ID: fmt.Sprintf("r%d", i), Upstream: "u"}
	switch rng.IntN(3) {
	case 0:
		r.Path = "/" + strings.Join(segs, "/")
	case 1:
		r.Path = "/" + strings.Join(append(segs, "**"), "/")
	default:
		r.Prefix = "/" + strings.ReplaceAll(strings.Join(segs, "/"), "*", "b")
	}
	if rng.IntN(3) == 0 {
		r.Host = "h1.test"
	}
	r.Methods = [][]string{nil, nil, {"GET"}, {"POST"}, {"GET", "POST"}, {"HEAD"}}[rng.IntN(6)]
	return r
}

func describeRoutes(c *Config) string {
	var b strings.Builder
	for i, r := range c.Routes {
		fmt.Fprintf(&b, "  %d: path %q prefix %q host %q methods %v\n", i, r.Path, r.Prefix, r.Host, r.Methods)
	}
	return b.String()
}
