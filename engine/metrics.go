// Metrics: the per-loop counters the data plane writes, the registry that
// keeps them by stable name, and the Prometheus text the admin port serves.

package engine

import (
	"bufio"
	"io"
	"math"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/loopgate/loopgate/engine/policy"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/upstream"
)

// How metrics stay off the loops' backs:
//
//   - Every metric object is made off the loops, when a snapshot is compiled
//     (routes, filters, upstream nodes) or when the server is built (loops),
//     and is kept in the registry by a stable name (route id, upstream name
//     and node address), so a recompiled snapshot finds the same counters.
//     A route's shards and its filters' stats (filters.StatSet) are the
//     exception: the route's first exchange makes them, once in the
//     process's life, so routes no request reaches cost a small header
//     each and no shards, and no filter stats.
//   - Each object holds one shard per loop. A loop writes only its own shard,
//     with atomic adds and no lock; shards are padded apart so no two loops
//     write one cache line.
//   - The admin goroutine reads the shards with atomic loads and sums them
//     when it writes the Prometheus text. VictoriaMetrics' own Histogram
//     takes a mutex per Update and is not used on a loop.

// unroutedID is the route label of requests that matched no route, or
// were answered before routing (unparseable, over the buffer budget). No
// route id can contain parentheses, so it never names a real route.
const unroutedID = "(unrouted)"

// statusClientClosed is the status recorded for an exchange whose client
// went away before any response was sent: nginx's 499.
const statusClientClosed = 499

// cacheLine pads shards apart.
type cacheLine [64]byte

// registry holds every metric object by stable name. Compiling adds to it
// (a route a reload drops and a later one brings back keeps its counters
// while it is still here); apply marks what the running config no longer
// has as retired, and sweep removes a retired route, with its filters'
// stats, once no loop can record into it any more (see sweep), and the
// stats of filters a kept route no longer runs once no exchange of an
// older version can record into those. Loops never touch mu: they reach
// their shards through the compiled snapshot and the loop's pools.
type registry struct {
	loops int

	// quiet is metrics.per_request off: routes skip their per-request
	// series (record returns at once). Read by loops, set off-loop.
	quiet atomic.Bool

	// adopted holds, by loop index, the config version the loop runs
	// (loop.adopt stores it; 0 = none yet). sweep reads it.
	adopted []atomic.Uint64

	// The reloads, for the loopgate_config_* series.
	reloadsOK, reloadsFailed atomic.Uint64
	lastReload               atomic.Int64 // Unix ns of the last config applied; the first is the one the server was made with

	mu       sync.Mutex
	routes   []*routeMetrics // in creation order, which is config order
	routeIx  map[string]*routeMetrics
	nodes    []*upstream.Node
	nodeIx   map[nodeKey]*upstream.Node
	unrouted *routeMetrics

	// prune are the live routes whose chain changed, each with its chain
	// and the version that changed it (registry.retire): an exchange of
	// an older version may still record (or make anew) the stats of a
	// filter the chain no longer runs, so a route stays listed until
	// sweep has trimmed its stats past every such exchange. At most one
	// entry a route; nil when empty. Guarded by mu.
	prune map[*routeMetrics]filterPrune

	// versions are the applied versions whose routed exchanges may not
	// all have ended, oldest first, with each one's in-flight counts
	// (snapshot.flights): the versions some loop may still take, and the
	// older ones with an exchange in flight, so no more of them than
	// loops lagging plus exchanges running. Guarded by mu.
	versions []versionFlights

	// last is the snapshot retire last ran on; the next retire walks only
	// the chunks the two do not share (see retire). made are the routes
	// route made, or brought back from retired, since: a compile that is
	// never applied leaves them for retire to retire. retiring are the
	// routes retire marked, for sweep. All guarded by mu.
	last     *snapshot
	made     []*routeMetrics
	retiring []*routeMetrics
}

// filterPrune is what sweep trims a listed route's filter stats to:
// chain's filters, once no exchange of a version before at can record.
type filterPrune struct {
	chain *filters.Chain // nil: the route runs no filter any more
	at    uint64
}

// versionFlights are an applied version's in-flight counts, by loop.
type versionFlights struct {
	version uint64
	flights []flightCount
}

// ended reports whether no routed exchange of the version is in flight.
func (f *versionFlights) ended() bool {
	for i := range f.flights {
		if f.flights[i].n.Load() != 0 {
			return false
		}
	}
	return true
}

// flightCount is how many routed exchanges of one version one loop has
// not ended yet. Only that loop writes it, with a load and a store (no
// locked add); sweep reads it. Each loop's count has its own cache line.
type flightCount struct {
	n atomic.Int64
	_ [56]byte
}

// add counts d more exchanges in flight. On the count's loop only.
func (c *flightCount) add(d int64) { c.n.Store(c.n.Load() + d) }

type nodeKey struct{ upstream, addr string }

func newRegistry(loops int) *registry {
	r := &registry{loops: loops, routeIx: map[string]*routeMetrics{}, nodeIx: map[nodeKey]*upstream.Node{},
		adopted: make([]atomic.Uint64, loops)}
	r.unrouted = r.route(unroutedID)
	r.lastReload.Store(time.Now().UnixNano())
	return r
}

// route returns the metrics of the route with id, making them the first
// time; a retired route a config brings back is live again. Off-loop only.
func (r *registry) route(id string) *routeMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.routeLocked(id)
}

