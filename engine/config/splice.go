// Splicing routes: the config of a document that differs from a parsed
// one only in some routes, without parsing the routes that stayed.

package config

import (
	"fmt"
	"reflect"
	"slices"
	"unsafe"

	"github.com/loopgate/loopgate/engine/router"
)

// WithRoutes returns a copy of c whose routes are, in order, the routes
// ids names: changed's route of that id when changed has one, else c's.
// changed is what Parse returned for c's document with its routes
// replaced by the changed ones alone, so every top-level setting and
// upstream is c's and each changed route was provisioned and validated
// against them. What Parse checks across routes is checked again here:
// ids stay unique and the router table compiles. The error says only that
// the splice does not hold; the caller parses the whole document then,
// for Parse's own error with its paths. c and changed are not modified;
// the result shares c's settings and upstreams, as both are immutable
// once parsed. The result's routes are c's and changed's own *Route
// values, shared, never copies: nothing modifies a route once its parse
// returned (at 30,000 routes a copy of each was 9 MB a write).
//
// The one check of Parse that looks at other routes from a setting (a
// filter's FirstRouteRunning) needs no repeat: c passed it with the same
// settings, and the changed routes passed it in changed.
func (c *Config) WithRoutes(ids []string, changed *Config) (*Config, error) {
	return c.WithRoutesAround(0, ids, 0, changed)
}

// WithRoutesAround is WithRoutes for a list that keeps c's first head
// routes and its last tail routes, unchanged and in their places, with
// ids between them: the caller (an API write) knows those from its
// document, and the splice then walks only ids. The kept head and tail
// are taken as they are, with no lookup each.
func (c *Config) WithRoutesAround(head int, ids []string, tail int, changed *Config) (*Config, error) {
	if len(changed.Upstreams) != len(c.Upstreams) {
		return nil, fmt.Errorf("config: splice: upstreams differ")
	}
	if head < 0 || tail < 0 || head+tail > len(c.Routes) {
		return nil, fmt.Errorf("config: splice: %d and %d kept of %d routes", head, tail, len(c.Routes))
	}
	if head == 0 && tail == 0 && changed.table != nil && sameIDs(changed.Routes, ids) {
		// Every route changed, in ids' order (a file whose every route was
		// edited): changed's routes and the table its parse compiled are
		// the result's as they are, where copying and editing them cost a
		// reload of 30,000 routes 10 MB and tens of milliseconds.
		out := *c
		out.Routes, out.table = changed.Routes, changed.table
		return &out, nil
	}
	n := head + len(ids) + tail
	freshOf := freshIndex(changed)
	// c's routes the walk aligns ids with: those between the kept head
	// and tail.
	end := len(c.Routes) - tail
	// c's route of an id that is not where the walk below expects it: the
	// map of every id is made only for such a route.
	var kept map[string]*Route
	keptOf := func(id string) *Route {
		if kept == nil {
			kept = make(map[string]*Route, len(c.Routes))
			for _, r := range c.Routes {
				kept[r.ID] = r
			}
		}
		return kept[id]
	}
	out := *c
	out.Routes = make([]*Route, n)
	copy(out.Routes, c.Routes[:head])
	copy(out.Routes[n-tail:], c.Routes[end:])
	// The walk aligns ids with c's routes, in order: an id is c's next
	// route, or one of the few after it (those in between were deleted),
	// or it is out of line: appended, or moved. Aligned ids are unique, as
	// c's are, so a repeat has an occurrence out of line: only those are
	// kept, in unaligned, and checked against every id. A map of every id
	// cost a one-route write 5 ms at 30,000 routes.
	var unaligned map[string]int
	// The router edits: a changed route in its place, routes deleted
	// anywhere, routes appended after the last aligned one. A route that
	// moved (out of line, not appended) shifts the order, so the table is
	// compiled whole.
	var edits []router.Edit
	// An edit costs the table about four times what compiling a route
	// does (a shard copied, the old spec found): past a quarter of the
	// routes, compiling them all is the cheaper way (a file that changed
	// every route but one: 30 ms and 10 MB of edits, 8 ms compiled, at
	// 30,000).
	whole := c.table == nil || len(changed.Routes) > n/4
	j := head // c's next route to align with
	appending := false
	for k, id := range ids {
		i := head + k // the route's index in the result
		at := -1
		if !appending {
			at = alignAt(c.Routes[:end], j, id)
		}
		if at >= 0 {
			for d := j; d < at; d++ {
				old := c.Routes[d].routerSpec()
				edits = append(edits, router.Edit{Index: d, Old: &old, Remove: true})
			}
			j = at + 1
			r := freshOf(id)
			if r == nil {
				r = c.Routes[at]
			} else if !whole {
				old := c.Routes[at].routerSpec()
				edits = append(edits, router.Edit{Index: at, Old: &old, New: r.routerSpec()})
			}
			out.Routes[i] = r
			continue
		}
		if _, dup := unaligned[id]; dup {
			return nil, fmt.Errorf("config: splice: route %q repeated", id)
		}
		if unaligned == nil {
			unaligned = map[string]int{}
		}
		unaligned[id] = i
		r := freshOf(id)
		if r == nil {
			r = keptOf(id)
			whole = true // a route that moved
		} else if appending = true; !whole {
			edits = append(edits, router.Edit{Index: i, New: r.routerSpec()})
		}
		if r == nil {
			return nil, fmt.Errorf("config: splice: route %q missing", id)
		}
		out.Routes[i] = r
	}
	if appending && tail > 0 {
		whole = true // appended before the kept tail: not after every route
	}
	for d := j; d < end; d++ { // the last ones before the kept tail, deleted
		old := c.Routes[d].routerSpec()
		edits = append(edits, router.Edit{Index: d, Old: &old, Remove: true})
	}
	if id := repeatedOf(out.Routes, unaligned); id != "" {
		return nil, fmt.Errorf("config: splice: route %q repeated", id)
	}
	if !whole && len(edits) <= n/4 { // many deleted: as many changed
		if table, ok := c.table.With(edits); ok {
			out.table = table
			return &out, nil
		}
	}
	table, err := router.Compile(out.RouterSpecs())
	if err != nil {
		return nil, fmt.Errorf("config: splice: %w", err)
	}
	out.table = table
	return &out, nil
}

