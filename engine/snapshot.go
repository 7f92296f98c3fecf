// snapshot: one configuration version compiled into the immutable state
// every loop reads, and how an exchange finds its upstream in it.

package engine

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/policy"
	"github.com/loopgate/loopgate/engine/router"
	"github.com/loopgate/loopgate/engine/spool"
	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/upstream"
)

// state is one configuration version: its number, the config as loaded,
// and the snapshot compiled from it. Immutable once stored in
// Server.state; a reload stores a new one.
type state struct {
	version uint64
	cfg     *config.Config
	snap    *snapshot
}

// snapshot is compiled off the loops and never modified afterwards (but
// for upstreamDef.loops, see there). A loop adopts it when it sees the new
// version (loop.current), and an exchange takes the loop's snapshot when
// it begins and uses it to the end: routing, filters, timeouts, limits
// and its upstream all come from the one version.
type snapshot struct {
	table      *router.Table  // matching to slots: Result.Index is the route's place in routes
	routes     routeList      // by router slot
	upstreams  []*upstreamDef // config order: filters name upstreams by this index (gray, external auth)
	limits     codec.Limits
	respLimits codec.Limits   // upstream response heads
	trusted    []netip.Prefix // trusted_proxies
	shared     map[string]any // what each filter's Prepare built, by filter name (the auth verifier); Service finds them

	// managed are the identity headers the gateway sets (auth's identity
	// headers, external auth's copied ones); a client's copies of them are
	// dropped on every route.
	managed         headerNames
	allowUnderscore bool  // allow_underscore_headers
	requestBuffer   int64 // request_buffer_bytes; 0 = stream every body
	maxBuffered     int64 // max_buffered_bytes
	maxConnBuffer   int   // max_conn_buffer
	maxConnections  int64 // max_connections
	timeouts        clientTimeouts
	spool           spool.Config
	tunnel          tunnelSettings // the websocket section

	// tls holds each HTTPS listener's certificates and client CAs, read
	// from their files when this version was compiled; indexed like
	// config.ClientListeners, nil for a plain listener (tls.go).
	tls []*tlsedge.ServerState

	// flights count, by loop, this version's routed exchanges that have
	// not ended: from routing to record, as the route's in-flight gauge.
	// The registry's sweep reads them to know when no exchange of an
	// older version can record into a route's filter stats any more.
	flights []flightCount
}

// clientTimeouts are the client-side deadlines (config.Timeouts).
type clientTimeouts struct {
	headerRead, idle, drain, suspend time.Duration
	tlsHandshake                     time.Duration
}

// route is a compiled route: where it goes and its timeouts.
type route struct {
	id              string
	upstream        int            // the route's upstream: its index in the snapshot's upstreams (a pointer would tie the route to one snapshot, see routeList)
	chain           *filters.Chain // nil when the route runs no filters
	prepared        bool           // the chain has a filter built on what its Prepare made (snapshot.shared)
	maxBody         int64          // the route's body limit when tighter than the global one
	connectTimeout  time.Duration
	responseTimeout time.Duration
	keepEscapes     bool  // escaped_slashes: keep
	tls             uint8 // what the route demands of the connection (routeTLS)
	metrics         *routeMetrics
	retry           policy.RetryPolicy
	breaker         *policy.Breaker // the server's for this route id; nil when the route has none
	// The breaker's and limiter's settings, set with them: one per config
	// section, shared by the routes that share it (most routes share the
	// global one), where a copy in each route cost 224 bytes a route.
	breakerCfg   *policy.BreakerSettings
	isolationCfg *policy.IsolationSettings
	tunnel       routeTunnel // its Upgrade tokens and tunnel series (upgrade.go)
}

