package engine

import (
	"testing"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
)

// The default chain's route-independent filters are one instance for
// the routes that set none of their keys, and a route with its own keys
// has its own; the routes of the same instances run one chain.
func TestRouteIndependentFiltersShared(t *testing.T) {
	cfg, err := config.Parse([]byte(`listen: 127.0.0.1:0
admin: "off"
upstreams:
  - {name: a, nodes: ["127.0.0.1:9"]}
routes:
  - {id: r0, path: /r0, upstream: a}
  - {id: r1, path: /r1, upstream: a}
  - {id: r2, path: /r2, upstream: a, ip_allow: [10.0.0.0/8]}
`))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	routes := srv.state.Load().snap.routes
	byName := func(i int) map[string]filters.Filter {
		m := map[string]filters.Filter{}
		for j := 0; j < routes.at(i).chain.Len(); j++ {
			f := routes.at(i).chain.Filter(j)
			m[f.Name()] = f
		}
		return m
	}
	r0, r1, r2 := byName(0), byName(1), byName(2)
	for _, name := range []string{"ip_access", "forwarded", "request_id"} {
		if r0[name] == nil || r0[name] != r1[name] {
			t.Errorf("%s: routes setting none of its keys have their own filters", name)
		}
	}
	if r2["ip_access"] == r0["ip_access"] {
		t.Error("ip_access: a route with its own ip_allow shares the default filter")
	}
	if r2["forwarded"] != r0["forwarded"] {
		t.Error("forwarded: the route with ip_allow has its own forwarded filter")
	}
	// The routes of the same filters run one chain; the stats stay the
	// route's own, and are made by its first request.
	if routes.at(0).chain != routes.at(1).chain || routes.at(2).chain == routes.at(0).chain {
		t.Error("routes of the same filters run chains of their own, or one of its own filters the shared one")
	}
	if &routes.at(0).metrics.filters == &routes.at(1).metrics.filters {
		t.Error("two routes share their filter stats")
	}
	for i := range routes.len() {
		if routes.at(i).metrics.filters.Has(nil) {
			t.Errorf("route %s holds filter stats before any request", routes.at(i).id)
		}
		if routes.at(i).isolationCfg == nil || routes.at(i).metrics.isolation.Load() != nil {
			t.Errorf("route %s has no isolation, or its limiter before any request", routes.at(i).id)
		}
	}
}