// freshIndex finds changed's route of an id, or nil. changed holds the
// few routes a write changed, most often one: a scan of them beats a map,
// which cost a lookup for each of 30,000 kept routes; many are put in one.
func freshIndex(changed *Config) func(id string) *Route {
	if len(changed.Routes) > 8 {
		m := make(map[string]*Route, len(changed.Routes))
		for _, r := range changed.Routes {
			m[r.ID] = r
		}
		return func(id string) *Route { return m[id] }
	}
	return func(id string) *Route {
		for _, r := range changed.Routes {
			if r.ID == id {
				return r
			}
		}
		return nil
	}
}

// alignLookahead is how many of c's routes past the next one the walk
// of WithRoutes looks through for an id: the routes one write deletes.
const alignLookahead = 16

// alignAt is the index of id among routes[j:j+1+alignLookahead], or -1.
func alignAt(routes []*Route, j int, id string) int {
	for k := j; k < len(routes) && k <= j+alignLookahead; k++ {
		if routes[k].ID == id {
			return k
		}
	}
	return -1
}

// repeatedOf is an id of unaligned (ids out of line, by their index in
// routes) that routes also holds at another index, or "".
func repeatedOf(routes []*Route, unaligned map[string]int) string {
	if len(unaligned) <= 16 { // a few writes: a scan each beats a map of every id
		for id, at := range unaligned {
			for k, r := range routes {
				if k != at && r.ID == id {
					return id
				}
			}
		}
		return ""
	}
	at := make(map[string]int, len(routes))
	for k, r := range routes {
		if first, dup := at[r.ID]; dup {
			return routes[first].ID
		}
		at[r.ID] = k
	}
	return ""
}

// sameIDs reports whether routes are ids, in order.
func sameIDs(routes []*Route, ids []string) bool {
	if len(routes) != len(ids) {
		return false
	}
	for i := range routes {
		if routes[i].ID != ids[i] {
			return false
		}
	}
	return true
}

