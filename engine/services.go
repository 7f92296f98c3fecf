// The objects the server owns for its filters (filters.Registration.Service):
// made once per server, lent to every config version's filters, and
// reached by the control plane by their type.

package engine

import (
	"io"
	"net/http"
	"net/netip"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

// services are a server's filter-owned objects: by type for the filters
// (Build.Services), and in registration order for the engine's own uses
// (their series, GET /limits, closing them).
type services struct {
	byType filters.Services
	owned  []any

	// resolve names the client behind trusted_proxies: the registered
	// filter's (filters.Registration.ClientIP, ip_access's), so the
	// engine calls no filter by name; nil when none registered one.
	resolve func(peer netip.Addr, h codec.Headers, trusted []netip.Prefix) netip.Addr
}

// newServices makes every registered filter's object.
func newServices() *services {
	sv := &services{resolve: filters.ClientResolver()}
	for _, f := range filters.Registered() {
		if f.Service != nil {
			v := f.Service()
			sv.byType.Provide(v)
			sv.owned = append(sv.owned, v)
		}
	}
	return sv
}

// clientIP is the client of a request from peer with headers h, as the
// trusted proxies in front of the gateway name it; the peer when no
// registered filter resolves clients.
func (sv *services) clientIP(peer netip.Addr, h codec.Headers, trusted []netip.Prefix) netip.Addr {
	if sv.resolve == nil {
		return peer.Unmap()
	}
	return sv.resolve(peer, h, trusted)
}

// metricsWriters are the objects' series writers, for the metrics page.
func (sv *services) metricsWriters() []func(io.Writer) {
	var ws []func(io.Writer)
	for _, v := range sv.owned {
		if m, ok := v.(interface{ WriteMetrics(io.Writer) }); ok {
			ws = append(ws, m.WriteMetrics)
		}
	}
	return ws
}

// close closes the objects that hold resources (the rate limits' Redis
// workers and key sweeper): when the server stops, or at once for a set
// that serves nothing.
func (sv *services) close() {
	for _, v := range sv.owned {
		if c, ok := v.(interface{ Close() }); ok {
			c.Close()
		}
	}
}

// Service returns s's object of type T: one a filter registered for the
// server (*access.Bans, *auth.Revocations, *limiter.Store), or else one
// the running config version's filters share (*auth.Verifier, which
// Revoke goes through). Each lasts across reloads, but for a shared one,
// which is the running version's. Safe for concurrent use.
func Service[T any](s *Server) (T, bool) {
	if v, ok := filters.ServiceOf[T](&s.services.byType); ok {
		return v, true
	}
	for _, v := range s.state.Load().snap.shared {
		if t, ok := v.(T); ok {
			return t, true
		}
	}
	var zero T
	return zero, false
}

// LimitsHandler serves GET /limits on the admin port: the status page of
// the filter object that has one (the rate limits', as JSON; see
// limiter.Store.Handler), or 404 when none does.
func (s *Server) LimitsHandler() http.Handler {
	for _, v := range s.services.owned {
		if h, ok := v.(interface{ Handler() http.Handler }); ok {
			return h.Handler()
		}
	}
	return http.NotFoundHandler()
}
