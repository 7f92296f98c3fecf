// Metrics: the per-loop counters the data plane writes, the registry that
// keeps them by stable name, and the Prometheus text the admin port serves.

package engine

import (
	"bytes"
	"io"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/VictoriaMetrics/metrics"
	"github.com/loopgate/loopgate/engine/loopstat"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/upstream"
)

// How metrics stay off the loops' backs:
//
//   - Every metric object is made off the loops, when a snapshot is compiled
//     (routes, filters, upstream nodes) or when the server is built (loops),
//     and is kept in the registry by a stable name (route id, route and
//     filter name, upstream name and node address), so a recompiled snapshot
//     finds the same counters.
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

// registry holds every metric object by stable name. Compiling adds to it;
// nothing is removed, so a route that a reload drops and a later one brings
// back keeps its counters. Loops never touch mu: they reach their shards
// through the compiled snapshot and the loop's pools.
type registry struct {
	loops int

	// quiet is metrics.per_request off: routes skip their per-request
	// series (record returns at once). Read by loops, set off-loop.
	quiet atomic.Bool

	mu       sync.Mutex
	routes   []*routeMetrics // in creation order, which is config order
	routeIx  map[string]*routeMetrics
	nodes    []*upstream.Node
	nodeIx   map[nodeKey]*upstream.Node
	filters  []*filterMetrics
	filterIx map[filterKey]*filterMetrics
	unrouted *routeMetrics
}

type nodeKey struct{ upstream, addr string }

type filterKey struct{ route, filter string }

func newRegistry(loops int) *registry {
	r := &registry{loops: loops, routeIx: map[string]*routeMetrics{}, nodeIx: map[nodeKey]*upstream.Node{},
		filterIx: map[filterKey]*filterMetrics{}}
	r.unrouted = r.route(unroutedID)
	return r
}

// route returns the metrics of the route with id, making them the first
// time. Off-loop only.
func (r *registry) route(id string) *routeMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.routeIx[id]; m != nil {
		return m
	}
	m := &routeMetrics{id: id, shards: make([]routeShard, r.loops), quiet: &r.quiet}
	r.routeIx[id] = m
	r.routes = append(r.routes, m)
	return m
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

// filter returns the timing stats of one filter on one route, making them
// the first time: the chain records into them (filters.NewChainStats).
// Off-loop only.
func (r *registry) filter(route, filter string) *filters.Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := filterKey{route, filter}
	if m := r.filterIx[k]; m != nil {
		return m.stats
	}
	m := &filterMetrics{route: route, filter: filter, stats: filters.NewStats(r.loops)}
	r.filterIx[k] = m
	r.filters = append(r.filters, m)
	return m.stats
}

// routeMetrics are one route's series.
type routeMetrics struct {
	id     string
	shards []routeShard // by loop index
	quiet  *atomic.Bool // the registry's metrics.per_request switch, inverted
}

