// Validate's filter part: filter names and orders, trusted_proxies, and
// each filter's own configs, which their packages validate through
// filters.Check.

package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

// validateFilterConfig checks the top-level filter options, then each
// filter's top-level config, in filter order. It runs after the upstreams
// are checked, since a filter may name one (auth.external.upstream).
func (c *Config) validateFilterConfig(p *problems) {
	p.filterNames("filters", c.Filters)
	c.validateFilterOrders(p)
	c.trusted = c.check(p, nil).Prefixes("trusted_proxies", c.TrustedProxies)
	for _, reg := range filters.Registered() {
		if g := c.filterGlobals[reg.Name]; g != nil {
			g.Validate(c.check(p, nil))
		}
	}
}

// validateFilterOrders requires known names and unique final orders.
func (c *Config) validateFilterOrders(p *problems) {
	for _, name := range sortedKeys(c.FilterOrders) {
		if _, known := filters.Lookup(name); !known {
			p.add("filter_orders."+name, "unknown filter (want one of %s)", knownFilters())
		}
	}
	// Walk the filters by final order; a clash is reported at the
	// filter_orders entry that caused it.
	names := filterNamesByOrder(c)
	for i := 1; i < len(names); i++ {
		a, b := names[i-1], names[i]
		oa, _ := c.FilterOrder(a)
		ob, _ := c.FilterOrder(b)
		if oa != ob {
			continue
		}
		culprit, other := b, a
		if _, set := c.FilterOrders[b]; !set {
			culprit, other = a, b
		}
		p.add("filter_orders."+culprit, "order %d is also %s's; orders must be unique", ob, other)
	}
}

// validateRouteFilters checks one route's filter lists, then each filter's
// config on the route, in filter order.
// ch is the Check of every route's filters (routeChecks), pointed at
// this route.
func (c *Config) validateRouteFilters(p *problems, chains *Chains, ch *filters.Check, i int, path string, r *Route) {
	p.filterNames(path+".filters", r.Filters)
	p.filterNames(path+".disable_filters", r.DisableFilters)
	chain := chains.of(r)
	enabled := chain.enabled
	for j, n := range r.DisableFilters {
		jp := fmt.Sprintf("%s.disable_filters[%d]", path, j)
		if option, on := enabled[n]; on {
			p.add(jp, "%s is enabled by %s; remove one of them", n, option)
		}
		if slices.Contains(r.Filters, n) {
			p.add(jp, "%s is also in filters", n)
		}
	}
	*ch.Route = filters.RouteInfo{Index: i, ID: r.ID, Upstream: r.Upstream, Chain: chain.names}
	ch.Base = path
	for _, reg := range filters.Registered() {
		if rc := r.filterConfigs[reg.Name]; rc != nil {
			rc.Validate(ch)
		}
	}
}

// check returns a filters.Check that adds to p what a filter config
// reports, for the top-level keys (route nil) or a route's.
func (c *Config) check(p *problems, route *filters.RouteInfo) *filters.Check {
	return &filters.Check{Env: env{c}, Route: route, Report: func(path, reason string) {
		*p = append(*p, problem{path, reason})
	}}
}

// routeChecks is the one Check of every route's filters, which
// validateRouteFilters points at each route in turn: a Validate only
// reads its Check and reports through it, and one per route and filter
// was a tenth of validating 30,000 routes.
func (c *Config) routeChecks(p *problems) *filters.Check { return c.check(p, &filters.RouteInfo{}) }

// env answers a filter's Validate about the rest of the config.
type env struct{ c *Config }

var _ filters.Env = env{}

func (e env) HasUpstream(name string) bool { return e.c.findUpstream(name) != nil }

func (e env) Limits() codec.Limits {
	l := &e.c.Limits
	return codec.Limits{
		MaxURIBytes:    int(l.MaxURIBytes),
		MaxHeaderCount: l.MaxHeaderCount,
		MaxHeaderBytes: int(l.MaxHeaderBytes),
		MaxBodyBytes:   int64(l.MaxBodyBytes),
	}
}

func (e env) Global(filter string) filters.GlobalConfig { return e.c.filterGlobals[filter] }

func (e env) FirstRouteRunning(filter string) int {
	chains := e.c.Chains()
	for i := range e.c.Routes {
		if slices.Contains(chains.Of(e.c.Routes[i]), filter) {
			return i
		}
	}
	return -1
}

func (e env) IdentityHeaders() []string { return e.c.IdentityHeaderNames() }

// filterNames requires known, distinct filter names.
func (p *problems) filterNames(path string, names []string) {
	if len(names) == 0 {
		return // most routes list none
	}
	seen := make(map[string]int, len(names))
	for i, n := range names {
		ip := fmt.Sprintf("%s[%d]", path, i)
		if _, known := filters.Lookup(n); !known {
			p.add(ip, "unknown filter %q (want one of %s)", n, knownFilters())
		} else if j, dup := seen[n]; dup {
			p.add(ip, "%s is listed twice (also [%d])", n, j)
		} else {
			seen[n] = i
		}
	}
}

// knownFilters lists the registered filter names in default order, for
// messages.
func knownFilters() string {
	return strings.Join(filterNamesByOrder(&Config{}), ", ")
}

// filterNamesByOrder returns every registered filter name by c's final
// order, names that share an order alphabetically.
func filterNamesByOrder(c *Config) []string {
	var names []string
	for _, reg := range filters.Registered() {
		names = append(names, reg.Name)
	}
	sort.Strings(names)
	sort.SliceStable(names, func(i, j int) bool {
		oi, _ := c.FilterOrder(names[i])
		oj, _ := c.FilterOrder(names[j])
		return oi < oj
	})
	return names
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
