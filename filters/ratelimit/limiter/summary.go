// The rate limits' part of the dashboard's summary (GET /summary on the
// admin port): the cluster's mode and the busiest limits, from Status.

package limiter

import (
	"cmp"
	"slices"

	"github.com/loopgate/loopgate/filters/ratelimit/cluster"
)

// Summary is the rate limits in GET /summary: the cluster's mode, how
// many limits run, and the busiest.
type Summary struct {
	Cluster *ClusterSummary `json:"cluster,omitempty"` // nil without a cluster limit
	Total   int             `json:"total"`
	List    []LimitSummary  `json:"list"`
}

// ClusterSummary is the Redis side of the cluster limits.
type ClusterSummary struct {
	Mode       string `json:"mode"` // redis, shadow (Redis lost: each limit's on_redis_failure, the shadow quota by default), or recovering (quotas climbing back)
	LiveNodes  int    `json:"live_nodes"`
	KnownNodes int    `json:"known_nodes"`
}

// LimitSummary is one limit on this node.
type LimitSummary struct {
	Name      string  `json:"name"`
	Route     string  `json:"route,omitempty"`
	Scope     string  `json:"scope"`
	Quota     float64 `json:"quota"`
	Unlimited bool    `json:"unlimited,omitempty"`
	Admitted  uint64  `json:"admitted"`
	Refused   uint64  `json:"refused"`
}

// Summary reads the limits' status (atomics, and the store's lock, which
// builds and the admin port take, never a loop) and keeps the top limits
// by decisions. It returns a Summary; its type is any so that the engine
// reaches it through an interface, naming no filter.
func (s *Store) Summary(top int) any {
	st := s.Status()
	out := Summary{Total: len(st.Limits), List: []LimitSummary{}}
	if c := st.Cluster; c != nil {
		mode := "redis"
		switch {
		case c.Redis != cluster.Up.String():
			mode = "shadow"
		case c.Ramping:
			mode = "recovering"
		}
		out.Cluster = &ClusterSummary{Mode: mode, LiveNodes: c.LiveNodes, KnownNodes: c.KnownNodes}
	}
	limits := st.Limits
	slices.SortStableFunc(limits, func(a, b LimitStatus) int {
		return cmp.Compare(b.Grants+b.Rejections, a.Grants+a.Rejections)
	})
	for _, l := range limits[:min(top, len(limits))] {
		out.List = append(out.List, LimitSummary{Name: l.Name, Route: l.Route, Scope: l.Scope, Quota: l.Quota,
			Unlimited: l.Unlimited, Admitted: l.Grants, Refused: l.Rejections})
	}
	return out
}