// routeLocked is route; r.mu must be held.
func (r *registry) routeLocked(id string) *routeMetrics {
	if m := r.routeIx[id]; m != nil {
		if m.retired != 0 {
			m.retired = 0
			r.made = append(r.made, m)
		}
		return m
	}
	m := &routeMetrics{id: id, loops: r.loops, quiet: &r.quiet}
	r.routeIx[id] = m
	r.routes = append(r.routes, m)
	r.made = append(r.made, m)
	return m
}

// applied records that version v (snap) is the running config, after
// prev: the reload counts, and what v no longer uses is retired, and
// swept if it can be. Off-loop; Server.reloading is held.
func (r *registry) applied(v uint64, snap, prev *snapshot) {
	r.reloadsOK.Add(1)
	r.lastReload.Store(time.Now().UnixNano())
	r.retire(v, snap, prev)
	r.sweep()
}

// retire is called by apply once version v (snap) is the running config,
// after prev: the route series snap does not use are marked retired at
// v, those it uses are live, and any of them a sweep removed while a
// compile still held it is put back. A live route whose chain is not the
// one it had in prev is listed (prune) for sweep to trim its filter stats
// to that chain; one moved to another slot is too, as its chain may have
// changed. It marks rather than builds sets: at 30,000 routes a map of
// the live ones cost most of an API write. r.mu is taken; never on a loop.
//
// It walks only what changed since the snapshot it ran on last: a chunk
// of compiled routes snap shares with that one (in its place, as compile
// keeps them) holds routes that were live then and still are, with the
// same chains. The other chunks of snap are made live; the routes of the
// other chunks of the last one, and those made since (by compiles that
// may never apply), retire unless snap has them. A one-route write at
// 30,000 routes walks one chunk or two, where every route was walked twice.
func (r *registry) retire(v uint64, snap, prev *snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last := r.last
	r.last = snap
	if last == nil && prev != nil { // the version the server started with: its exchanges count too
		r.versions = append(r.versions, versionFlights{v - 1, prev.flights})
	}
	r.versions = append(r.versions, versionFlights{v, snap.flights})
	for k := range snap.routes.chunks {
		if sharedChunk(last, snap, k) {
			continue
		}
		var before []route // prev's chunk k: a route in the same slot with the same chain kept it
		if prev != nil && k < len(prev.routes.chunks) {
			before = prev.routes.chunks[k]
		}
		for i := range snap.routes.chunks[k] {
			rt := &snap.routes.chunks[k][i]
			if rt.empty() {
				continue
			}
			m := rt.metrics
			m.live, m.retired = v, 0
			if r.routeIx[m.id] != m {
				if old := r.routeIx[m.id]; old != nil && old.retired == 0 {
					old.retired = 1 // another compile's copy, never run: the next sweep drops it
					r.retiring = append(r.retiring, old)
				}
				r.routeIx[m.id] = m
				r.routes = append(r.routes, m)
			}
			if i < len(before) && before[i].metrics == m && before[i].chain == rt.chain {
				continue // its listing, if its chain changed before, stands
			}
			// Its chain changed, or the route moved and may have: older
			// exchanges may record filters this chain lacks, even on a
			// route with no filter stats yet.
			if r.prune == nil {
				r.prune = map[*routeMetrics]filterPrune{}
			}
			r.prune[m] = filterPrune{rt.chain, v}
		}
	}
	retireUnlisted := func(m *routeMetrics) {
		if m.live != v && m != r.unrouted && m.retired == 0 {
			m.retired = v
			r.retiring = append(r.retiring, m)
		}
	}
	if last == nil { // the first version: every route there is
		for _, m := range r.routes {
			retireUnlisted(m)
		}
	} else {
		for k := range last.routes.chunks {
			if !sharedChunk(last, snap, k) {
				for i := range last.routes.chunks[k] {
					if rt := &last.routes.chunks[k][i]; !rt.empty() {
						retireUnlisted(rt.metrics)
					}
				}
			}
		}
	}
	for _, m := range r.made {
		retireUnlisted(m)
	}
	clear(r.made)
	r.made = r.made[:0]
}

