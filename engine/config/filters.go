// Filter configuration: which filters a route runs, in which order, and
// where each filter's own config lives. The filters' packages define,
// default and validate their configs; this file only holds and orders them
// (filters.Registered).

package config

import (
	"net/netip"
	"net/textproto"
	"reflect"
	"sort"
	"strings"
	"unsafe"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	_ "github.com/loopgate/loopgate/filters/builtin" // the filters that ship with Loopgate
)

// FilterGlobal returns the named filter's top-level config (decoded from
// the keys it owns, provisioned, and validated by Parse), or nil when the
// filter has none or is not registered. Its type is the filter package's:
// auth's is *auth.Global, ip_access's *access.IPLists.
func (c *Config) FilterGlobal(name string) filters.GlobalConfig { return c.filterGlobals[name] }

// FilterConfig returns the named filter's config on r, likewise: gray's is
// *transform.GrayRoute, whose Gray is nil when the route has no gray key.
func (r *Route) FilterConfig(name string) filters.RouteConfig { return r.filterConfigs[name] }

// TrustedPrefixes returns trusted_proxies as Validate parsed them, or nil
// before the config is validated (Parse validates).
func (c *Config) TrustedPrefixes() []netip.Prefix { return c.trusted }

// FilterOrder returns the order of the named filter: its filter_orders entry
// when there is one, else its registered default. ok is false for an
// unknown name. Safe for concurrent use on a Config nobody is modifying.
func (c *Config) FilterOrder(name string) (order int, ok bool) {
	reg, ok := filters.Lookup(name)
	if !ok {
		return 0, false
	}
	if o, set := c.FilterOrders[name]; set {
		return o, true
	}
	return reg.Order, true
}

// RouteFilters returns the names of the filters route i runs, in chain order
// (see Chain).
func (c *Config) RouteFilters(i int) []string { return c.Chain(c.Routes[i]) }

