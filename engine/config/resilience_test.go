// A route's breaker and isolation sections over the global ones.

package config

import (
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/policy"
)

// A route's own section sets its fields over the global section, the rest
// come from the global one or the defaults; a route with no section takes
// the global one; the global section itself is left as written.
func TestRouteSectionsOverGlobal(t *testing.T) {
	c := mustParse(t, `
circuit_breaker: {window: 20, open_for: 10s}
isolation: {limit: 100, step: 10}
upstreams:
  - {name: u, nodes: ["127.0.0.1:1"]}
routes:
  - {id: own, prefix: /a, upstream: u, circuit_breaker: {min_calls: 2, enabled: false}, isolation: {limit: 40, slow_ratio: 60}}
  - {id: global, prefix: /, upstream: u}
`)
	own, global := c.Routes[0], c.Routes[1]
	b := own.CircuitBreaker
	if b.Window != 20 || b.OpenFor != Duration(10*time.Second) || b.MinCalls != 2 || b.On() ||
		b.FailureRate != policy.DefaultBreakerFailRate || len(b.FailureStatuses) != 100 {
		t.Errorf("route's own breaker: %+v", *b)
	}
	if g := global.CircuitBreaker; g.Window != 20 || g.MinCalls != policy.DefaultBreakerMinCalls || !g.On() {
		t.Errorf("route without a breaker section: %+v", *g)
	}
	if c.CircuitBreaker.MinCalls != 0 || c.CircuitBreaker.Enabled != nil {
		t.Errorf("the global breaker section changed: %+v", *c.CircuitBreaker)
	}
	s := own.Isolation
	if s.Limit != 40 || s.Step != 10 || s.SlowRatio != 60 || s.Floor != 5 || s.MinSamples != 20 {
		t.Errorf("route's own isolation: %+v", *s)
	}
	if g := global.Isolation; g.Limit != 100 || g.Step != 10 || g.SlowRatio != 30 {
		t.Errorf("route without an isolation section: %+v", *g)
	}
	if c.Isolation.SlowRatio != 0 {
		t.Errorf("the global isolation section changed: %+v", *c.Isolation)
	}

	none := mustParse(t, "upstreams:\n  - {name: u, nodes: [\"127.0.0.1:1\"]}\nroutes:\n  - {prefix: /, upstream: u}\n")
	if r := none.Routes[0]; r.CircuitBreaker != nil {
		t.Errorf("no section anywhere, yet breaker %v", r.CircuitBreaker)
	}
}

// Isolation is on by default, with its pool share: a route with no
// section anywhere has it, and enabled: false turns it off globally or on
// one route, while a route may turn it back on under a global off.
func TestIsolationOnByDefault(t *testing.T) {
	none := mustParse(t, "upstreams:\n  - {name: u, nodes: [\"127.0.0.1:1\"]}\nroutes:\n  - {prefix: /, upstream: u}\n")
	if s := none.Routes[0].Isolation; !s.On() || s.Limit != 200 || s.Floor != 5 || s.MaxPoolShare != 80 || *s.Queue != 1000 {
		t.Errorf("no section anywhere: %+v, want on with the defaults", s)
	}
	c := mustParse(t, `
isolation: {enabled: false}
upstreams:
  - {name: u, nodes: ["127.0.0.1:1"]}
routes:
  - {id: off, prefix: /a, upstream: u}
  - {id: on, prefix: /b, upstream: u, isolation: {enabled: true, max_pool_share: 100}}
`)
	if c.Routes[0].Isolation.On() {
		t.Error("isolation on under a global enabled: false")
	}
	if s := c.Routes[1].Isolation; !s.On() || s.MaxPoolShare != 100 {
		t.Errorf("route turning it back on: %+v", s)
	}
	_, err := Parse([]byte("isolation: {max_pool_share: 101}\nupstreams:\n  - {name: u, nodes: [\"127.0.0.1:1\"]}\nroutes:\n  - {prefix: /, upstream: u}\n"))
	if want := "routes[0].isolation.max_pool_share: 101: want a percentage from 1 to 100"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q in it", err, want)
	}
}

// A retry method or a health-check method that is not an HTTP token is
// named with its path.
func TestBadMethodNames(t *testing.T) {
	_, err := Parse([]byte(`
upstreams:
  - {name: u, nodes: ["127.0.0.1:1"], health_check: {method: "GET /"}}
routes:
  - {prefix: /, upstream: u, retry: {methods: [GET, "PO(ST"]}}
`))
	for _, want := range []string{`upstreams[0].health_check.method: "GET /" is not a method name`, `routes[0].retry.methods[1]: "PO(ST" is not a method name`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want %q in it", err, want)
		}
	}
}

// The isolation queue: 1000 requests and 100ms by default; an explicit
// queue: 0 is kept (waiting off), and a route's 0 overrides a global queue;
// a negative queue is refused.
func TestIsolationQueueSettings(t *testing.T) {
	c := mustParse(t, `
isolation: {queue: 7}
upstreams:
  - {name: u, nodes: ["127.0.0.1:1"]}
routes:
  - {id: off, prefix: /a, upstream: u, isolation: {queue: 0}}
  - {id: global, prefix: /b, upstream: u}
`)
	if q := c.Routes[0].Isolation; *q.Queue != 0 || q.QueueTimeout != Duration(100*time.Millisecond) {
		t.Errorf("route with queue: 0: queue %d, timeout %v", *q.Queue, q.QueueTimeout)
	}
	if q := c.Routes[1].Isolation; *q.Queue != 7 {
		t.Errorf("route under the global queue: %d, want 7", *q.Queue)
	}
	d := mustParse(t, "isolation: {}\nupstreams:\n  - {name: u, nodes: [\"127.0.0.1:1\"]}\nroutes:\n  - {prefix: /, upstream: u}\n")
	if q := d.Routes[0].Isolation; *q.Queue != 1000 || q.QueueTimeout != Duration(100*time.Millisecond) {
		t.Errorf("defaults: queue %d, timeout %v; want 1000, 100ms", *q.Queue, q.QueueTimeout)
	}
	_, err := Parse([]byte("isolation: {queue: -1}\nupstreams:\n  - {name: u, nodes: [\"127.0.0.1:1\"]}\nroutes:\n  - {prefix: /, upstream: u}\n"))
	if want := "routes[0].isolation.queue: must not be negative, got -1"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want %q in it", err, want)
	}
}
