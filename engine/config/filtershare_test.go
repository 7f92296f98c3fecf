// The filter route configs, isolation and breaker settings a route does
// not set are shared by the routes of one parse, and only of one parse.

package config

import (
	"reflect"
	"testing"

	"github.com/loopgate/loopgate/filters"
)

func TestDefaultFilterConfigsShared(t *testing.T) {
	const doc = `listen: 127.0.0.1:0
upstreams:
  - {name: backend, nodes: ["127.0.0.1:9"]}
routes:
  - {id: a, path: /a, upstream: backend}
  - {id: b, path: /b, upstream: backend}
  - {id: c, path: /c, upstream: backend, limits: {max_body_bytes: 1024}, isolation: {limit: 50}, circuit_breaker: {enabled: true}}
`
	cfg, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := cfg.Routes[0], cfg.Routes[1], cfg.Routes[2]
	if !sameMap(a.filterConfigs, b.filterConfigs) {
		t.Error("two routes setting no filter option have their own config maps")
	}
	if sameMap(a.filterConfigs, c.filterConfigs) {
		t.Fatal("a route setting limits shares the default config map")
	}
	shared, own := 0, 0
	for _, reg := range filters.Registered() {
		if reg.Route == nil {
			continue
		}
		if reflect.ValueOf(a.FilterConfig(reg.Name)).UnsafePointer() == reflect.ValueOf(c.FilterConfig(reg.Name)).UnsafePointer() {
			shared++
		} else {
			own++
		}
	}
	if own != 1 || shared == 0 {
		t.Errorf("route c has %d configs of its own and shares %d; want 1 of its own (limits) and the rest shared", own, shared)
	}
	if c.Limits == nil || c.Limits.MaxBodyBytes != 1024 || a.Limits != nil {
		t.Errorf("limits: a %+v, c %+v; want none and max_body_bytes 1024", a.Limits, c.Limits)
	}
	if a.Isolation != b.Isolation || a.Isolation == c.Isolation || c.Isolation.Limit != 50 || a.Isolation.Limit != 200 {
		t.Errorf("isolation: a %+v, b %+v, c %+v; want a and b sharing the default, c its own limit 50", a.Isolation, b.Isolation, c.Isolation)
	}
	if a.CircuitBreaker != b.CircuitBreaker || c.CircuitBreaker == nil || a.CircuitBreaker == c.CircuitBreaker {
		t.Errorf("circuit_breaker: a %p, b %p, c %p; want a and b sharing the default, c its own", a.CircuitBreaker, b.CircuitBreaker, c.CircuitBreaker)
	}
	// Another parse's route of the same id is not the same route.
	again, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if a.SameRoute(again.Routes[0]) {
		t.Error("a route of another parse is SameRoute: the defaults must be per parse")
	}
	if !a.SameRoute(a) {
		t.Error("a route is not SameRoute with itself")
	}
}