// SameSettings reports whether c and o are, by construction, one parse's
// settings and upstreams: one is the other, or WithRoutes made one from
// the other (or both from a third). Everything but the routes is then
// equal, and what a compile built from it can be kept.
func (c *Config) SameSettings(o *Config) bool {
	return c.filterGlobals != nil && sameMap(c.filterGlobals, o.filterGlobals) &&
		len(c.Upstreams) == len(o.Upstreams) && (len(c.Upstreams) == 0 || &c.Upstreams[0] == &o.Upstreams[0])
}

// SameRoute reports whether r and o are, by construction, one parse's
// route: WithRoutes shares the routes it keeps (or a copy of one, which
// shares what it holds). Nothing changes a parsed route, so what a compile
// built from one holds for the other.
func (r *Route) SameRoute(o *Route) bool {
	return r == o || r.ID == o.ID && r.filterConfigs != nil && sameMap(r.filterConfigs, o.filterConfigs)
}

func sameMap[V any](a, b map[string]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// RouterTable is the routes' router table: the one Parse (or WithRoutes)
// compiled while validating them, or compiled now for a Config that did
// not come from Parse. Router indexes are route indexes.
func (c *Config) RouterTable() (*router.Table, error) {
	if c.table != nil {
		return c.table, nil
	}
	return router.Compile(c.RouterSpecs())
}

// RouteTwins tells whether routes of two configs that share their
// settings (SameSettings) differ at most in what they match: their path,
// prefix, host and methods, which only the router table reads. The engine
// keeps the compiled state of such a route (chain, policies, metrics) as
// it keeps a SameRoute's: a file reload that moved every route to new
// paths otherwise built 30,000 chains again. The filter configs and the
// breaker and isolation settings most routes share (one parse's
// defaults) are compared once per pair of parses; the limits come from
// the filter configs. Not safe for concurrent use.
type RouteTwins struct {
	same map[[2]unsafe.Pointer]bool // by the two routes' shared objects
}

// Twins reports whether a and b differ at most in what they match.
func (t *RouteTwins) Twins(a, b *Route) bool {
	if a.ID != b.ID || a.Upstream != b.Upstream || a.ConnectTimeout != b.ConnectTimeout ||
		a.ResponseTimeout != b.ResponseTimeout || a.EscapedSlashes != b.EscapedSlashes || a.TLS != b.TLS ||
		!slices.Equal(a.Upgrade, b.Upgrade) || !slices.Equal(a.Filters, b.Filters) ||
		!slices.Equal(a.DisableFilters, b.DisableFilters) || (a.WebSocket == nil) != (b.WebSocket == nil) ||
		a.WebSocket != nil && *a.WebSocket != *b.WebSocket || !sameRetry(&a.Retry, &b.Retry) {
		return false
	}
	return t.equal(reflect.ValueOf(a.filterConfigs).UnsafePointer(), reflect.ValueOf(b.filterConfigs).UnsafePointer(),
		a.filterConfigs, b.filterConfigs) &&
		t.equal(unsafe.Pointer(a.CircuitBreaker), unsafe.Pointer(b.CircuitBreaker), a.CircuitBreaker, b.CircuitBreaker) &&
		t.equal(unsafe.Pointer(a.Isolation), unsafe.Pointer(b.Isolation), a.Isolation, b.Isolation)
}

// sameRetry is reflect.DeepEqual(a, b), without reflection: at 30,000
// routes DeepEqual of each pair cost a reload 15 ms.
func sameRetry(a, b *Retry) bool {
	return a.Attempts == b.Attempts && a.PerTryTimeout == b.PerTryTimeout &&
		(a.Methods == nil) == (b.Methods == nil) && slices.Equal(a.Methods, b.Methods) &&
		(a.OnStatus == nil) == (b.OnStatus == nil) && slices.Equal(a.OnStatus, b.OnStatus)
}

// equal is reflect.DeepEqual(x, y), remembered by the objects' addresses
// pa and pb (parsed configs are never modified).
func (t *RouteTwins) equal(pa, pb unsafe.Pointer, x, y any) bool {
	if pa == pb {
		return true
	}
	k := [2]unsafe.Pointer{pa, pb}
	if eq, ok := t.same[k]; ok {
		return eq
	}
	eq := reflect.DeepEqual(x, y)
	if t.same == nil {
		t.same = map[[2]unsafe.Pointer]bool{}
	}
	t.same[k] = eq
	return eq
}
