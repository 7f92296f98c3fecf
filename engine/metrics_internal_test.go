// The metrics work one proxied request adds on its loop, measured alone:
// the end-to-end proxy benchmarks cannot resolve tens of nanoseconds.

package engine

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/loopgate/loopgate/filters"
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

// registeredRoutes is routes r<from> to r<to-1>, each with its series
// in reg.
func registeredRoutes(reg *registry, from, to int) []route {
	c := make([]route, 0, to-from)
	for i := from; i < to; i++ {
		id := fmt.Sprint("r", i)
		c = append(c, route{id: id, metrics: reg.route(id)})
	}
	return c
}

// retire walks only the chunks a version does not share with the last
// one: the routes of a shared chunk keep the version they were last
// marked in. A route the new chunks lack retires, and so does one a
// compile made that never applied; the others stay live.
func TestRetireWalksOnlyChangedChunks(t *testing.T) {
	reg := newRegistry(2)
	chunk := func(from, to int) []route { return registeredRoutes(reg, from, to) }
	head, tail := chunk(0, routeChunk), chunk(routeChunk, routeChunk+50)
	a := &snapshot{}
	a.routes.add(head)
	a.routes.add(tail)
	reg.applied(2, a, nil)
	ghost := reg.route("ghost") // a compile's, never applied
	b := &snapshot{}
	b.routes.add(head)                             // shared
	b.routes.add(chunk(routeChunk, routeChunk+49)) // r305 deleted
	reg.applied(3, b, a)
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
	chunk := func(from, to int) []route { return registeredRoutes(reg, from, to) }
	head, tail := chunk(0, routeChunk), chunk(routeChunk, routeChunk+1)
	a := &snapshot{}
	a.routes.add(head)
	a.routes.add(tail)
	reg.applied(2, a, nil)
	b := &snapshot{}
	b.routes.add(head) // r256 deleted: one chunk fewer
	reg.applied(3, b, a)
	if gone := tail[0].metrics; gone.retired != 3 {
		t.Errorf("the deleted route: retired %d, want 3", gone.retired)
	}
	for i := range b.routes.len() {
		if m := b.routes.at(i).metrics; m.live != 2 || m.retired != 0 {
			t.Fatalf("%s: live %d, retired %d; want live 2", m.id, m.live, m.retired)
		}
	}
}

// passFilter lets every request through: a chain of them only records.
type passFilter struct{ filters.Base }

func (passFilter) Request(*filters.Exchange) filters.Verdict { return filters.Continue }