// upstreamDef is one upstream as a snapshot defines it: its nodes (shared
// upstream.Node objects, kept by the server across reloads), balancer and
// pool settings.
type upstreamDef struct {
	name      string
	group     upstream.GroupConfig
	budget    *policy.Budget // the server's for this upstream name
	budgetLim policy.BudgetLimits

	// Passive ejection: the server's state for this upstream name, and the
	// policy this version sets on it when it becomes the running one
	// (snapshot.activate); nil when ejection is off.
	outliers   *upstream.Outliers
	outlierCfg *upstream.OutlierConfig
	healthCfg  *upstream.HealthCheckConfig // nil when the upstream has no active check

	// loops holds each loop's Group for this definition, built on that
	// loop when it adopts the snapshot (loop.adopt) from its own pools.
	// Slot i is written and read only by loop i.
	loops []*upstream.Group
}

// on returns d's group on loop l. l has adopted d's snapshot: an exchange
// holds only snapshots its loop adopted.
func (d *upstreamDef) on(l *loop) *upstream.Group { return d.loops[l.index] }

// pickNode chooses the node for the exchange's upstream call: from the
// route's upstream, or the one a filter switched it to (gray), by the
// filters' hash key when one is set. Both come from the exchange's own
// snapshot, so a reload since it began changes nothing for it.
func (ex *exchange) pickNode() *upstream.Pool {
	def := ex.snap.upstreams[ex.route.upstream]
	var hashKey []byte
	node := 0
	if ex.chain != nil {
		if g := ex.fx.Upstream.Group; g >= 0 {
			def = ex.snap.upstreams[g]
		}
		hashKey, node = ex.fx.Upstream.HashKey, ex.fx.Upstream.Node
	}
	g := def.on(ex.loop)
	ex.retry.group, ex.retry.upDef = g, def
	if g.AllDown() {
		return nil
	}
	if node > 0 { // direct_node: that node or none, as health allows
		if pools, out := g.Pools(), g.Unavailable(); node <= len(pools) && !out.Has(node-1) {
			return pools[node-1]
		}
		return nil
	}
	if pools := g.Pools(); len(pools) == 1 {
		// Every balancer and the hash ring give a one-node group its node,
		// out of rotation or not (a group with every node out still gets a
		// pick; AllDown above is the refusal): no need to ask which nodes
		// are out, nor the balancer (about 90 instructions per request).
		return pools[0]
	}
	if hashKey != nil {
		return g.PickHash(hashKey, g.Unavailable()) // walks the ring past nodes out of rotation
	}
	return g.Pick(g.Unavailable())
}

// compileErrors are every error one compile found, reported on one line.
type compileErrors []error

func (e compileErrors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = strings.TrimPrefix(err.Error(), "engine: ")
	}
	return "engine: " + strings.Join(msgs, "; ")
}

func (e compileErrors) Unwrap() []error { return e }

