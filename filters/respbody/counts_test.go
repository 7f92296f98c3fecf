package respbody

import (
	"strconv"
	"strings"
	"testing"
)

// Counting allocates only a loop's first count on a route; routes no body
// went through write no series, and the others only their outcomes.
func TestCountsPerRoute(t *testing.T) {
	var c Counts
	for i := range 1000 {
		c.route("r"+strings.Repeat("x", i%7)+string(rune('a'+i%26)), 4)
	}
	hot, cold := c.route(`a"b`, 4), c.route("cold", 4)
	hot.add(1, outRewritten) // loop 1's shard made
	if n := testing.AllocsPerRun(100, func() { hot.add(1, outRewritten) }); n != 0 {
		t.Fatalf("%v allocations a count, want 0", n)
	}
	hot.add(3, outInvalid)
	if c.route(`a"b`, 4) != hot {
		t.Fatal("a route built again (a reload) got new counters")
	}
	var page strings.Builder
	c.WriteMetrics(&page)
	want := "# HELP loopgate_response_body_total Response bodies on routes with response_body, by route and what was done with them.\n" +
		"# TYPE loopgate_response_body_total counter\n" +
		`loopgate_response_body_total{route="a\"b",outcome="rewritten"} 102` + "\n" +
		`loopgate_response_body_total{route="a\"b",outcome="invalid_json"} 1` + "\n"
	if page.String() != want {
		t.Fatalf("page\n%s\nwant\n%s", page.String(), want)
	}
	if cold.total(outRewritten) != 0 || cold.shards[0].Load() != nil {
		t.Fatal("an untouched route has a shard")
	}
}

// Past maxRoutes, a route new to the filter counts under otherRoute.
func TestCountsBounded(t *testing.T) {
	var c Counts
	for i := range maxRoutes {
		c.route(strconv.Itoa(i), 1)
	}
	if r := c.route("one too many", 1); r.route != otherRoute || len(c.routes) != maxRoutes+1 {
		t.Fatalf("route %q, %d routes", r.route, len(c.routes))
	}
	if r := c.route("1", 1); r.route != "1" {
		t.Fatalf("a counted route became %q", r.route)
	}
}