// routeShard is what one loop records for one route. Owned by that loop
// for writing; read by the metrics writer.
type routeShard struct {
	_        cacheLine
	classes  [5]atomic.Uint64 // finished exchanges by status class, 1xx to 5xx
	inFlight atomic.Int64     // routed and not yet finished
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
	sh := &m.shards[loop]
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

// filterMetrics name a filter's stats for the writer.
type filterMetrics struct {
	route, filter string
	stats         *filters.Stats
}

// loopStats are one loop's series. Written by the loop, read by the
// metrics writer.
type loopStats struct {
	_        cacheLine
	conns    atomic.Int64  // open client connections
	requests atomic.Uint64 // exchanges started
	_        cacheLine
}

// WriteMetrics writes every Loopgate series, then the Go runtime and process
// series (GC pauses among them), in the Prometheus text format. Safe for
// concurrent use; it never waits for a loop.
func (s *Server) WriteMetrics(w io.Writer) {
	s.metricSet.WritePrometheus(w)
	metrics.WriteProcessMetrics(w)
	metrics.WriteFDMetrics(w)
}

// writeSeries is the metrics.Set writer for Loopgate's own series. It
// builds the text in memory first, so a slow scraper holds nothing.
func (s *Server) writeSeries(w io.Writer) {
	reg := s.metrics
	reg.mu.Lock()
	routes := append([]*routeMetrics(nil), reg.routes...)
	nodes := append([]*upstream.Node(nil), reg.nodes...)
	fms := append([]*filterMetrics(nil), reg.filters...)
	reg.mu.Unlock()

	var b bytes.Buffer
	p := promWriter{b: &b}

	// Process-wide.
	p.family("loopgate_connections_refused_total", "counter", "Client connections closed at accept because max_connections were open.")
	p.sample("loopgate_connections_refused_total", "", s.refused.Load())
	p.family("loopgate_buffered_bytes", "gauge", "Bytes client connections hold in memory, as max_buffered_bytes counts them.")
	p.gauge("loopgate_buffered_bytes", "", s.buffered.Load())
	p.family("loopgate_memory_returns_total", "counter", "Times memory was handed back to the OS after a burst of buffered bytes.")
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

	// Per route.
	type routeSum struct {
		classes  [5]uint64
		inFlight int64
		latency  loopstat.Sum
		codes    map[uint32]uint64
		other    uint64
	}
	sums := make([]routeSum, len(routes))
	for i, m := range routes {
		rs := &sums[i]
		rs.codes = map[uint32]uint64{}
		for j := range m.shards {
			sh := &m.shards[j]
			for c := range sh.classes {
				rs.classes[c] += sh.classes[c].Load()
			}
			rs.inFlight += sh.inFlight.Load()
			rs.latency.Add(&sh.latency)
			for k := range sh.rejected.codes {
				if code := sh.rejected.codes[k].Load(); code != 0 {
					rs.codes[code] += sh.rejected.counts[k].Load()
				}
			}
			rs.other += sh.rejected.other.Load()
		}
	}
	p.family("loopgate_route_requests_total", "counter", "Finished requests by route and status class (499: the client left before a response).")
	for i, m := range routes {
		for c, n := range sums[i].classes {
			if c == 0 && n == 0 {
				continue // final 1xx statuses do not happen; no empty series for them
			}
			p.sample("loopgate_route_requests_total", p.labels("route", m.id, "code", classNames[c]), n)
		}
	}
	p.family("loopgate_route_request_duration_seconds", "histogram", "Time from a request's first byte to the end of its exchange.")
	for i, m := range routes {
		p.histogram("loopgate_route_request_duration_seconds", p.labels("route", m.id), &sums[i].latency)
	}
	p.family("loopgate_route_requests_in_flight", "gauge", "Routed requests not finished yet.")
	for i, m := range routes {
		if m.id == unroutedID {
			continue // never in flight: answered at once
		}
		p.gauge("loopgate_route_requests_in_flight", p.labels("route", m.id), sums[i].inFlight)
	}
	p.family("loopgate_route_rejections_total", "counter", "Answers the gateway made itself, by route and JSON error code.")
	for i, m := range routes {
		for _, code := range sortedCodes(sums[i].codes) {
			p.sample("loopgate_route_rejections_total", p.labels("route", m.id, "code", strconv.Itoa(int(code))), sums[i].codes[code])
		}
		if sums[i].other > 0 {
			p.sample("loopgate_route_rejections_total", p.labels("route", m.id, "code", "other"), sums[i].other)
		}
	}

	// Per upstream node.
	type nodeSum struct {
		connects, failures, resets, timeouts, exhausted, bad uint64
		reuses                                               uint64
		closes                                               [len(upstream.ConnStats{}.Closes)]uint64
		idle, active                                         int64
		responses                                            [5]uint64
		firstByte, duration                                  loopstat.Sum
	}
	ns := make([]nodeSum, len(nodes))
	for i, m := range nodes {
		n := &ns[i]
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
			n.idle += st.Idle.Load()
			n.active += st.Active.Load()
			n.firstByte.Add(&st.FirstByte)
			n.duration.Add(&st.Duration)
			for c := range st.Responses {
				n.responses[c] += st.Responses[c].Load()
			}
		}
	}
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
		for r, name := range upstream.CloseReasons() {
			p.sample("loopgate_upstream_connection_closes_total", p.labels("upstream", m.Upstream, "node", m.Addr, "reason", name), ns[i].closes[r])
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
		for c, n := range ns[i].responses {
			if c == 0 && n == 0 {
				continue // final 1xx statuses do not happen
			}
			p.sample("loopgate_upstream_responses_total", p.labels("upstream", m.Upstream, "node", m.Addr, "code", classNames[c]), n)
		}
	}
	p.family("loopgate_upstream_call_duration_seconds", "histogram", "Time from a call's start to its end (last response byte, or failure), for calls the node or a deadline ended.")
	for i, m := range nodes {
		p.histogram("loopgate_upstream_call_duration_seconds", p.labels("upstream", m.Upstream, "node", m.Addr), &ns[i].duration)
	}

	// Per filter.
	self := make([]loopstat.Sum, len(fms))
	total := make([]loopstat.Sum, len(fms))
	for i, m := range fms {
		m.stats.Histograms(&self[i], &total[i])
	}
	p.family("loopgate_filter_self_seconds", "histogram", "A filter's own work in its request and response phases, per exchange.")
	for i, m := range fms {
		p.histogram("loopgate_filter_self_seconds", p.labels("route", m.route, "filter", m.filter), &self[i])
	}
	p.family("loopgate_filter_total_seconds", "histogram", "From a filter's request phase start to its response phase end: its own work and everything after it, the upstream included.")
	for i, m := range fms {
		p.histogram("loopgate_filter_total_seconds", p.labels("route", m.route, "filter", m.filter), &total[i])
	}

	_, _ = w.Write(b.Bytes())
}

