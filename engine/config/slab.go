// Parsed routes, allocated in slabs.

package config

import "unsafe"

// slabRoutes is how many routes one slab holds: 32 KiB of them. One
// allocation per route was 30,000 of them to make, and for the collector
// to track, at 30,000 routes; one array of them all would keep every
// route of a parse alive while any one of them is (configs share routes,
// see WithRoutes), where a slab keeps at most its own.
const slabRoutes = (32 << 10) / int(unsafe.Sizeof(Route{}))

// routeSlab hands out the routes of one parse from slabs.
type routeSlab struct {
	free []Route // the current slab's routes not yet handed out
	left int     // routes the parse still wants after free: the next slab's size, at most slabRoutes
}

// newRouteSlab is a slab for a parse that makes n routes.
func newRouteSlab(n int) *routeSlab { return &routeSlab{left: n} }

// next is a zero route from the slab.
func (s *routeSlab) next() *Route {
	if len(s.free) == 0 {
		n := min(max(s.left, 1), slabRoutes)
		s.free, s.left = make([]Route, n), max(s.left-n, 0)
	}
	r := &s.free[0]
	s.free = s.free[1:]
	return r
}

// packRoutes moves routes, as the YAML decoder allocated them (one each),
// into slabs; a nil item (a null in the list) becomes a zero route.
func packRoutes(routes []*Route) {
	s := newRouteSlab(len(routes))
	for i, r := range routes {
		p := s.next()
		if r != nil {
			*p = *r
		}
		routes[i] = p
	}
}
