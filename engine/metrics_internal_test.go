// The metrics work one proxied request adds on its loop, measured alone:
// the end-to-end proxy benchmarks cannot resolve tens of nanoseconds.

package engine

import (
	"fmt"
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
		sh := rm.begin(1)
		callStart := loopstat.Now()
		node.Reuses.Add(1) // the pool gauges' reuse
		node.FirstByte.Observe(loopstat.Now() - callStart)
		node.Reuses.Add(1) // stands for their park, an add as cheap
		for f := range self {
			self[f].Observe(300)
			total[f].Observe(40_000)
		}
		sh.end()
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
	first := busy.begin(1)
	made := busy.series.Load()
	if made == nil || !busy.touched() || busy.inFlight() != 1 || made.label != `{route="busy"}` {
		t.Fatalf("after the first exchange: series %v, in flight %d", made, busy.inFlight())
	}
	if n := testing.AllocsPerRun(100, func() {
		busy.begin(0).end()
		busy.record(0, 200, 0, 0)
	}); n != 0 {
		t.Fatalf("an exchange of a route with series allocates %v times", n)
	}
	first.end()
	if busy.series.Load() != made || busy.inFlight() != 0 || idle.series.Load() != nil {
		t.Fatal("the series were made again, or for another route")
	}
}

// retire walks only the chunks a version does not share with the last
// one: the routes of a shared chunk keep the version they were last
// marked in. A route the new chunks lack retires, and so does one a
// compile made that never applied; the others stay live.
func TestRetireWalksOnlyChangedChunks(t *testing.T) {
	reg := newRegistry(2)
	chunk := func(from, to int) []route {
		c := make([]route, 0, to-from)
		for i := from; i < to; i++ {
			id := fmt.Sprint("r", i)
			c = append(c, route{id: id, metrics: reg.route(id)})
		}
		return c
	}
	head, tail := chunk(0, routeChunk), chunk(routeChunk, routeChunk+50)
	a := &snapshot{}
	a.routes.add(head)
	a.routes.add(tail)
	reg.applied(2, a)
	ghost := reg.route("ghost") // a compile's, never applied
	b := &snapshot{}
	b.routes.add(head)                             // shared
	b.routes.add(chunk(routeChunk, routeChunk+49)) // r305 deleted
	reg.applied(3, b)
	for i := range b.routes.len() {
		m := b.routes.at(i).metrics
		want := uint64(3) // the changed chunk's
		if i < routeChunk {
			want = 2 // the shared chunk's: untouched
		}
		if m.live != want || m.retired != 0 {
			t.Fatalf("%s: live %d, retired %d; want live %d", m.id, m.live, m.retired, want)
		}
	}
	if gone := tail[49].metrics; gone.retired != 3 {
		t.Errorf("the deleted route: retired %d, want 3", gone.retired)
	}
	if ghost.retired != 3 {
		t.Errorf("a route made by a compile never applied: retired %d, want 3", ghost.retired)
	}
	if reg.unrouted.retired != 0 {
		t.Error("the unrouted series retired")
	}
}

// A version with fewer chunks than the last applied one (its last route
// deleted where the count crosses a chunk boundary) retires the routes of
// the chunk it no longer has, and keeps the shared ones live.
func TestRetireAfterTheChunksShrink(t *testing.T) {
	reg := newRegistry(2)
	chunk := func(from, to int) []route {
		c := make([]route, 0, to-from)
		for i := from; i < to; i++ {
			id := fmt.Sprint("r", i)
			c = append(c, route{id: id, metrics: reg.route(id)})
		}
		return c
	}
	head, tail := chunk(0, routeChunk), chunk(routeChunk, routeChunk+1)
	a := &snapshot{}
	a.routes.add(head)
	a.routes.add(tail)
	reg.applied(2, a)
	b := &snapshot{}
	b.routes.add(head) // r256 deleted: one chunk fewer
	reg.applied(3, b)
	if gone := tail[0].metrics; gone.retired != 3 {
		t.Errorf("the deleted route: retired %d, want 3", gone.retired)
	}
	for i := range b.routes.len() {
		if m := b.routes.at(i).metrics; m.live != 2 || m.retired != 0 {
			t.Fatalf("%s: live %d, retired %d; want live 2", m.id, m.live, m.retired)
		}
	}
}
