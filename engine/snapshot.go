// snapshot: the immutable, compiled routing state every loop reads.

package engine

import (
	"fmt"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/router"
	"github.com/loopgate/loopgate/upstream"
)

// snapshot is compiled off-loop and never modified; loops load it through an
// atomic pointer per request, so a request keeps the snapshot it started with.
type snapshot struct {
	table  *router.Table
	routes []route // by router index
	limits codec.Limits
}

// route is a compiled route: where it goes and its timeouts.
type route struct {
	id              string
	group           int // index into the loop's upstream groups
	connectTimeout  time.Duration
	responseTimeout time.Duration
}

func compileSnapshot(cfg *config.Config) (*snapshot, error) {
	table, err := router.Compile(cfg.RouterSpecs())
	if err != nil {
		return nil, fmt.Errorf("engine: routes: %w", err)
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
	}.WithDefaults()}
	for _, r := range cfg.Routes {
		g, ok := groupIndex[r.Upstream]
		if !ok {
			return nil, fmt.Errorf("engine: route %q: unknown upstream %q", r.ID, r.Upstream)
		}
		// config.applyDefaults already copied the upstream's timeouts into
		// routes that do not override them.
		s.routes = append(s.routes, route{id: r.ID, group: g,
			connectTimeout: time.Duration(r.ConnectTimeout), responseTimeout: time.Duration(r.ResponseTimeout)})
	}
	return s, nil
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
		out = append(out, g)
	}
	return out
}