// passChain is a shared chain of pass filters named names, on two loops.
func passChain(t *testing.T, names ...string) *filters.Chain {
	t.Helper()
	fs := make([]filters.Filter, len(names))
	for i, n := range names {
		fs[i] = passFilter{filters.Base{FilterName: n, FilterOrder: i + 1}}
	}
	c, err := filters.NewSharedChain(fs, 2)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// prunedSnapshot is a snapshot of one chunk of routes r0, r1... (the
// registry's) on chains; a nil chain is a route with no filter.
func prunedSnapshot(reg *registry, chains ...*filters.Chain) *snapshot {
	c := make([]route, len(chains))
	for i, ch := range chains {
		id := fmt.Sprint("r", i)
		c[i] = route{id: id, metrics: reg.route(id), chain: ch}
	}
	s := &snapshot{flights: make([]flightCount, reg.loops)}
	s.routes.add(c)
	return s
}

// flight is one routed exchange of snapshot s on route i, on loop, as an
// exchange counts itself from routing on (routeRequest, record).
type flight struct {
	s     *snapshot
	rt    *route
	loop  int
	shard *routeShard
}

func startFlight(s *snapshot, i, loop int) *flight {
	rt := s.routes.at(i)
	s.flights[loop].add(1)
	return &flight{s, rt, loop, rt.metrics.begin(loop)}
}

// record runs the exchange's chain, recording into its route's stats.
func (f *flight) record() {
	var x filters.Exchange
	x.Reset(nil, nil, netip.Addr{}, f.loop, nil)
	x.SetStats(&f.rt.metrics.filters)
	f.rt.chain.RunRequest(&x)
	x.Status = 200
	f.rt.chain.RunResponse(&x)
}

func (f *flight) end() {
	f.shard.end()
	f.s.flights[f.loop].add(-1)
}

// adopt has both loops run version v.
func adopt(reg *registry, v uint64) {
	for i := range reg.adopted {
		reg.adopted[i].Store(v)
	}
}

// hasFilter reports whether m holds stats of filter.
func hasFilter(m *routeMetrics, filter string) bool {
	has := false
	m.filters.Each(func(name string, _ *filters.Stats) { has = has || name == filter })
	return has
}

// An exchange of the version before a write that dropped a filter from a
// route's chain records that filter after the write was retired, making
// its stats anew on a route that had none: the route stays listed, also
// across a later write to its chunk that keeps its chain, and the stats
// go at the first sweep once that exchange has ended, with no write
// since.
func TestPruneOfStatsAnOlderExchangeMakes(t *testing.T) {
	reg := newRegistry(2)
	ab, a := passChain(t, "a", "b"), passChain(t, "a")
	m := reg.route("r0")
	trimmed := func(when string) {
		t.Helper()
		if hasFilter(m, "b") || !hasFilter(m, "a") {
			t.Fatalf("%s: b kept %v, a kept %v; want b gone, a kept", when, hasFilter(m, "b"), hasFilter(m, "a"))
		}
	}
	v1 := prunedSnapshot(reg, ab, nil)
	adopt(reg, 1)
	old := startFlight(v1, 0, 0)
	v2 := prunedSnapshot(reg, a, nil) // r0 runs a only; it has no stats yet
	reg.applied(2, v2, v1)
	adopt(reg, 2)
	old.record() // makes a and b
	if reg.sweep(); !hasFilter(m, "b") {
		t.Fatal("the stats of b went while an exchange that runs b was in flight")
	}
	old.end()
	reg.sweep()
	trimmed("after the exchange of version 1 ended")

	// b again, and dropped again, then a write to r0's chunk that keeps
	// its chain, all while an exchange that runs b is in flight.
	v3 := prunedSnapshot(reg, ab, nil)
	reg.applied(3, v3, v2)
	adopt(reg, 3)
	old = startFlight(v3, 0, 1)
	v4 := prunedSnapshot(reg, a, nil)
	reg.applied(4, v4, v3)
	v5 := prunedSnapshot(reg, a, ab) // r1 changes
	v5.routes.chunks[0][0] = v4.routes.chunks[0][0]
	reg.applied(5, v5, v4)
	adopt(reg, 5)
	old.record()
	old.end()
	reg.sweep()
	trimmed("after a write to its chunk kept its chain")
	if reg.prune != nil {
		t.Errorf("%d routes still listed for a trim", len(reg.prune))
	}
}

// A route that is never idle (an exchange of the version that dropped a
// filter is always in flight on it) loses the filter's stats once every
// loop runs that version and the exchanges of older versions have ended,
// not before.
func TestPruneOnARouteNeverIdle(t *testing.T) {
	reg := newRegistry(2)
	ab, a := passChain(t, "a", "b"), passChain(t, "a")
	v1 := prunedSnapshot(reg, ab)
	adopt(reg, 1)
	before := startFlight(v1, 0, 1) // makes the stats of a and b before the write
	before.record()
	before.end()
	old := startFlight(v1, 0, 0)
	v2 := prunedSnapshot(reg, a)
	reg.applied(2, v2, v1)
	reg.adopted[0].Store(2) // loop 1 still runs version 1 and may route on it
	busy := startFlight(v2, 0, 0)
	old.record()
	old.end()
	m := v2.routes.at(0).metrics
	if reg.sweep(); !hasFilter(m, "b") {
		t.Fatal("the stats of b went before every loop ran version 2")
	}
	adopt(reg, 2)
	reg.sweep()
	if m.inFlight() != 1 {
		t.Fatalf("route in flight %d, want 1: the route must be busy for the test", m.inFlight())
	}
	if hasFilter(m, "b") || !hasFilter(m, "a") {
		t.Fatalf("on a busy route: b kept %v, a kept %v; want b gone, a kept", hasFilter(m, "b"), hasFilter(m, "a"))
	}
	busy.record()
	busy.end()
	if len(reg.versions) != 1 || reg.versions[0].version != 2 {
		t.Errorf("versions kept: %v, want version 2's alone", reg.versions)
	}
}