// compile builds the snapshot for cfg off the loops. Everything that must
// outlive it (bans, revocations, metrics and filter stats, upstream nodes)
// comes from kept, by stable name, and none of it is made on a loop. It
// reports every error it finds, not just the first.
//
// prev and prevCfg are the running snapshot and its config, or nil: a
// config that shares prevCfg's settings keeps prev's compiled routes (see
// below). refresh builds what the filters' Prepare makes (the auth
// verifier, which reads key files) again all the same, and with it the
// routes whose chains use it; the others are kept.
func compile(cfg *config.Config, loops int, kept *durable, prev *snapshot, prevCfg *config.Config, refresh bool) (*snapshot, error) {
	var errs compileErrors
	table, err := cfg.RouterTable() // compiled once, by config.Parse
	if err != nil {
		errs = append(errs, fmt.Errorf("engine: routes: %w", err))
	}
	s := &snapshot{table: table, flights: make([]flightCount, loops), limits: codec.Limits{
		MaxURIBytes:    int(cfg.Limits.MaxURIBytes),
		MaxHeaderCount: cfg.Limits.MaxHeaderCount,
		MaxHeaderBytes: int(cfg.Limits.MaxHeaderBytes),
		MaxBodyBytes:   int64(cfg.Limits.MaxBodyBytes),
	}.WithDefaults(),
		respLimits: codec.Limits{
			MaxHeaderCount: cfg.Limits.MaxResponseHeaderCount,
			MaxHeaderBytes: int(cfg.Limits.MaxResponseHeaderBytes),
		}.WithDefaults(),
		managed:         newHeaderNames(append(cfg.IdentityHeaderNames(), cfg.ClientCertHeaders()...)),
		allowUnderscore: cfg.AllowUnderscoreHeaders,
		requestBuffer:   cfg.Limits.RequestBuffer(),
		maxBuffered:     int64(cfg.Limits.MaxBufferedBytes),
		maxConnBuffer:   int(cfg.Limits.MaxConnBuffer),
		maxConnections:  int64(cfg.Limits.MaxConnections),
		timeouts: clientTimeouts{
			headerRead: time.Duration(cfg.Timeouts.HeaderRead),
			idle:       time.Duration(cfg.Timeouts.Idle),
			drain:      time.Duration(cfg.Timeouts.Drain),
			suspend:    time.Duration(cfg.Timeouts.Suspend),

			tlsHandshake: time.Duration(cfg.Timeouts.TLSHandshake),
		},
		spool: spool.Config{
			HighWater: int(cfg.Limits.MaxConnBuffer),
			MaxFile:   int64(cfg.Limits.MaxTempFileBytes),
			Dir:       cfg.Limits.TempDir,
		},
		tunnel: newTunnelSettings(cfg),
	}
	if s.tls, err = compileTLS(cfg); err != nil {
		errs = append(errs, err)
	}
	groupIndex := make(map[string]int, len(cfg.Upstreams))
	for i := range cfg.Upstreams {
		d := upstreamDefOf(&cfg.Upstreams[i], loops, kept)
		if u := &cfg.Upstreams[i]; u.TLS != nil {
			t, err := upstreamTLS(u)
			if err != nil {
				errs = append(errs, fmt.Errorf("engine: upstreams[%d] (%s).tls: %w", i, u.Name, err))
			}
			d.group.Pool.TLS = t
			if d.healthCfg != nil {
				d.healthCfg.TLS = t
			}
		}
		groupIndex[d.name] = i
		s.upstreams = append(s.upstreams, d)
	}
	// A config that shares its settings with the running one (only routes
	// changed, config.WithRoutes) keeps what the running snapshot built
	// from them, and each route it shares or that differs only in what it
	// matches: its chain, metrics, breaker and limiter, re-pointed at this
	// snapshot's upstream. At 30,000 routes
	// that is the difference between a few milliseconds and most of a
	// second.
	var keptRoutes map[string]int // route id: its index in prev and prevCfg, made when a route moved
	keep := false
	if prev != nil && cfg.SameSettings(prevCfg) {
		s.trusted, s.shared, keep = prev.trusted, prev.shared, true
	}
	// prevIndex is the index of route id in prevCfg, or -1. Most routes
	// stay where they were, or a few places up once routes before them
	// were deleted (shift), so the map of every id is made only for one
	// that moved: at 30,000 routes it cost an API write 5 ms and 3 MB.
	shift := 0
	prevIndex := func(i int, id string) int {
		if !keep {
			return -1
		}
		for j := i + shift; j < len(prevCfg.Routes) && j <= i+shift+16; j++ {
			if prevCfg.Routes[j].ID == id {
				shift = j - i
				return j
			}
		}
		if i+shift >= len(prevCfg.Routes) {
			// Past prevCfg's last route: appended, as a new route is. One
			// that moved here is compiled afresh; its metrics, breaker and
			// limiter are the server's by id all the same.
			return -1
		}
		if keptRoutes == nil {
			keptRoutes = make(map[string]int, len(prevCfg.Routes))
			for j := range prevCfg.Routes {
				keptRoutes[prevCfg.Routes[j].ID] = j
			}
		}
		if j, ok := keptRoutes[id]; ok {
			return j
		}
		return -1
	}
	// A route that only moved to another path compiles as it did: its
	// compiled state is kept too (config.RouteTwins).
	var twins config.RouteTwins
	breakers := settingsOf[config.CircuitBreaker, policy.BreakerSettings]{make: policy.NewBreakerSettings}
	isolations := settingsOf[config.Isolation, policy.IsolationSettings]{make: policy.NewIsolationSettings}
	var b *chainBuilder
	if !keep || refresh {
		var err error
		if b, err = newChainBuilder(cfg, loops, groupIndex, kept); err != nil {
			return nil, append(errs, err)
		}
		s.trusted, s.shared = b.trusted, b.shared
	}
	// reusable is rt, prev's compiled route of prevCfg's route j, when
	// cfg's route r (upstream up) keeps it, else nil; reuse finds rt.
	reusable := func(rt *route, j, up int, r *config.Route) *route {
		if refresh && rt.prepared || rt.upstream != up ||
			!r.SameRoute(prevCfg.Routes[j]) && !twins.Twins(r, prevCfg.Routes[j]) {
			return nil
		}
		return rt
	}
	reuse := func(j, up int, r *config.Route) *route {
		if j < 0 {
			return nil
		}
		return reusable(prev.routes.at(prev.table.SlotOf(j)), j, up, r)
	}
	// The routes go by router slot (routeList): a slot the table removed
	// is empty. gone[g] is the next removed slot, g of them below it, and
	// prevGone[pg] prev's.
	var slots int
	var gone, prevGone []int
	if table != nil {
		slots, gone = table.Slots(), table.Gone()
	}
	if keep {
		prevGone = prev.table.Gone()
	}
	g, pg := 0, 0
	for start := 0; start < slots; start += routeChunk {
		end := min(start+routeChunk, slots)
		if keep {
			// prev's chunk in this place, when it holds every slot of the
			// stretch as this version has it: the same route in each, or
			// none in both.
			if c := prev.routes.chunkOf(start, end); c != nil {
				all, ng, npg := true, g, pg
				for slot := start; slot < end && all; slot++ {
					rt := &c[slot-start]
					removed, prevRemoved := ng < len(gone) && gone[ng] == slot, npg < len(prevGone) && prevGone[npg] == slot
					if removed {
						ng++
					}
					if prevRemoved {
						npg++
					}
					if removed || prevRemoved {
						all = removed && prevRemoved
						continue
					}
					r, j := cfg.Routes[slot-ng], slot-npg
					if r == prevCfg.Routes[j] {
						// prevCfg's route in its slot (configs share the
						// routes they keep): compiled as it is, no lookup.
						all = !refresh || !rt.prepared
						continue
					}
					gi, ok := groupIndex[r.Upstream]
					all = ok && rt.id == r.ID && reusable(rt, j, gi, r) != nil
				}
				if all {
					s.routes.add(c)
					g, pg = ng, npg
					continue
				}
			}
		}
		chunk := make([]route, 0, end-start)
		for slot := start; slot < end; slot++ {
			if g < len(gone) && gone[g] == slot {
				g++
				chunk = append(chunk, route{}) // removed: empty
				continue
			}
			i := slot - g
			r := cfg.Routes[i]
			gi, ok := groupIndex[r.Upstream]
			if !ok {
				errs = append(errs, fmt.Errorf("engine: route %q: unknown upstream %q", r.ID, r.Upstream))
				continue
			}
			if rt := reuse(prevIndex(i, r.ID), gi, r); rt != nil {
				chunk = append(chunk, *rt)
				continue
			}
			if b == nil { // what the filters' Prepare built is the kept routes'
				b = &chainBuilder{cfg: cfg, chains: cfg.Chains(), loops: loops, groups: groupIndex, trusted: s.trusted,
					shared: s.shared, services: &kept.services.byType}
			}
			chain, prepared, err := b.chain(r)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			// config.applyDefaults already copied the upstream's timeouts into
			// routes that do not override them.
			rt := route{id: r.ID, upstream: gi, chain: chain, prepared: prepared,
				connectTimeout: time.Duration(r.ConnectTimeout), responseTimeout: time.Duration(r.ResponseTimeout),
				keepEscapes: r.EscapedSlashes == config.EscapedSlashesKeep, metrics: kept.metrics.route(r.ID), tls: routeTLS(r.TLS),
				retry: policy.NewRetryPolicy(&r.Retry), tunnel: routeTunnel{tokens: r.Upgrade}}
			if r.CircuitBreaker.On() {
				rt.breaker, rt.breakerCfg = kept.resilience.Breaker(r.ID, r.CircuitBreaker.Window), breakers.of(r.CircuitBreaker)
			}
			if r.Isolation.On() {
				rt.isolationCfg = isolations.of(r.Isolation) // the limiter is the route's metrics' (route.limiter)
			}
			if r.Limits != nil {
				rt.maxBody = r.Limits.MaxBodyBytes // the limits filter's, through filters.RequestLimiter
			}
			chunk = append(chunk, rt)
		}
		s.routes.add(chunk)
		for pg < len(prevGone) && prevGone[pg] < end {
			pg++
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return s, nil
}

// settingsOf makes the policy settings S of config sections C, one per
// section: the routes of one parse that share a section share its
// settings.
type settingsOf[C, S any] struct {
	make func(*C) S
	made map[*C]*S
}

func (m *settingsOf[C, S]) of(c *C) *S {
	if s, ok := m.made[c]; ok {
		return s
	}
	s := m.make(c)
	if m.made == nil {
		m.made = map[*C]*S{}
	}
	m.made[c] = &s
	return &s
}

// upstreamDefOf compiles one upstream. Its nodes are the registry's, by
// upstream name and address, so pools and stats follow a node across
// reloads.
func upstreamDefOf(u *config.Upstream, loops int, kept *durable) *upstreamDef {
	reg := kept.metrics
	d := &upstreamDef{name: u.Name, loops: make([]*upstream.Group, loops), budget: kept.resilience.Budget(u.Name),
		budgetLim: policy.BudgetLimitsOf(&u.RetryBudget),
		outliers:  kept.resilience.Outliers(u.Name), outlierCfg: outlierConfig(&u.Outlier), healthCfg: healthConfig(u.HealthCheck)}
	d.group = upstream.GroupConfig{
		Name:      u.Name,
		Weighted:  u.Balancer == config.WeightedRoundRobin,
		Kind:      balancerKinds[u.Balancer],
		SlowStart: time.Duration(*u.SlowStart),
		Pool: upstream.PoolConfig{
			MaxIdle:        u.MaxIdle,
			MaxConns:       u.MaxConns,
			IdleTimeout:    time.Duration(u.IdleTimeout),
			ConnectTimeout: time.Duration(u.ConnectTimeout),
			AcquireTimeout: time.Duration(u.PoolAcquireTimeout),
		},
	}
	for _, n := range u.Nodes {
		d.group.Nodes = append(d.group.Nodes, upstream.NodeConfig{Node: reg.node(u.Name, n.Addr), Weight: n.Weight})
	}
	d.group.Prepare()
	return d
}

// headerNames is a set of header names that every request's fields are
// looked up in: the lengths the names have tell most fields apart without
// a comparison.
type headerNames struct {
	names []string
	lens  uint64 // bit n: a name of n bytes, n < 63; bit 63: a longer one
}

func newHeaderNames(names []string) headerNames {
	h := headerNames{names: names}
	for _, n := range names {
		h.lens |= 1 << min(len(n), 63)
	}
	return h
}

// has reports whether name is in the set, in any case.
func (h *headerNames) has(name []byte) bool {
	if h.lens&(1<<min(len(name), 63)) == 0 {
		return false
	}
	for _, m := range h.names {
		if len(m) == len(name) && codec.EqualFold(name, m) {
			return true
		}
	}
	return false
}
