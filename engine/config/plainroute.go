// Routes of the plainest kind, taken as decoded values instead of YAML.

package config

import (
	"fmt"

	"github.com/loopgate/loopgate/filters"
)

// PlainRoute reports whether v, a route as the admin API's documents hold
// it (confstore: YAML or JSON decoded into maps, lists and scalars), is
// one ParseWithRoutes takes: every key a string-valued one of the route's
// own (id, path, prefix, host, upstream, tls, escaped_slashes) or a list
// of strings (methods, upgrade, filters, disable_filters), each string of
// printable ASCII. No filter's key, no number, no section: those go
// through the YAML decoder.
func PlainRoute(v map[string]any) bool { return v != nil && decodePlainRoute(v, nil) }

// plainRoute is v as decodeDocument decodes the same route from YAML, in
// a route of slab.
func plainRoute(v map[string]any, slab *routeSlab) (*Route, bool) {
	r := slab.next()
	if !decodePlainRoute(v, r) {
		return nil, false
	}
	r.filterConfigs = map[string]filters.RouteConfig{} // as decodeDocument leaves a route with no filter key
	return r, true
}

// decodePlainRoute decodes v into r, or only checks it when r is nil
// (PlainRoute, for every changed route of a splice, allocates nothing).
func decodePlainRoute(v map[string]any, r *Route) bool {
	var scratch Route // a check's target, on the stack
	if r == nil {
		r = &scratch
	}
	check := r == &scratch
	for k, val := range v {
		var s *string
		var list *[]string
		switch k {
		case "id":
			s = &r.ID
		case "path":
			s = &r.Path
		case "prefix":
			s = &r.Prefix
		case "host":
			s = &r.Host
		case "upstream":
			s = &r.Upstream
		case "tls":
			s = &r.TLS
		case "escaped_slashes":
			s = &r.EscapedSlashes
		case "methods":
			list = &r.Methods
		case "upgrade":
			list = &r.Upgrade
		case "filters":
			list = &r.Filters
		case "disable_filters":
			list = &r.DisableFilters
		default:
			return false
		}
		if s != nil {
			str, ok := val.(string)
			if !ok || !printable(str) {
				return false
			}
			*s = str
			continue
		}
		items, ok := val.([]any)
		if !ok {
			return false
		}
		for _, it := range items {
			if str, ok := it.(string); !ok || !printable(str) {
				return false
			}
		}
		if check {
			continue
		}
		out := make([]string, len(items))
		for i, it := range items {
			out[i] = it.(string)
		}
		*list = out
	}
	return true
}

// printable reports whether s is printable ASCII: written as JSON and
// read back as YAML, such a string is itself, with no escape or line
// break the YAML reader could fold.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// ParseWithRoutes is Parse of data with routes, each a PlainRoute, added
// after the routes data lists: the same Config, defaults and validation
// as Parse gives for the document that lists them all, without decoding
// those routes as YAML (at 30,000 changed routes the YAML decoder and its
// checks took most of a reload). An error names those routes by their
// place in the whole list, without a line; a route that is not a
// PlainRoute is refused.
func ParseWithRoutes(data []byte, routes []map[string]any) (*Config, error) {
	c, _, err := parseWithRoutes(data, routes)
	return c, err
}

// parseWithRoutes is ParseWithRoutes, also reporting whether data set
// nothing.
func parseWithRoutes(data []byte, routes []map[string]any) (c *Config, empty bool, err error) {
	c = &Config{}
	if empty, err = decodeStrict(data, c); err != nil {
		return nil, false, err
	}
	have := len(c.Routes)
	c.Routes = append(c.Routes, make([]*Route, len(routes))...)
	slab := newRouteSlab(len(routes))
	for i, v := range routes {
		r, ok := plainRoute(v, slab)
		if !ok {
			return nil, false, fmt.Errorf("config: routes[%d]: not a plain route (see PlainRoute); parse the whole document", have+i)
		}
		c.Routes[have+i] = r
	}
	applyDefaults(c)
	if p := c.problems(); len(p) > 0 {
		return nil, false, p.err(c, indexLines(data))
	}
	return c, empty, nil
}
