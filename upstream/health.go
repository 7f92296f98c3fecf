// Active health: each node's health as its probes judge it, the tiers
// that set how often it is probed, and how a group routes around nodes
// that are down (the panic threshold).

package upstream

import (
	"crypto/tls"
	"log"
	"sync/atomic"
	"time"
)

// HealthCheckConfig is one upstream's active health check.
type HealthCheckConfig struct {
	TCP     bool   // a TCP connect is the whole check; otherwise an HTTP request
	Method  string // HTTP method; "GET"
	Path    string // HTTP path; "/"
	Host    string // Host header; "" = the node's address
	Expect  []int  // statuses that pass
	Timeout time.Duration
	// TLS, when set, makes an HTTP check HTTPS with the upstream's config
	// (a TCP check stays a connect).
	TLS *tls.Config

	Healthy   int // passes in a row that bring a down node back
	Unhealthy int // failures in a row that take a node down

	// Tiered intervals: New for a new, flapping or recently failed node;
	// Stable once it passed StableAfter checks in a row; Degraded once it
	// failed DegradedAfter in a row.
	New, Stable, Degraded      time.Duration
	StableAfter, DegradedAfter int
	PanicPercent               int32 // below this share of healthy nodes, route to all of them
}

// passes reports whether status is expected.
func (c *HealthCheckConfig) passes(status int) bool {
	for _, s := range c.Expect {
		if s == status {
			return true
		}
	}
	return false
}

// nodeHealth is one node's active health. Written by the prober, read by
// every loop.
type nodeHealth struct {
	down     atomic.Bool
	passes   atomic.Int32 // in a row
	failures atomic.Int32 // in a row
	probes   atomic.Uint64
	failed   atomic.Uint64
}

// Down reports whether active checks took n out of rotation.
func (n *Node) Down() bool { return n.health.down.Load() }

// HealthProbes returns the probes n had and how many failed.
func (n *Node) HealthProbes() (probes, failed uint64) {
	return n.health.probes.Load(), n.health.failed.Load()
}

// checked records one probe's result and returns when to probe again.
// Off the loops (the prober).
func (n *Node) checked(cfg *HealthCheckConfig, ok bool) time.Duration {
	h := &n.health
	h.probes.Add(1)
	if ok {
		h.failures.Store(0)
		p := h.passes.Add(1)
		if h.down.Load() && int(p) >= cfg.Healthy {
			n.setDown(false)
		}
		if int(p) >= cfg.StableAfter {
			return cfg.Stable
		}
		return cfg.New
	}
	h.failed.Add(1)
	h.passes.Store(0)
	f := h.failures.Add(1)
	if !h.down.Load() && int(f) >= cfg.Unhealthy {
		n.setDown(true)
	}
	if int(f) >= cfg.DegradedAfter {
		return cfg.Degraded
	}
	return cfg.New
}

// tier returns the interval cfg sets for n as its last probes left it:
// the one checked returned after the last probe, had it been under cfg.
func (n *Node) tier(cfg *HealthCheckConfig) time.Duration {
	passes, failures := int(n.health.passes.Load()), int(n.health.failures.Load())
	switch {
	case passes > 0 && passes >= cfg.StableAfter:
		return cfg.Stable
	case failures > 0 && failures >= cfg.DegradedAfter:
		return cfg.Degraded
	}
	return cfg.New
}

// setDown moves n in or out of rotation and counts it in its upstream.
func (n *Node) setDown(down bool) {
	if n.health.down.Swap(down) == down {
		return
	}
	g := n.outlier.group.Load()
	if g != nil {
		if down {
			g.down.Add(1)
		} else {
			g.down.Add(-1)
		}
	}
	if !down {
		n.markUp()
	}
	state := "healthy"
	if down {
		state = "unhealthy"
	}
	log.Printf("health upstream=%s node=%s %s", n.Upstream, n.Addr, state)
	if g != nil {
		g.rotationChanged(n, state)
	}
}

// AllDown reports whether active checks took every node of g down: the
// engine answers 503, code 50301, rather than send to any of them.
func (g *Group) AllDown() bool {
	if len(g.pools) == 0 {
		return false
	}
	o := g.pools[0].node.outlier.group.Load()
	return o != nil && o.down.Load() > 0 && int(o.down.Load()) >= len(g.pools) && o.allDown(g)
}

// allDown checks node by node what the counter suggests.
func (o *Outliers) allDown(g *Group) bool {
	for _, p := range g.pools {
		if !p.node.Down() {
			return false
		}
	}
	return true
}

// holdsDown reports whether picks pass over the nodes of g that are down:
// some are, and not so many that the panic threshold applies. Past it,
// traffic spreads over all of them rather than overload the few that are
// up (as Envoy does). The upstream's count of down nodes stands for g's:
// they differ only while a reload changes the nodes, and a count costs no
// walk over hundreds of nodes per request.
func (o *Outliers) holdsDown(g *Group) bool {
	downs := int(o.down.Load())
	if downs == 0 {
		return false
	}
	n := len(g.pools)
	downs = min(downs, n)
	hc := o.health.Load()
	return hc == nil || int32((n-downs)*100) >= hc.PanicPercent*int32(n)
}
