// The metrics work one proxied request adds on its loop, measured alone:
// the end-to-end proxy benchmarks cannot resolve tens of nanoseconds.

package engine

import (
	"testing"

	"github.com/loopgate/loopgate/pool/loopstat"
)

// BenchmarkMetricsPerRequest does what a keep-alive request through a
// three-filter chain records: the loop's request count, the route's
// in-flight gauge, class, latency and clock readings, the node's first-byte
// histogram and pool gauges, and two histograms per filter.
func BenchmarkMetricsPerRequest(b *testing.B) {
	reg := newRegistry(2)
	rm := reg.route("r")
	node := reg.node("u", "127.0.0.1:1").Stats(1)
	var ls loopStats
	var self, total [3]loopstat.Histogram
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		ls.requests.Add(1)
		start := loopstat.Now()
		rm.begin(1)
		callStart := loopstat.Now()
		node.Reuses.Add(1) // the pool gauges' reuse
		node.FirstByte.Observe(loopstat.Now() - callStart)
		node.Reuses.Add(1) // stands for their park, an add as cheap
		for f := range self {
			self[f].Observe(300)
			total[f].Observe(40_000)
		}
		rm.end(1)
		rm.record(1, 200, 0, start)
	}
}

// BenchmarkRouteObserve is what metrics.per_request costs a loop per
// request: one status class, one latency bucket, maybe one code.
func BenchmarkRouteObserve(b *testing.B) {
	r := newRegistry(1)
	m := r.route("api")
	for i := 0; i < b.N; i++ {
		m.observe(0, 200, 0, 1500e3)
	}
}

// A route no request has reached holds no shards and writes no series; its
// first exchange makes them, once, and later exchanges allocate nothing.
// A route whose first exchange ran on another loop shares its shards.
func TestRouteSeriesMadeByFirstExchange(t *testing.T) {
	reg := newRegistry(2)
	idle, busy := reg.route("idle"), reg.route("busy")
	if idle.series.Load() != nil || idle.touched() || idle.inFlight() != 0 {
		t.Fatal("a route no request reached has its series")
	}
	busy.begin(1)
	made := busy.series.Load()
	if made == nil || !busy.touched() || busy.inFlight() != 1 || made.label != `{route="busy"}` {
		t.Fatalf("after the first exchange: series %v, in flight %d", made, busy.inFlight())
	}
	if n := testing.AllocsPerRun(100, func() {
		busy.begin(0)
		busy.end(0)
		busy.record(0, 200, 0, 0)
	}); n != 0 {
		t.Fatalf("an exchange of a route with series allocates %v times", n)
	}
	busy.end(1)
	if busy.series.Load() != made || busy.inFlight() != 0 || idle.series.Load() != nil {
		t.Fatal("the series were made again, or for another route")
	}
}
