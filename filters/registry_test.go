// Tests that a filter registered from outside the tree, here from this test
// package, is configured like a built-in one: engine/config decodes its keys
// strictly, defaults and validates them through it, with lines and route
// ids in every error, and puts it in route chains by its order.

package filters_test

import (
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
)

// stamp is the test's filter: it sets a header on the upstream request,
// named and valued by the route's stamp section, the value prefixed by the
// top-level stamp_prefix.
type stamp struct {
	filters.Base
	name  string
	value []byte
}

func (s *stamp) Request(x *filters.Exchange) filters.Verdict {
	x.ReqEdits.AddSet(s.name, s.value)
	return filters.Continue
}

// stampGlobal is stamp's top-level key.
type stampGlobal struct {
	Prefix string `yaml:"stamp_prefix,omitempty"` // default "stamp-"
}

func (g *stampGlobal) Provision()                { filters.SetDefault(&g.Prefix, "stamp-") }
func (g *stampGlobal) Validate(c *filters.Check) {}

// stampRoute is stamp's route key.
type stampRoute struct {
	Stamp *stampSection `yaml:"stamp,omitempty"`
}

type stampSection struct {
	Header string `yaml:"header"` // required
	Value  string `yaml:"value"`  // default "on"
	Times  int    `yaml:"times"`  // at least 1; default 1
}

func (r *stampRoute) Provision() {
	if r.Stamp != nil {
		filters.SetDefault(&r.Stamp.Value, "on")
		filters.SetDefault(&r.Stamp.Times, 1)
	}
}

func (r *stampRoute) Validate(c *filters.Check) {
	if r.Stamp == nil {
		return
	}
	c.EditableHeader("stamp.header", r.Stamp.Header)
	filters.Positive(c, "stamp.times", r.Stamp.Times)
}

func (r *stampRoute) EnabledBy(filters.GlobalConfig) string {
	if r.Stamp != nil {
		return "stamp"
	}
	return ""
}

func init() {
	filters.Register(filters.Registration{
		Name: "stamp", Order: 450, NeedsRoute: true,
		Global: func() filters.GlobalConfig { return new(stampGlobal) },
		Route:  func() filters.RouteConfig { return new(stampRoute) },
		New: func(b *filters.Build) (filters.Filter, error) {
			s := b.Config.(*stampRoute).Stamp
			return &stamp{Base: filters.Base{FilterName: b.Name, FilterOrder: b.Order}, name: s.Header,
				value: []byte(b.Global.(*stampGlobal).Prefix + s.Value)}, nil
		},
	})
}

// stampYAML has one route with a stamp section, one without.
const stampYAML = `upstreams:
  - {name: u, nodes: ["127.0.0.1:9001"]}
stamp_prefix: "x-"
routes:
  - id: api
    path: /a
    upstream: u
    stamp: {header: X-Stamp}
  - id: plain
    path: /b
    upstream: u
    filters: [stamp]
`

