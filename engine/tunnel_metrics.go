// Tunnel metrics: the process-wide tunnel count that max_tunnels bounds,
// and each route's open tunnels, bytes each way and closes by reason.

package engine

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/engine/config"
)

// tunnelRegistry is the server's tunnel count that outlives reloads. A
// route's tunnel series are kept with its other series
// (routeMetrics.tunnels), in the registry. Made by New.
type tunnelRegistry struct {
	// open counts tunnels open plus upgrade requests holding a slot
	// (admitUpgrade), all loops; refused counts the requests max_tunnels
	// turned away. Any goroutine.
	open    atomic.Int64
	refused atomic.Uint64
}

// tunnelShard returns loop's shard of the route's tunnel series, making
// the route's shards if no loop has yet: one allocation per route in the
// process's life, by its first tunnel (most routes never have one). On a
// loop.
func (m *routeMetrics) tunnelShard(loop int) *tunnelShard {
	sh := m.tunnels.Load()
	if sh == nil {
		made := make([]tunnelShard, m.loops)
		if m.tunnels.CompareAndSwap(nil, &made) {
			sh = &made
		} else {
			sh = m.tunnels.Load() // another loop made them first
		}
	}
	return &(*sh)[loop]
}

// tunnelsOpen is how many of the route's tunnels are open, all loops. Any
// goroutine.
func (m *routeMetrics) tunnelsOpen() int64 {
	sh := m.tunnels.Load()
	if sh == nil {
		return 0
	}
	n := int64(0)
	for j := range *sh {
		n += (*sh)[j].open.Load()
	}
	return n
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

// addBytes counts n bytes read from side. The loop is the shard's only
// writer, so a load and a store do, rather than an atomic add: the reader
// (the metrics writer) sees one value or the next, and the add's locked
// instruction, twice a round trip, is spared.
func (sh *tunnelShard) addBytes(side tunnelSide, n int) {
	b := &sh.bytes[side&1] // the mask spares the bounds check
	b.Store(b.Load() + uint64(n))
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
	// Only routes that had a tunnel, most have none: picked under the
	// registry's lock rather than from a copy of every route (a scrape of
	// 30,000 routes allocates nothing here for routes without tunnels).
	var routes []*routeMetrics
	s.metrics.mu.Lock()
	for _, m := range s.metrics.routes {
		if m.tunnels.Load() != nil && s.metrics.routeIx[m.id] == m {
			routes = append(routes, m)
		}
	}
	s.metrics.mu.Unlock()

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
	sums := make([]sum, 0, len(routes))
	for _, m := range routes {
		shards := m.tunnels.Load()
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
		sums = append(sums, s)
	}
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
