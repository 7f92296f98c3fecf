// Test helpers: the filters' configs inside a Config, by their own types.

package config

import (
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
	"github.com/loopgate/loopgate/filters/auth"
	"github.com/loopgate/loopgate/filters/transform"
)

// authOf is c's auth section.
func authOf(c *Config) *auth.Config { return &c.FilterGlobal(auth.Name).(*auth.Global).Auth }

// ipListsOf is c's global ip_allow and ip_deny.
func ipListsOf(c *Config) *access.IPLists {
	return c.FilterGlobal(access.NameIPAccess).(*access.IPLists)
}

// routeConfig is route r's config for the named filter, as its type T.
func routeConfig[T filters.RouteConfig](r *Route, filter string) T {
	return r.FilterConfig(filter).(T)
}

// withoutFilters returns a copy of c without the filters' configs and
// what Validate parsed, so the gateway's own options compare with
// reflect.DeepEqual.
func withoutFilters(c *Config) *Config {
	cp := *c
	cp.filterGlobals, cp.trusted, cp.table = nil, nil, nil
	cp.Routes = nil
	for _, r := range c.Routes {
		rc := *r // c's routes are shared, never modified
		rc.filterConfigs = nil
		cp.Routes = append(cp.Routes, &rc)
	}
	return &cp
}

// provisioned returns a config for every registered filter of the kind
// newConfig makes (Registration.Global or Route), provisioned: the
// configs of a document without any filter key. set replaces some of them.
func provisioned[C interface{ Provision() }](newConfig func(*filters.Registration) func() C, set map[string]C) map[string]C {
	out := map[string]C{}
	for _, reg := range filters.Registered() {
		make := newConfig(reg)
		if make == nil {
			continue
		}
		c, ok := set[reg.Name]
		if !ok {
			c = make()
		}
		c.Provision()
		out[reg.Name] = c
	}
	return out
}

func globalsWith(set map[string]filters.GlobalConfig) map[string]filters.GlobalConfig {
	return provisioned(func(r *filters.Registration) func() filters.GlobalConfig { return r.Global }, set)
}

func routeConfigsWith(set map[string]filters.RouteConfig) map[string]filters.RouteConfig {
	return provisioned(func(r *filters.Registration) func() filters.RouteConfig { return r.Route }, set)
}

// sameOptions fails t unless got and want, filter configs by name, hold
// the same options: they are compared as YAML, so only the options count,
// not what Validate compiled from them.
func sameOptions[C any](t *testing.T, where string, got, want map[string]C) {
	t.Helper()
	text := func(m map[string]C) string {
		out, err := yaml.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	if g, w := text(got), text(want); g != w {
		t.Errorf("%s: filter options\n%s\nwant\n%s", where, g, w)
	}
}

// grayOf is route r's gray section, nil when it has none.
func grayOf(r *Route) *transform.Gray {
	return routeConfig[*transform.GrayRoute](r, transform.NameGray).Gray
}
