// Tunnel metrics: the process-wide tunnel count that max_tunnels bounds,
// and each route's open tunnels, bytes each way and closes by reason.

package engine

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/engine/config"
)

// tunnelRegistry is the server's tunnel state that outlives reloads: the
// open count and each route's series, by route id. Made by New.
type tunnelRegistry struct {
	// open counts tunnels open plus upgrade requests holding a slot
	// (admitUpgrade), all loops; refused counts the requests max_tunnels
	// turned away. Any goroutine.
	open    atomic.Int64
	refused atomic.Uint64

	loops  int
	mu     sync.Mutex // guards routes and byID; never taken by a loop
	routes []*tunnelMetrics
	byID   map[string]*tunnelMetrics
}

// tunnelMetrics are one route's tunnel series, sharded by loop. The
// shards are made by the route's first tunnel (shard), not at compile: most
// routes never have one, and a config of 30,000 routes would otherwise
// carry 30,000 × loops of them.
type tunnelMetrics struct {
	id     string
	loops  int
	shards atomic.Pointer[[]tunnelShard] // nil until the first tunnel
}

// shard returns loop's shard, making the route's shards if no loop has
// yet: one allocation per route in the process's life. On a loop.
func (m *tunnelMetrics) shard(loop int) *tunnelShard {
	sh := m.shards.Load()
	if sh == nil {
		made := make([]tunnelShard, m.loops)
		if m.shards.CompareAndSwap(nil, &made) {
			sh = &made
		} else {
			sh = m.shards.Load() // another loop made them first
		}
	}
	return &(*sh)[loop]
}

// tunnelShard is what one loop records for one route's tunnels. Written by
// that loop; read by the metrics writer.
type tunnelShard struct {
	_      cacheLine
	open   atomic.Int64
	opened atomic.Uint64
	bytes  [2]atomic.Uint64 // by tunnelSide read from: client (towards the upstream), upstream (towards the client)
	closes [tunnelEndReasons]atomic.Uint64
	_      cacheLine
}

func newTunnelRegistry(loops int) *tunnelRegistry {
	return &tunnelRegistry{loops: loops, byID: map[string]*tunnelMetrics{}}
}

// route returns the tunnel metrics of route id, making them the first
// time. Off-loop only (compile).
func (r *tunnelRegistry) route(id string) *tunnelMetrics {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m := r.byID[id]; m != nil {
		return m
	}
	m := &tunnelMetrics{id: id, loops: r.loops}
	r.byID[id] = m
	r.routes = append(r.routes, m)
	return m
}

// newTunnelSettings compiles the websocket section.
func newTunnelSettings(cfg *config.Config) tunnelSettings {
	return tunnelSettings{idle: time.Duration(cfg.WebSocket.IdleTimeout), maxTunnels: int64(cfg.WebSocket.MaxTunnels),
		buffer: int(cfg.WebSocket.Buffer), linger: time.Duration(cfg.Timeouts.Drain)}
}

// Tunnels returns how many tunnels are open (and upgrade requests holding
// a slot), all loops. Safe for concurrent use.
func (s *Server) Tunnels() int64 { return s.tunnels.open.Load() }

// writeTunnelSeries writes the tunnel series (registered by New).
func (s *Server) writeTunnelSeries(w io.Writer) {
	reg := s.tunnels
	// routes only grows by append, so the elements under the length read
	// now never change: no copy (a scrape of 30,000 routes allocates
	// nothing here).
	reg.mu.Lock()
	routes := reg.routes
	reg.mu.Unlock()

	p := newPromWriter(w)
	p.family("loopgate_tunnels_open", "gauge", "Upgrade tunnels open, all routes, with upgrade requests holding a slot of websocket.max_tunnels.")
	p.gauge("loopgate_tunnels_open", "", reg.open.Load())
	p.family("loopgate_tunnels_refused_total", "counter", "Upgrade requests answered 503 (code 50305) because websocket.max_tunnels were open.")
	p.sample("loopgate_tunnels_refused_total", "", reg.refused.Load())

	type sum struct {
		open   int64
		opened uint64
		bytes  [2]uint64
		closes [tunnelEndReasons]uint64
	}
	var sums []sum // only routes that had a tunnel: most have none
	var opened []*tunnelMetrics
	for _, m := range routes {
		shards := m.shards.Load()
		if shards == nil {
			continue // a route that never had a tunnel writes no tunnel series
		}
		var s sum
		for j := range *shards {
			sh := &(*shards)[j]
			s.open += sh.open.Load()
			s.opened += sh.opened.Load()
			for d := range sh.bytes {
				s.bytes[d] += sh.bytes[d].Load()
			}
			for r := range sh.closes {
				s.closes[r] += sh.closes[r].Load()
			}
		}
		opened = append(opened, m)
		sums = append(sums, s)
	}
	routes = opened
	p.family("loopgate_route_tunnels_open", "gauge", "Upgrade tunnels open on the route.")
	for i, m := range routes {
		p.gauge("loopgate_route_tunnels_open", p.labels("route", m.id), sums[i].open)
	}
	p.family("loopgate_route_tunnels_total", "counter", "Upgrade tunnels opened on the route (a 101 from the upstream).")
	for i, m := range routes {
		p.sample("loopgate_route_tunnels_total", p.labels("route", m.id), sums[i].opened)
	}
	p.family("loopgate_route_tunnel_bytes_total", "counter", "Bytes carried by the route's tunnels, by direction.")
	for i, m := range routes {
		p.sample("loopgate_route_tunnel_bytes_total", p.labels("route", m.id, "direction", "to_upstream"), sums[i].bytes[sideClient])
		p.sample("loopgate_route_tunnel_bytes_total", p.labels("route", m.id, "direction", "to_client"), sums[i].bytes[sideUpstream])
	}
	p.family("loopgate_route_tunnel_closes_total", "counter", "The route's tunnels that ended, by how.")
	for i, m := range routes {
		for r, n := range sums[i].closes {
			p.sample("loopgate_route_tunnel_closes_total", p.labels("route", m.id, "reason", tunnelEndReason(r).String()), n)
		}
	}
}
