// snapshot: the immutable, compiled routing state every loop reads.

package engine

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/router"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
	"github.com/loopgate/loopgate/upstream"
)

// snapshot is compiled off-loop and never modified; loops load it through an
// atomic pointer per request, so a request keeps the snapshot it started with.
type snapshot struct {
	table      *router.Table
	routes     []route // by router index
	limits     codec.Limits
	respLimits codec.Limits   // upstream response heads
	trusted    []netip.Prefix // trusted_proxies

	// managed are the identity headers the gateway sets (auth's identity
	// headers, external auth's copied ones); a client's copies of them are
	// dropped on every route.
	managed         []string
	allowUnderscore bool  // allow_underscore_headers
	requestBuffer   int64 // request_buffer_bytes; 0 = stream every body
	maxBuffered     int64 // max_buffered_bytes
}

// route is a compiled route: where it goes and its timeouts.
type route struct {
	id              string
	group           int            // index into the loop's upstream groups
	chain           *filters.Chain // nil when the route runs no filters
	maxBody         int64          // the route's body limit when tighter than the global one
	connectTimeout  time.Duration
	responseTimeout time.Duration
	keepEscapes     bool // escaped_slashes: keep
	metrics         *routeMetrics
}

// compileSnapshot builds the snapshot for cfg, taking every route's and
// filter's metrics from reg (made now if new), so no metric object is
// made on a loop.
func compileSnapshot(cfg *config.Config, loops int, reg *registry) (*snapshot, *chainBuilder, error) {
	table, err := router.Compile(cfg.RouterSpecs())
	if err != nil {
		return nil, nil, fmt.Errorf("engine: routes: %w", err)
	}
	groupIndex := make(map[string]int, len(cfg.Upstreams))
	for i, u := range cfg.Upstreams {
		groupIndex[u.Name] = i
	}
	s := &snapshot{table: table, limits: codec.Limits{
		MaxURIBytes:    int(cfg.Limits.MaxURIBytes),
		MaxHeaderCount: cfg.Limits.MaxHeaderCount,
		MaxHeaderBytes: int(cfg.Limits.MaxHeaderBytes),
		MaxBodyBytes:   int64(cfg.Limits.MaxBodyBytes),
	}.WithDefaults(),
		respLimits: codec.Limits{
			MaxHeaderCount: cfg.Limits.MaxResponseHeaderCount,
			MaxHeaderBytes: int(cfg.Limits.MaxResponseHeaderBytes),
		}.WithDefaults(),
		managed:         cfg.IdentityHeaderNames(),
		allowUnderscore: cfg.AllowUnderscoreHeaders,
		requestBuffer:   cfg.Limits.RequestBuffer(),
		maxBuffered:     int64(cfg.Limits.MaxBufferedBytes),
	}
	b, err := newChainBuilder(cfg, loops, groupIndex, reg)
	if err != nil {
		return nil, nil, err
	}
	s.trusted = b.trusted
	for i := range cfg.Routes {
		r := &cfg.Routes[i]
		g, ok := groupIndex[r.Upstream]
		if !ok {
			return nil, nil, fmt.Errorf("engine: route %q: unknown upstream %q", r.ID, r.Upstream)
		}
		chain, err := b.chain(r)
		if err != nil {
			return nil, nil, err
		}
		// config.applyDefaults already copied the upstream's timeouts into
		// routes that do not override them.
		rt := route{id: r.ID, group: g, chain: chain,
			connectTimeout: time.Duration(r.ConnectTimeout), responseTimeout: time.Duration(r.ResponseTimeout),
			keepEscapes: r.EscapedSlashes == config.EscapedSlashesKeep, metrics: reg.route(r.ID)}
		if r.Limits != nil {
			rt.maxBody = access.RouteMaxBody(*r.Limits)
		}
		s.routes = append(s.routes, rt)
	}
	return s, b, nil
}

// groupConfigs turns the upstream config into per-loop pool settings.
func groupConfigs(cfg *config.Config) []upstream.GroupConfig {
	out := make([]upstream.GroupConfig, 0, len(cfg.Upstreams))
	for _, u := range cfg.Upstreams {
		g := upstream.GroupConfig{
			Name:     u.Name,
			Weighted: u.Balancer == config.WeightedRoundRobin,
			Pool: upstream.PoolConfig{
				MaxIdle:        u.MaxIdle,
				MaxConns:       u.MaxConns,
				IdleTimeout:    time.Duration(u.IdleTimeout),
				ConnectTimeout: time.Duration(u.ConnectTimeout),
				AcquireTimeout: time.Duration(u.PoolAcquireTimeout),
			},
		}
		for _, n := range u.Nodes {
			g.Nodes = append(g.Nodes, upstream.NodeConfig{Addr: n.Addr, Weight: n.Weight})
		}
		g.Prepare()
		out = append(out, g)
	}
	return out
}