// sharedChunk reports whether snap's chunk k is last's chunk k; a chunk
// only one of them has is not shared.
func sharedChunk(last, snap *snapshot, k int) bool {
	if last == nil || k >= len(last.routes.chunks) || k >= len(snap.routes.chunks) {
		return false
	}
	a, b := last.routes.chunks[k], snap.routes.chunks[k]
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sweep removes the retired routes (and the stats of filters a live route
// no longer runs) no loop can record into any more. A route retired at
// version v is past reach once every loop runs v or later (a loop takes
// the running version for every new exchange, and no version from v on
// has the route) and none of its exchanges is in flight: exchanges of
// older versions count in the route's in-flight gauge from the moment
// they are routed, before their loop can adopt anything newer.
//
// A listed route's stats of filters its chain since version v lacks are
// recorded only by exchanges of versions before v, so they go once every
// loop runs v or later and those exchanges have ended: either the
// route's in-flight gauge is 0, or every older version's own in-flight
// counts (snapshot.flights, counted from routing on, as the gauge) are,
// so a route that is never idle is trimmed too. Off-loop only.
func (r *registry) sweep() {
	// The loops' versions are read before any in-flight count.
	caughtUp := uint64(math.MaxUint64)
	for i := range r.adopted {
		if v := r.adopted[i].Load(); v != 0 { // 0: not started, so nothing runs there yet
			caughtUp = min(caughtUp, v)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// A tunnel outlives its exchange: its route's series stay while it is
	// open.
	gone := func(retired uint64, m *routeMetrics) bool {
		return retired != 0 && retired <= caughtUp && m.inFlight() == 0 && m.tunnelsOpen() == 0
	}
	// Only the routes retire marked can go: the walk of every route runs
	// when one of them does.
	someGone := false
	retiring := r.retiring[:0]
	for _, m := range r.retiring {
		if m.retired == 0 {
			continue // live again
		}
		retiring = append(retiring, m)
		someGone = someGone || gone(m.retired, m)
	}
	clear(r.retiring[len(retiring):])
	r.retiring = retiring
	if someGone {
		r.sweepRoutes(gone)
	}
	ended := r.endedBefore(caughtUp)
	for m, p := range r.prune {
		if p.at > caughtUp || p.at > ended && m.inFlight() != 0 {
			continue // an exchange of an older version may still record
		}
		if m.filters.Has(p.chain) {
			m.filters.Keep(p.chain)
		}
		delete(r.prune, m)
	}
	if len(r.prune) == 0 {
		r.prune = nil // a map keeps its size: a reload that listed every route would hold it
	}
}

// endedBefore drops the versions before caughtUp (the oldest version a
// loop runs) whose exchanges have all ended, which none can begin again,
// and returns the oldest version whose exchanges may not have, at most
// caughtUp: every exchange of a version before it has ended. r.mu must be
// held.
func (r *registry) endedBefore(caughtUp uint64) uint64 {
	kept := r.versions[:0]
	for _, f := range r.versions {
		if f.version >= caughtUp || !f.ended() {
			kept = append(kept, f)
		}
	}
	clear(r.versions[len(kept):])
	r.versions = kept
	if len(kept) > 0 {
		return min(caughtUp, kept[0].version)
	}
	return caughtUp
}

// sweepRoutes removes the routes gone reports, from the routes, their
// index and the retiring list. r.mu must be held.
func (r *registry) sweepRoutes(gone func(retired uint64, m *routeMetrics) bool) {
	routes := r.routes[:0]
	for _, m := range r.routes {
		if !gone(m.retired, m) {
			routes = append(routes, m)
			continue
		}
		if r.routeIx[m.id] == m {
			delete(r.routeIx, m.id)
		}
	}
	clear(r.routes[len(routes):])
	r.routes = routes
	retiring := r.retiring[:0]
	for _, m := range r.retiring {
		if !gone(m.retired, m) {
			retiring = append(retiring, m)
		}
	}
	clear(r.retiring[len(retiring):])
	r.retiring = retiring
}

// node returns the upstream node addr of upstream up, making it the first
// time. The node outlives reloads that keep it: every loop's pool for it
// shares it, and its stats are the node's metrics. Off-loop only.
func (r *registry) node(up, addr string) *upstream.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := nodeKey{up, addr}
	if n := r.nodeIx[k]; n != nil {
		return n
	}
	n := upstream.NewNode(up, addr, r.loops)
	r.nodeIx[k] = n
	r.nodes = append(r.nodes, n)
	return n
}

// routeMetrics are one route's series. Their shards and label are made
// by the route's first exchange (series), not at compile: a config of
// 30,000 routes most of which see no request would otherwise carry
// 30,000 × loops shards of about 800 bytes each.
type routeMetrics struct {
	id     string
	loops  int
	series atomic.Pointer[routeSeries] // nil until the first exchange
	quiet  *atomic.Bool                // the registry's metrics.per_request switch, inverted

	// filters are the route's filter stats, made by its first exchange
	// that runs a filter; they go with the route (registry.sweep).
	filters filters.StatSet
	tunnels atomic.Pointer[[]tunnelShard] // by loop; nil until the route's first tunnel (tunnelShard)

	// isolation is the route's slow-call limiter, made by its first
	// request that takes a permit (route.limiter): a config of 30,000
	// routes carried one each, about 180 bytes with its index entry.
	isolation atomic.Pointer[policy.Limiter]

	// retired is the config version from which the running config no
	// longer has the route; 0 = it does. live is the last version
	// registry.retire found the route in. Both guarded by the registry's
	// mu.
	retired, live uint64
}

// limiter returns the route's isolation limiter under settings s, making
// it if no request has yet: one allocation per route in the process's
// life. On a loop (the summary and the series read without making one).
func (m *routeMetrics) limiter(s *policy.IsolationSettings) *policy.Limiter {
	if iso := m.isolation.Load(); iso != nil {
		return iso
	}
	return m.makeLimiter(s)
}

// makeLimiter is limiter's first call on the route, out of line so that
// limiter inlines.
func (m *routeMetrics) makeLimiter(s *policy.IsolationSettings) *policy.Limiter {
	made := policy.NewLimiter(m.id, s)
	if m.isolation.CompareAndSwap(nil, made) {
		return made
	}
	return m.isolation.Load() // another loop made it first
}

// limiter is the route's isolation limiter; r.isolationCfg must be set.
func (r *route) limiter() *policy.Limiter { return r.metrics.limiter(r.isolationCfg) }

// isolationState is the route's limiter's state, or its base state when
// no request has made it yet; r.isolationCfg must be set. Any goroutine.
func (r *route) isolationState() policy.LimiterState {
	if iso := r.metrics.isolation.Load(); iso != nil {
		return iso.State(r.isolationCfg)
	}
	return policy.BaseState(r.isolationCfg)
}

// limiters are the isolation limiters of the routes whose series are
// written (touched, not replaced by a later compile's), for their series.
// Off-loop.
func (r *registry) limiters() []*policy.Limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*policy.Limiter
	for _, m := range r.routes {
		if iso := m.isolation.Load(); iso != nil && r.routeIx[m.id] == m && m.touched() {
			out = append(out, iso)
		}
	}
	return out
}

// routeSeries are a route's shards, by loop index, and its label.
type routeSeries struct {
	label  string // {route="id"}, rendered once: a scrape writes it for every series
	shards []routeShard
}

// shard returns loop's shard, making the route's series if no loop has
// yet: one allocation per route in the process's life. On a loop.
func (m *routeMetrics) shard(loop int) *routeShard {
	s := m.series.Load()
	if s == nil {
		made := &routeSeries{label: promWriter{}.labels("route", m.id), shards: make([]routeShard, m.loops)}
		if m.series.CompareAndSwap(nil, made) {
			s = made
		} else {
			s = m.series.Load() // another loop made them first
		}
	}
	return &s.shards[loop]
}

// begin counts an exchange routed to the route on loop, until its
// shard's end, and returns that shard for the exchange to keep.
func (m *routeMetrics) begin(loop int) *routeShard {
	sh := m.shard(loop)
	sh.routed.Add(1)
	return sh
}

// end counts the end of an exchange begin counted on sh.
func (sh *routeShard) end() { sh.ended.Add(1) }

// inFlight is how many routed exchanges have not ended, on every loop.
// Each shard's ended is read before its routed, and a loop adds to routed
// first, so no shard reads negative. Any goroutine.
func (m *routeMetrics) inFlight() int64 {
	if s := m.series.Load(); s != nil {
		return s.inFlight()
	}
	return 0
}

// inFlight is routeMetrics.inFlight of the route's series.
func (s *routeSeries) inFlight() int64 {
	n := int64(0)
	for i := range s.shards {
		sh := &s.shards[i]
		ended := sh.ended.Load()
		n += int64(sh.routed.Load() - ended)
	}
	return n
}

// touched reports whether any exchange was routed to the route or counted
// in it: an untouched route writes no series. Any goroutine.
func (m *routeMetrics) touched() bool {
	s := m.series.Load()
	if s == nil {
		return false
	}
	for i := range s.shards {
		sh := &s.shards[i]
		if sh.routed.Load() != 0 {
			return true
		}
		for c := range sh.classes {
			if sh.classes[c].Load() != 0 {
				return true
			}
		}
	}
	return false
}

// routeShard is what one loop records for one route. Owned by that loop
// for writing; read by the metrics writer.
type routeShard struct {
	_        cacheLine
	classes  [5]atomic.Uint64 // finished exchanges by status class, 1xx to 5xx
	routed   atomic.Uint64    // exchanges routed here (routeMetrics.begin), whether or not per_request records them
	ended    atomic.Uint64    // of those, the ended ones (end); routed - ended are in flight
	latency  loopstat.Histogram
	rejected codeCounts
	_        cacheLine
}

// codeCounts counts gateway-made answers by their JSON error code. Codes
// get a slot the first time the loop sees them, so no list of codes has to
// be kept in step with the filters; past the slots they count as "other".
// Only the owning loop writes; a slot's code is set once, before its count.
type codeCounts struct {
	codes  [16]atomic.Uint32
	counts [16]atomic.Uint64
	other  atomic.Uint64
}

func (c *codeCounts) add(code int) {
	for i := range c.codes {
		switch c.codes[i].Load() {
		case uint32(code):
			c.counts[i].Add(1)
			return
		case 0:
			c.codes[i].Store(uint32(code))
			c.counts[i].Add(1)
			return
		}
	}
	c.other.Add(1)
}

// record counts one finished exchange on loop l's shard: its final status,
// its latency from start (loopstat.Now), and the JSON error code of a
// gateway-made answer (0 for none). With metrics.per_request off it does
// nothing.
func (m *routeMetrics) record(loop int, status, code int, start int64) {
	if !m.quiet.Load() {
		m.count(loop, status, code, loopstat.Now()-start)
	}
}

// observe is record with the latency already measured, in nanoseconds.
func (m *routeMetrics) observe(loop int, status, code int, ns int64) {
	if !m.quiet.Load() {
		m.count(loop, status, code, ns)
	}
}

func (m *routeMetrics) count(loop int, status, code int, ns int64) {
	m.shard(loop).count(status, code, ns)
}

// count is routeMetrics.count on the route's shard of a loop, which an
// exchange keeps from its routing on.
func (sh *routeShard) count(status, code int, ns int64) {
	class := status/100 - 1
	if class < 0 || class > 4 {
		class = 4 // not an HTTP status: cannot happen, but never index out of range
	}
	sh.classes[class].Add(1)
	sh.latency.Observe(ns)
	if code != 0 {
		sh.rejected.add(code)
	}
}

// loopStats are one loop's series. Written by the loop, read by the
// metrics writer.
type loopStats struct {
	_        cacheLine
	conns    atomic.Int64  // open client connections
	requests atomic.Uint64 // exchanges started
	_        cacheLine
}

// metricsChunk is the buffer WriteMetrics writes through: the page goes to
// the client in pieces of this size as it is made, never whole in memory.
const metricsChunk = 32 << 10

// WriteMetrics writes every Loopgate series, then the Go runtime and process
// series (GC pauses among them), in the Prometheus text format, each family
// with its HELP and TYPE. It streams: what it has made goes to w every
// metricsChunk bytes, so the page is never held whole, and a scrape's
// memory does not grow with the number of routes. It first drops the
// series of removed routes that no request can reach any more (see
// registry.sweep). Safe for concurrent use; it never waits for a loop.
func (s *Server) WriteMetrics(w io.Writer) {
	s.metrics.sweep()
	bw := bufio.NewWriterSize(w, metricsChunk)
	s.metricSet.WritePrometheus(bw) // the registered writers: writeSeries, the limits', writeResilienceSeries
	writeRuntimeSeries(bw)
	_ = bw.Flush()
}

// Version is the gateway's version as loopgate_build_info shows it. Set it
// at build time with -ldflags "-X github.com/loopgate/loopgate/engine.Version=1.2.3";
// left empty, it is the main module's version from the build info
// ("(devel)" for a build from a checkout).
var Version string

// buildLabels are loopgate_build_info's labels, rendered once.
var buildLabels = sync.OnceValue(func() string {
	v, goVersion := Version, runtime.Version()
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v == "" {
			v = bi.Main.Version
		}
		goVersion = bi.GoVersion
	}
	if v == "" {
		v = "unknown"
	}
	return promWriter{}.labels("version", v, "goversion", goVersion)
})

// CountFailedReload counts a reload that failed before it reached the
// server: a config file that does not load. Reload and Apply count their
// own outcomes. Safe for concurrent use.
func (s *Server) CountFailedReload() { s.metrics.reloadsFailed.Add(1) }

// writeSeries is the metrics.Set writer for Loopgate's own series. It reads
// one route, node or filter at a time and writes it out, so what it holds
// beyond the registry is a copy of its lists, whatever the page's size.
func (s *Server) writeSeries(w io.Writer) {
	reg := s.metrics
	reg.mu.Lock()
	// A retired route whose id a later compile made anew is not written
	// beside its successor (registry.retire).
	all := make([]*routeMetrics, 0, len(reg.routes))
	for _, m := range reg.routes {
		if reg.routeIx[m.id] == m {
			all = append(all, m)
		}
	}
	nodes := append([]*upstream.Node(nil), reg.nodes...)
	reg.mu.Unlock()

	p := newPromWriter(w)

	// Process-wide.
	p.family("loopgate_build_info", "gauge", "Always 1; the labels name the gateway's version and the Go version that built it.")
	p.sample("loopgate_build_info", buildLabels(), 1)
	p.family("loopgate_config_version", "gauge", "The running config version: 1 for the config the gateway started with, one more per applied reload.")
	p.sample("loopgate_config_version", "", s.Version())
	p.family("loopgate_config_last_reload_success_timestamp_seconds", "gauge", "When the running config was applied (the start, or the last successful reload), in Unix seconds.")
	p.gaugeFloat("loopgate_config_last_reload_success_timestamp_seconds", "", float64(reg.lastReload.Load())/1e9)
	p.family("loopgate_config_reloads_total", "counter", "Reloads by result: success (applied), failure (the file did not load, the config did not compile, or it changes a restart-only setting).")
	p.sample("loopgate_config_reloads_total", `{result="success"}`, reg.reloadsOK.Load())
	p.sample("loopgate_config_reloads_total", `{result="failure"}`, reg.reloadsFailed.Load())
	p.family("loopgate_connections_refused_total", "counter", "Client connections closed at accept because max_connections were open.")
	p.sample("loopgate_connections_refused_total", "", s.refused.Load())
	p.family("loopgate_buffered_bytes", "gauge", "Bytes client connections hold in memory, as max_buffered_bytes counts them.")
	p.gauge("loopgate_buffered_bytes", "", s.buffered.Load())
	p.family("loopgate_memory_returns_total", "counter", "Times memory was handed back to the OS: after a burst of buffered bytes, or after config versions were applied.")
	p.sample("loopgate_memory_returns_total", "", s.memoryReturns.Load())
	p.family("loopgate_stale_resumes_total", "counter", "Ticket resumes dropped, never run: a second resume, or one whose park had ended (timed out, client gone, recycled).")
	p.sample("loopgate_stale_resumes_total", "", s.StaleResumes())
	p.family("loopgate_log_notices_dropped_total", "counter", "Operator log lines (breaker, ejection, health, isolation notices) dropped because the writer was behind.")
	p.sample("loopgate_log_notices_dropped_total", "", notices.dropped.Load())
	s.writeLogSeries(p)

	// Per loop.
	p.family("loopgate_loop_connections", "gauge", "Open client connections on the event loop.")
	for _, l := range s.loops {
		p.gauge("loopgate_loop_connections", p.labels("loop", strconv.Itoa(l.index)), l.stats.conns.Load())
	}
	p.family("loopgate_loop_requests_total", "counter", "Requests the event loop started (parsed heads).")
	for _, l := range s.loops {
		p.sample("loopgate_loop_requests_total", p.labels("loop", strconv.Itoa(l.index)), l.stats.requests.Load())
	}

	// Per route: only routes a request has reached. Each family reads the
	// shards again rather than keeping a sum per route for the next.
	routes := all[:0]
	for _, m := range all {
		if m.touched() { // then its series are made
			routes = append(routes, m)
		}
	}
	p.family("loopgate_route_requests_total", "counter", "Finished requests by route and status class (499: the client left before a response).")
	for _, rm := range routes {
		m := rm.series.Load()
		var classes [5]uint64
		for j := range m.shards {
			for c := range classes {
				classes[c] += m.shards[j].classes[c].Load()
			}
		}
		for c, n := range classes {
			if c == 0 && n == 0 {
				continue // final 1xx statuses do not happen; no empty series for them
			}
			p.sampleWith("loopgate_route_requests_total", m.label, "code", classNames[c], n)
		}
	}
	p.family("loopgate_route_request_duration_seconds", "histogram", "Time from a request's first byte to the end of its exchange.")
	for _, rm := range routes {
		m := rm.series.Load()
		var sum loopstat.Sum
		for j := range m.shards {
			sum.Add(&m.shards[j].latency)
		}
		p.histogram("loopgate_route_request_duration_seconds", m.label, &sum)
	}
	p.family("loopgate_route_requests_in_flight", "gauge", "Routed requests not finished yet.")
	for _, m := range routes {
		if m.id == unroutedID {
			continue // never in flight: answered at once
		}
		p.gauge("loopgate_route_requests_in_flight", m.series.Load().label, m.inFlight())
	}
	p.family("loopgate_route_rejections_total", "counter", "Answers the gateway made itself, by route and JSON error code.")
	var codes codeSum
	var num [10]byte // a code's text; one array for the whole scrape
	for _, rm := range routes {
		m := rm.series.Load()
		codes.reset()
		for j := range m.shards {
			codes.add(&m.shards[j].rejected)
		}
		if codes.empty() {
			continue
		}
		for i := 0; i < codes.n; i++ {
			b := strconv.AppendUint(num[:0], uint64(codes.codes[i]), 10)
			code := unsafe.String(unsafe.SliceData(b), len(b)) // sampleWith copies it before num is written again
			p.sampleWith("loopgate_route_rejections_total", m.label, "code", code, codes.counts[i])
		}
		if codes.other > 0 {
			p.sampleWith("loopgate_route_rejections_total", m.label, "code", "other", codes.other)
		}
	}

	// Per upstream node: only nodes a call or a pool has used.
	type nodeSum struct {
		connects, failures, resets, timeouts, exhausted, bad uint64
		reuses                                               uint64
		closes                                               [len(upstream.ConnStats{}.Closes)]uint64
		idle, active                                         int64
		responses                                            [5]uint64
		firstByte, duration                                  loopstat.Sum
	}
	ns := make([]nodeSum, 0, len(nodes))
	used := nodes[:0]
	for _, m := range nodes {
		var n nodeSum
		for j := 0; j < m.Loops(); j++ {
			st := m.Stats(j)
			n.connects += st.Connects.Load()
			n.failures += st.ConnectFailures.Load()
			n.resets += st.Resets.Load()
			n.timeouts += st.Timeouts.Load()
			n.exhausted += st.PoolExhausted.Load()
			n.bad += st.BadResponses.Load()
			n.reuses += st.Reuses.Load()
			for r := range st.Closes {
				n.closes[r] += st.Closes[r].Load()
			}
			n.idle += st.Idle()
			n.active += st.Active()
			n.firstByte.Add(&st.FirstByte)
			n.duration.Add(&st.Duration)
			for c := range st.Responses {
				n.responses[c] += st.Responses[c].Load()
			}
		}
		if n.connects == 0 && n.exhausted == 0 && n.active == 0 && n.idle == 0 {
			continue // every other count follows a dial or a wait for one
		}
		used = append(used, m)
		ns = append(ns, n)
	}
	nodes = used
	nodeCounter := func(name, help string, v func(*nodeSum) uint64) {
		p.family(name, "counter", help)
		for i, m := range nodes {
			p.sample(name, p.labels("upstream", m.Upstream, "node", m.Addr), v(&ns[i]))
		}
	}
	nodeCounter("loopgate_upstream_connects_total", "Connections dialed to the node, successful or not.", func(n *nodeSum) uint64 { return n.connects })
	nodeCounter("loopgate_upstream_connect_failures_total", "Dials to the node that failed or timed out.", func(n *nodeSum) uint64 { return n.failures })
	nodeCounter("loopgate_upstream_resets_total", "Calls failed because the node closed or reset the connection before a complete response.", func(n *nodeSum) uint64 { return n.resets })
	nodeCounter("loopgate_upstream_timeouts_total", "Calls failed by the response timeout.", func(n *nodeSum) uint64 { return n.timeouts })
	nodeCounter("loopgate_upstream_pool_exhausted_total", "Calls failed waiting for a connection to the node (pool_acquire_timeout, or the wait queue full).", func(n *nodeSum) uint64 { return n.exhausted })
	nodeCounter("loopgate_upstream_bad_responses_total", "Calls failed by a malformed response head, or one over the response head limits.", func(n *nodeSum) uint64 { return n.bad })
	nodeCounter("loopgate_upstream_connection_reuses_total", "Calls that took an idle pooled connection to the node instead of dialing.", func(n *nodeSum) uint64 { return n.reuses })
	p.family("loopgate_upstream_connection_closes_total", "counter", "Established connections to the node closed, by reason (see docs/operations.md).")
	for i, m := range nodes {
		label := p.labels("upstream", m.Upstream, "node", m.Addr)
		for r, name := range upstream.CloseReasons() {
			p.sample("loopgate_upstream_connection_closes_total", p.withLabel(label, "reason", name), ns[i].closes[r])
		}
	}
	nodeGauge := func(name, help string, v func(*nodeSum) int64) {
		p.family(name, "gauge", help)
		for i, m := range nodes {
			p.gauge(name, p.labels("upstream", m.Upstream, "node", m.Addr), v(&ns[i]))
		}
	}
	nodeGauge("loopgate_upstream_pool_idle_connections", "Keep-alive connections to the node waiting in the pools.", func(n *nodeSum) int64 { return n.idle })
	nodeGauge("loopgate_upstream_pool_active_connections", "Connections to the node carrying a call, or being dialed for one.", func(n *nodeSum) int64 { return n.active })
	p.family("loopgate_upstream_first_byte_seconds", "histogram", "Time from a call's start (pool wait and connect included) to the node's first response head.")
	for i, m := range nodes {
		p.histogram("loopgate_upstream_first_byte_seconds", p.labels("upstream", m.Upstream, "node", m.Addr), &ns[i].firstByte)
	}
	p.family("loopgate_upstream_responses_total", "counter", "Final responses from the node, by status class.")
	for i, m := range nodes {
		label := p.labels("upstream", m.Upstream, "node", m.Addr)
		for c, n := range ns[i].responses {
			if c == 0 && n == 0 {
				continue // final 1xx statuses do not happen
			}
			p.sample("loopgate_upstream_responses_total", p.withLabel(label, "code", classNames[c]), n)
		}
	}
	p.family("loopgate_upstream_call_duration_seconds", "histogram", "Time from a call's start to its end (last response byte, or failure), for calls the node or a deadline ended.")
	for i, m := range nodes {
		p.histogram("loopgate_upstream_call_duration_seconds", p.labels("upstream", m.Upstream, "node", m.Addr), &ns[i].duration)
	}

	// Per filter: only filters that have run, of routes a request has
	// reached (the others have no filter stats).
	p.family("loopgate_filter_self_seconds", "histogram", "A filter's own work in its request and response phases, per exchange.")
	writeFilterSeries(p, routes, "loopgate_filter_self_seconds", false)
	p.family("loopgate_filter_total_seconds", "histogram", "From a filter's request phase start to its response phase end: its own work and everything after it, the upstream included.")
	writeFilterSeries(p, routes, "loopgate_filter_total_seconds", true)
}

// writeFilterSeries writes the self (or total) time histogram of every
// filter that has run on each of routes. Each label is rendered into one
// buffer for the whole scrape and written out at once: the filters of
// 30,000 routes are not kept rendered.
func writeFilterSeries(p promWriter, routes []*routeMetrics, name string, total bool) {
	var label []byte
	for _, rm := range routes {
		routeLabel := rm.series.Load().label
		rm.filters.Each(func(filter string, st *filters.Stats) {
			var self, tot loopstat.Sum
			if st.Histograms(&self, &tot); tot.Count() == 0 && self.Count() == 0 {
				return
			}
			label = appendWithLabel(label[:0], routeLabel, "filter", filter)
			h := &self
			if total {
				h = &tot
			}
			p.histogram(name, unsafe.String(unsafe.SliceData(label), len(label)), h) // written before label is reused
		})
	}
}

// codeSum merges a route's codeCounts across loops, in code order. A
// loop has at most 16 codes; together the loops may have more, up to
// maxCodes, and the rest count as other.
type codeSum struct {
	codes  [maxCodes]uint32
	counts [maxCodes]uint64
	n      int
	other  uint64
}

const maxCodes = 64

func (s *codeSum) reset() { s.n, s.other = 0, 0 }

func (s *codeSum) empty() bool { return s.n == 0 && s.other == 0 }

func (s *codeSum) add(c *codeCounts) {
	for k := range c.codes {
		code := c.codes[k].Load()
		if code == 0 {
			break
		}
		s.addCode(code, c.counts[k].Load())
	}
	s.other += c.other.Load()
}

// addCode adds n to code's count, keeping codes sorted.
func (s *codeSum) addCode(code uint32, n uint64) {
	i := 0
	for i < s.n && s.codes[i] < code {
		i++
	}
	if i < s.n && s.codes[i] == code {
		s.counts[i] += n
		return
	}
	if s.n == maxCodes {
		s.other += n
		return
	}
	copy(s.codes[i+1:s.n+1], s.codes[i:s.n])
	copy(s.counts[i+1:s.n+1], s.counts[i:s.n])
	s.codes[i], s.counts[i] = code, n
	s.n++
}

var classNames = [5]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

// leLabels are the histogram bucket bounds in seconds, as le labels.
var leLabels = func() [loopstat.Buckets]string {
	var out [loopstat.Buckets]string
	for i, ns := range loopstat.Bounds {
		out[i] = strconv.FormatFloat(float64(ns)/1e9, 'f', -1, 64)
	}
	out[len(loopstat.Bounds)] = "+Inf"
	return out
}()

// textWriter is what promWriter writes to: a *bufio.Writer (WriteMetrics
// streams through one) or a *bytes.Buffer.
type textWriter interface {
	io.Writer
	io.ByteWriter
	io.StringWriter
	// AvailableBuffer is an empty slice over the writer's free space:
	// numbers are appended to it and written from it, so formatting one
	// allocates nothing (a local array would escape through the interface).
	AvailableBuffer() []byte
}

// promWriter writes Prometheus text exposition lines.
type promWriter struct {
	b textWriter
}

// newPromWriter writes to w, which WriteMetrics made a *bufio.Writer; any
// other writer is written to line by line.
func newPromWriter(w io.Writer) promWriter {
	if tw, ok := w.(textWriter); ok {
		return promWriter{b: tw}
	}
	return promWriter{b: lineWriter{w}}
}

// lineWriter makes an io.Writer a textWriter, one write per call.
type lineWriter struct{ io.Writer }

func (l lineWriter) WriteByte(c byte) error { _, err := l.Write([]byte{c}); return err }

func (l lineWriter) WriteString(s string) (int, error) { return io.WriteString(l.Writer, s) }

func (l lineWriter) AvailableBuffer() []byte { return nil }

func (p promWriter) family(name, typ, help string) {
	p.b.WriteString("# HELP ")
	p.b.WriteString(name)
	p.b.WriteByte(' ')
	p.b.WriteString(help)
	p.b.WriteString("\n# TYPE ")
	p.b.WriteString(name)
	p.b.WriteByte(' ')
	p.b.WriteString(typ)
	p.b.WriteByte('\n')
}

// labels renders name/value pairs as {a="x",b="y"}, values escaped.
func (p promWriter) labels(kv ...string) string {
	b := make([]byte, 0, 64)
	b = append(b, '{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendLabel(b, kv[i], kv[i+1])
	}
	return string(append(b, '}'))
}

// withLabel is the rendered label set labels with name="value" added last.
func (p promWriter) withLabel(labels, name, value string) string {
	b := make([]byte, 0, len(labels)+len(name)+len(value)+8)
	return string(appendWithLabel(b, labels, name, value))
}

func appendWithLabel(b []byte, labels, name, value string) []byte {
	b = append(b, labels[:len(labels)-1]...)
	if len(labels) > 2 {
		b = append(b, ',')
	}
	b = appendLabel(b, name, value)
	return append(b, '}')
}

func appendLabel(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, `="`...)
	for j := 0; j < len(value); j++ {
		switch c := value[j]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// sample writes one integer sample; counters and gauges are all integers.
func (p promWriter) sample(name, labels string, v uint64) {
	p.b.WriteString(name)
	p.b.WriteString(labels)
	p.b.WriteByte(' ')
	p.b.Write(strconv.AppendUint(p.b.AvailableBuffer(), v, 10))
	p.b.WriteByte('\n')
}

// sampleWith is sample with name="value" added to the rendered labels,
// without making a string of them.
func (p promWriter) sampleWith(metric, labels, name, value string, v uint64) {
	p.b.WriteString(metric)
	p.b.Write(appendWithLabel(p.b.AvailableBuffer(), labels, name, value))
	p.b.WriteByte(' ')
	p.b.Write(strconv.AppendUint(p.b.AvailableBuffer(), v, 10))
	p.b.WriteByte('\n')
}

// gauge writes a gauge that can only be negative while a reader races the
// loops' updates; it shows 0 then.
func (p promWriter) gauge(name, labels string, v int64) { p.sample(name, labels, uint64(max(v, 0))) }

// gaugeFloat writes a gauge sample with a fractional value.
func (p promWriter) gaugeFloat(name, labels string, v float64) {
	p.b.WriteString(name)
	p.b.WriteString(labels)
	p.b.WriteByte(' ')
	p.b.Write(strconv.AppendFloat(p.b.AvailableBuffer(), v, 'g', -1, 64))
	p.b.WriteByte('\n')
}

// histogram writes cumulative _bucket lines, then _sum (seconds) and
// _count. labels is a rendered label set ("{...}"); le joins it.
func (p promWriter) histogram(name, labels string, h *loopstat.Sum) {
	inner := labels[1 : len(labels)-1]
	cum := uint64(0)
	for i, c := range h.Counts {
		cum += c
		p.b.WriteString(name)
		p.b.WriteString("_bucket{")
		if inner != "" {
			p.b.WriteString(inner)
			p.b.WriteByte(',')
		}
		p.b.WriteString(`le="`)
		p.b.WriteString(leLabels[i])
		p.b.WriteString(`"} `)
		p.b.Write(strconv.AppendUint(p.b.AvailableBuffer(), cum, 10))
		p.b.WriteByte('\n')
	}
	p.b.WriteString(name)
	p.b.WriteString("_sum")
	p.b.WriteString(labels)
	p.b.WriteByte(' ')
	p.b.Write(strconv.AppendFloat(p.b.AvailableBuffer(), float64(h.SumNs)/1e9, 'g', -1, 64))
	p.b.WriteByte('\n')
	p.b.WriteString(name)
	p.b.WriteString("_count")
	p.b.WriteString(labels)
	p.b.WriteByte(' ')
	p.b.Write(strconv.AppendUint(p.b.AvailableBuffer(), cum, 10))
	p.b.WriteByte('\n')
}

// writeLogSeries writes the access and error logs' own series.
func (s *Server) writeLogSeries(p promWriter) {
	accessDropped, errorDropped := s.logs.Dropped()
	suppressed := uint64(0)
	for _, l := range s.loops {
		suppressed += l.log.limit.Suppressed()
	}
	p.family("loopgate_access_log_lines_total", "counter", "Access log lines written.")
	p.sample("loopgate_access_log_lines_total", "", s.logs.Lines())
	p.family("loopgate_access_log_dropped_total", "counter", "Access log lines dropped because a loop's ring was full (access_log.ring_size).")
	p.sample("loopgate_access_log_dropped_total", "", accessDropped)
	p.family("loopgate_error_log_suppressed_total", "counter", "Error log lines held back by the per-loop rate limit, or dropped with the ring full.")
	p.sample("loopgate_error_log_suppressed_total", "", suppressed+errorDropped)
	p.family("loopgate_log_write_failures_total", "counter", "Writes to the access or error log that failed; their lines are lost.")
	p.sample("loopgate_log_write_failures_total", "", s.logs.WriteFailures())
}