// Chain returns the names of the filters route r runs, in chain order
// (ascending FilterOrder):
//
//	filters - r.disable_filters + r.filters
//	        + the filters r's own options enable
//
// A filter's options are the keys it owns (filters.RouteConfig.EnabledBy):
// auth: required turns on auth, a section such as rewrite or gray turns on
// its filter, and an ip_allow/ip_deny list, global or the route's, turns on
// ip_access. A filter that acts only on its route keys
// (filters.Registration.NeedsRoute: limits, headers, rewrite, gray, hash)
// is left out without them, even when listed. Unknown names are left out
// too; Validate reports them. Safe for concurrent use on a Config nobody
// is modifying.
func (c *Config) Chain(r *Route) []string {
	on := make(map[string]bool, len(filters.Registered()))
	for _, n := range c.Filters {
		on[n] = true
	}
	for _, n := range r.DisableFilters {
		delete(on, n)
	}
	for _, n := range r.Filters {
		on[n] = true
	}
	enabled := c.optionFilters(r)
	for n := range enabled {
		on[n] = true
	}
	names := make([]string, 0, len(on))
	for n := range on {
		if reg, known := filters.Lookup(n); known && (!reg.NeedsRoute || enabled[n] != "") {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(a, b int) bool {
		oa, _ := c.FilterOrder(names[a])
		ob, _ := c.FilterOrder(names[b])
		return oa < ob || oa == ob && names[a] < names[b]
	})
	return names
}

// Chains answers Chain for many routes of one config, computing it once
// for all the routes that hold the same filter configs (one parse's
// defaults, shared by every route that sets no filter key) and list no
// filters or disable_filters of their own: their chains are the same. At
// 30,000 routes, Chain for each took a tenth of a reload. The slices it
// returns are shared between routes: not to be modified. Not safe for
// concurrent use.
type Chains struct {
	c     *Config
	known map[unsafe.Pointer]chainOf // by the routes' filter config map
}

// chainOf is what Chains knows of one set of filter configs.
type chainOf struct {
	names   []string          // Chain
	enabled map[string]string // optionFilters
}

// Chains returns a Chains for c's routes.
func (c *Config) Chains() *Chains { return &Chains{c: c} }

// Of is c.Chain(r).
func (m *Chains) Of(r *Route) []string { return m.of(r).names }

func (m *Chains) of(r *Route) chainOf {
	if len(r.Filters) > 0 || len(r.DisableFilters) > 0 || r.filterConfigs == nil {
		return chainOf{m.c.Chain(r), m.c.optionFilters(r)}
	}
	key := reflect.ValueOf(r.filterConfigs).UnsafePointer()
	if k, ok := m.known[key]; ok {
		return k
	}
	k := chainOf{m.c.Chain(r), m.c.optionFilters(r)}
	if m.known == nil {
		m.known = map[unsafe.Pointer]chainOf{}
	}
	m.known[key] = k
	return k
}

// optionFilters maps each filter r's options enable to the option that
// enables it, for Chain and for Validate's messages.
func (c *Config) optionFilters(r *Route) map[string]string {
	m := make(map[string]string)
	for _, reg := range filters.Registered() {
		rc := r.filterConfigs[reg.Name]
		if rc == nil {
			continue
		}
		if why := rc.EnabledBy(c.filterGlobals[reg.Name]); why != "" {
			m[reg.Name] = why
		}
	}
	return m
}

// defaultChain is filters when the config gives none: the registered
// filters marked Default, by order (request_id, ip_access, forwarded).
func defaultChain() []string {
	names := []string{}
	for _, reg := range filters.Registered() {
		if reg.Default {
			names = append(names, reg.Name)
		}
	}
	return names
}

// IdentityHeaderNames returns every header name the gateway manages as
// identity: those each filter's top-level config names
// (filters.IdentitySource: the enabled auth.identity_headers, then every
// auth.external.copy_headers entry), in canonical case, without duplicates
// (compared case-insensitively). The engine strips client-sent fields of
// these names from the upstream request on every route; the auth filters
// then set their verified values. Each call returns a new slice. Safe for
// concurrent use on a Config nobody is modifying.
func (c *Config) IdentityHeaderNames() []string {
	var names []string
	for _, reg := range filters.Registered() {
		src, ok := c.filterGlobals[reg.Name].(filters.IdentitySource)
		if !ok {
			continue
		}
		for _, n := range src.IdentityHeaders() {
			if n == "" {
				continue
			}
			n = textproto.CanonicalMIMEHeaderKey(n)
			dup := false
			for _, have := range names {
				dup = dup || strings.EqualFold(have, n)
			}
			if !dup {
				names = append(names, n)
			}
		}
	}
	return names
}

// applyFilterDefaults gives every registered filter its configs, at the top
// level and in every route (empty when the document had none of its keys),
// and lets each provision its defaults. It then collects each route's
// request limits from the filters that set them (Route.Limits).
func applyFilterDefaults(c *Config) {
	if c.Filters == nil {
		c.Filters = defaultChain()
	}
	if c.filterGlobals == nil {
		c.filterGlobals = map[string]filters.GlobalConfig{}
	}
	for _, reg := range filters.Registered() {
		if reg.Global == nil {
			continue
		}
		g := c.filterGlobals[reg.Name]
		if g == nil {
			g = reg.Global()
			c.filterGlobals[reg.Name] = g
		}
		g.Provision()
	}
	// A filter's route config that a route does not set is its default,
	// the same for every route: one per parse, shared, and one map of
	// them all for the routes that set none (most, in a large config).
	// A parsed config is never modified, so sharing is safe; it is per
	// parse, so Route.SameRoute still tells one parse's route from
	// another's.
	defaults := map[string]filters.RouteConfig{}
	for _, reg := range filters.Registered() {
		if reg.Route != nil {
			rc := reg.Route()
			rc.Provision()
			defaults[reg.Name] = rc
		}
	}
	for i := range c.Routes {
		r := c.Routes[i]
		own := len(r.filterConfigs) > 0
		if !own {
			r.filterConfigs = defaults
		}
		r.Limits = nil
		for _, reg := range filters.Registered() {
			if reg.Route == nil {
				continue
			}
			rc := r.filterConfigs[reg.Name]
			switch {
			case rc == nil:
				rc = defaults[reg.Name]
				r.filterConfigs[reg.Name] = rc
			case own:
				rc.Provision()
			}
			if rl, ok := rc.(filters.RequestLimiter); ok {
				if l, set := rl.RequestLimits(); set {
					r.Limits = tightest(r.Limits, l)
				}
			}
		}
	}
}

// tightest combines request limits: each field is the smaller of the set
// (non-zero) ones.
func tightest(have *codec.Limits, l codec.Limits) *codec.Limits {
	if have == nil {
		return &l
	}
	pick := func(a, b int64) int64 {
		if a == 0 || b != 0 && b < a {
			return b
		}
		return a
	}
	return &codec.Limits{
		MaxURIBytes:    int(pick(int64(have.MaxURIBytes), int64(l.MaxURIBytes))),
		MaxHeaderCount: int(pick(int64(have.MaxHeaderCount), int64(l.MaxHeaderCount))),
		MaxHeaderBytes: int(pick(int64(have.MaxHeaderBytes), int64(l.MaxHeaderBytes))),
		MaxBodyBytes:   pick(have.MaxBodyBytes, l.MaxBodyBytes),
	}
}
