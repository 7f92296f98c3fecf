// Build: what a filter's constructor gets, and the server-owned services it
// may borrow.

package filters

import (
	"net/netip"
	"reflect"
)

// Build is handed to Registration.Prepare and Registration.New: the
// filter's validated configs and what the engine lends it. Everything in
// it is read-only.
type Build struct {
	Name    string
	Order   int    // the final order: filter_orders applied
	Loops   int    // event loops; per-loop state is indexed by Exchange.Loop
	RouteID string // "" in Prepare

	Global GlobalConfig // the filter's top-level config; nil when it has none
	Config RouteConfig  // the filter's route config; nil in Prepare or when it has none
	Shared any          // what Prepare made; nil without a Prepare, and in Prepare itself

	Trusted []netip.Prefix // trusted_proxies, parsed

	// Upstream resolves an upstream by name to the group a filter may
	// send a request to (Exchange.Upstream.Group, Exchange.Sub).
	Upstream func(name string) (group int, ok bool)

	// Nodes are the addresses of the route's own upstream's nodes, in
	// config order (Exchange.Upstream.Node indexes them); nil in Prepare.
	Nodes []string

	// Globals returns another filter's top-level config, or nil:
	// external_auth reads auth's.
	Globals func(filter string) GlobalConfig

	Services *Services // server-owned objects; see Service
}

// Services are objects the server owns and lends to filters: they outlive
// a reload (the ban list, revocations) and the control plane reaches them
// too. The engine provides each under its type; a constructor borrows one
// with Service. Provide before the first Build; reads need no lock.
type Services struct {
	byType map[reflect.Type]any
}

// Provide makes v available as its dynamic type, replacing any object of
// that type provided before.
func (s *Services) Provide(v any) {
	if s.byType == nil {
		s.byType = map[reflect.Type]any{}
	}
	s.byType[reflect.TypeOf(v)] = v
}

// Service returns the object of type T the engine provided, and whether
// there is one.
func Service[T any](b *Build) (T, bool) { return ServiceOf[T](b.Services) }

// ServiceOf returns the object of type T in s, and whether there is one.
// Safe for concurrent use once the objects are provided.
func ServiceOf[T any](s *Services) (T, bool) {
	var zero T
	if s == nil {
		return zero, false
	}
	v, ok := s.byType[reflect.TypeFor[T]()].(T)
	return v, ok
}
