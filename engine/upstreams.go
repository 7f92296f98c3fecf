// GET /upstreams: every node's health, ejection, load and failures, and
// the breakers of the routes that use it, as JSON for operators.

package engine

import (
	"encoding/json"
	"net/http"

	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/upstream"
)

// UpstreamsHandler serves GET /upstreams on the admin port: the running
// config's upstreams, each node with what the gateway knows of it. It
// reads atomics only, never waiting for a loop. Every figure is also a
// Prometheus series (docs/resilience.md).
func (s *Server) UpstreamsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, `{"code":40501,"message":"method not allowed"}`, http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetEscapeHTML(false) // as every admin answer: the text as written, not "\u003e"
		enc.SetIndent("", "  ")
		_ = enc.Encode(s.upstreamsReport())
	})
}

// upstreamReport is one upstream in GET /upstreams.
type upstreamReport struct {
	Name   string         `json:"name"`
	Routes []routeBreaker `json:"routes"` // the routes that use it, with their breakers
	Nodes  []nodeReport   `json:"nodes"`
}

type routeBreaker struct {
	Route   string `json:"route"`
	Breaker string `json:"breaker"` // closed, open, half_open, or off
}

type nodeReport struct {
	Addr             string  `json:"addr"`
	Healthy          bool    `json:"healthy"` // false while active checks hold it out
	Ejected          bool    `json:"ejected"` // outlier detection holds it out
	EjectedForSecs   float64 `json:"ejected_for_seconds"`
	Ejections        uint64  `json:"ejections"`
	InFlight         int64   `json:"in_flight"` // connections carrying a call now, all loops
	FailuresInARow   int     `json:"failures_in_a_row"`
	ConnectFailures  uint64  `json:"connect_failures"`
	Resets           uint64  `json:"resets"`
	Timeouts         uint64  `json:"timeouts"`
	Responses5xx     uint64  `json:"responses_5xx"`
	HealthProbes     uint64  `json:"health_probes"`
	HealthProbesFail uint64  `json:"health_probes_failed"`
}

func (s *Server) upstreamsReport() []upstreamReport {
	snap := s.state.Load().snap
	now := loopstat.Now()
	out := make([]upstreamReport, 0, len(snap.upstreams))
	for di, d := range snap.upstreams {
		u := upstreamReport{Name: d.name, Routes: []routeBreaker{}, Nodes: []nodeReport{}}
		for i := range snap.routes.len() {
			r := snap.routes.at(i)
			if r.empty() || r.upstream != di {
				continue
			}
			state := "off"
			if r.breaker != nil {
				state = r.breaker.State().String()
			}
			u.Routes = append(u.Routes, routeBreaker{Route: r.id, Breaker: state})
		}
		for _, nc := range d.group.Nodes {
			u.Nodes = append(u.Nodes, reportNode(nc.Node, now))
		}
		out = append(out, u)
	}
	return out
}

func reportNode(n *upstream.Node, now int64) nodeReport {
	left := n.EjectedFor(now)
	probes, failed := n.HealthProbes()
	r := nodeReport{Addr: n.Addr, Healthy: !n.Down(), Ejected: left > 0, EjectedForSecs: left.Seconds(),
		Ejections: n.Ejections(), FailuresInARow: n.FailuresInARow(), HealthProbes: probes, HealthProbesFail: failed}
	for i := range n.Loops() {
		st := n.Stats(i)
		r.InFlight += st.Active()
		r.ConnectFailures += st.ConnectFailures.Load()
		r.Resets += st.Resets.Load()
		r.Timeouts += st.Timeouts.Load()
		r.Responses5xx += st.Responses[4].Load()
	}
	return r
}