var classNames = [5]string{"1xx", "2xx", "3xx", "4xx", "5xx"}

func sortedCodes(m map[uint32]uint64) []uint32 {
	out := make([]uint32, 0, len(m))
	for c := range m {
		out = append(out, c)
	}
	for i := 1; i < len(out); i++ { // a handful of codes: insertion sort
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// leLabels are the histogram bucket bounds in seconds, as le labels.
var leLabels = func() [loopstat.Buckets]string {
	var out [loopstat.Buckets]string
	for i, ns := range loopstat.Bounds {
		out[i] = strconv.FormatFloat(float64(ns)/1e9, 'f', -1, 64)
	}
	out[len(loopstat.Bounds)] = "+Inf"
	return out
}()

// promWriter appends Prometheus text exposition lines.
type promWriter struct {
	b *bytes.Buffer
}

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
	var b []byte
	b = append(b, '{')
	for i := 0; i+1 < len(kv); i += 2 {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, kv[i]...)
		b = append(b, `="`...)
		for j := 0; j < len(kv[i+1]); j++ {
			switch c := kv[i+1][j]; c {
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
		b = append(b, '"')
	}
	return string(append(b, '}'))
}

// sample writes one integer sample; counters and gauges are all integers.
func (p promWriter) sample(name, labels string, v uint64) {
	p.b.WriteString(name)
	p.b.WriteString(labels)
	p.b.WriteByte(' ')
	p.b.WriteString(strconv.FormatUint(v, 10))
	p.b.WriteByte('\n')
}

// gauge writes a gauge that can only be negative while a reader races the
// loops' updates; it shows 0 then.
func (p promWriter) gauge(name, labels string, v int64) { p.sample(name, labels, uint64(max(v, 0))) }

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
		p.b.WriteString(strconv.FormatUint(cum, 10))
		p.b.WriteByte('\n')
	}
	p.b.WriteString(name)
	p.b.WriteString("_sum")
	p.b.WriteString(labels)
	p.b.WriteByte(' ')
	p.b.WriteString(strconv.FormatFloat(float64(h.SumNs)/1e9, 'g', -1, 64))
	p.b.WriteByte('\n')
	p.sample(name+"_count", labels, cum)
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