func TestRegisteredFilterDecodes(t *testing.T) {
	c, err := config.Parse([]byte(stampYAML))
	if err != nil {
		t.Fatal(err)
	}
	if g := c.FilterGlobal("stamp").(*stampGlobal); g.Prefix != "x-" {
		t.Errorf("stamp_prefix = %q", g.Prefix)
	}
	if s := c.Routes[0].FilterConfig("stamp").(*stampRoute).Stamp; s == nil || *s != (stampSection{Header: "X-Stamp", Value: "on", Times: 1}) {
		t.Errorf("routes[0].stamp = %+v, want the header and the defaults", s)
	}
	// In the chain by its order (headers 400 < stamp 450 < rewrite 500),
	// and left out where it is listed but has no section (NeedsRoute).
	want := []string{"request_id", "ip_access", "stamp", "forwarded"}
	if got := c.RouteFilters(0); !reflect.DeepEqual(got, want) {
		t.Errorf("RouteFilters(0) = %v, want %v", got, want)
	}
	if got := c.RouteFilters(1); strings.Contains(strings.Join(got, " "), "stamp") {
		t.Errorf("RouteFilters(1) = %v: stamp without its section", got)
	}
	if o, ok := c.FilterOrder("stamp"); !ok || o != 450 {
		t.Errorf("FilterOrder(stamp) = %d, %v", o, ok)
	}
	// Written back as it was read.
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	again, err := config.Parse(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !reflect.DeepEqual(again, c) {
		t.Errorf("round trip changed the config:\n%s", out)
	}
}

func TestRegisteredFilterErrors(t *testing.T) {
	route := "upstreams:\n  - {name: u, nodes: [\"127.0.0.1:9001\"]}\nroutes:\n  - id: api\n    path: /a\n    upstream: u\n"
	for _, c := range []struct{ yaml, want string }{
		// Decoding is strict: unknown keys and coerced scalars are refused.
		{route + "    stamp: {header: X-A, colour: red}\n", "config: routes[0].stamp.colour: unknown field (line 7)"},
		{route + "    stamp: {header: X-A, times: 1.5}\n", "config: routes[0].stamp.times: want an integer, got 1.5 (line 7)"},
		{route + "    stamp: [X-A]\n", "config: routes[0].stamp: want a mapping of fields, got a list (line 7)"},
		{"stamp_prefix: [a]\n", "config: stamp_prefix: want a string, got a list (line 1)"},
		// Validation names the line and the route.
		{route + "    stamp: {header: \"X A\"}\n", `config: line 7: routes[0] (id "api").stamp.header: "X A" is not a valid header name`},
		{route + "    stamp:\n      header: X-A\n      times: -2\n", `config: line 9: routes[0] (id "api").stamp.times: must be positive, got -2`},
		{route + "    stamp: {header: Connection}\n",
			`config: line 7: routes[0] (id "api").stamp.header: "Connection" is managed by the proxy: framing and hop-by-hop headers cannot be edited`},
		// The generic rules know it by name.
		{route + "    stamp: {header: X-A}\n    disable_filters: [stamp]\n",
			`config: line 8: routes[0] (id "api").disable_filters[0]: stamp is enabled by stamp; remove one of them`},
		{"filter_orders: {stamp: 300}\n", "config: line 1: filter_orders.stamp: order 300 is also auth's; orders must be unique"},
	} {
		_, err := config.Parse([]byte(c.yaml))
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q)\n got: %v\nwant: %s", c.yaml, err, c.want)
		}
	}
}

// A key a filter owns is its alone: registering it twice is a programming
// error, caught when the second package initialises.
func TestRegisterRefusesClashes(t *testing.T) {
	for name, reg := range map[string]filters.Registration{
		"name":      {Name: "stamp", Order: 451, New: func(*filters.Build) (filters.Filter, error) { return nil, nil }},
		"order":     {Name: "stamp2", Order: 450, New: func(*filters.Build) (filters.Filter, error) { return nil, nil }},
		"route key": {Name: "stamp3", Order: 452, Route: func() filters.RouteConfig { return new(stampRoute) }, New: func(*filters.Build) (filters.Filter, error) { return nil, nil }},
		"no New":    {Name: "stamp4", Order: 453},
		"the gateway's route key": {Name: "stamp5", Order: 455, Route: func() filters.RouteConfig { return new(upstreamRoute) },
			New: func(*filters.Build) (filters.Filter, error) { return nil, nil }},
		"bad name": {Name: "Stamp", Order: 454, New: func(*filters.Build) (filters.Filter, error) { return nil, nil }},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s clash: Register did not panic", name)
				}
			}()
			filters.Register(reg)
		}()
	}
	for _, name := range []string{"stamp2", "stamp3", "stamp5"} {
		if _, ok := filters.Lookup(name); ok {
			t.Errorf("the refused registration %s was kept", name)
		}
	}
	if filters.RouteKeyOwner("upstream") != nil {
		t.Error("a route's upstream key is the gateway's, yet has a filter owner")
	}
}

// upstreamRoute claims a key of the gateway's own routes.
type upstreamRoute struct {
	Upstream string `yaml:"upstream"`
}

func (*upstreamRoute) Provision()                            {}
func (*upstreamRoute) Validate(*filters.Check)               {}
func (*upstreamRoute) EnabledBy(filters.GlobalConfig) string { return "" }
