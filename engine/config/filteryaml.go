// The YAML side of filter configs: which keys belong to which filter,
// decoding them into the filter's own types, and writing them back.

package config

import (
	"reflect"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/loopgate/loopgate/filters"
)

var (
	configType = reflect.TypeFor[Config]()
	routeType  = reflect.TypeFor[Route]()
)

// The gateway's own keys are no filter's: a filter claiming one would be
// hidden by them.
func init() { filters.ReserveKeys(yamlKeys(configType), yamlKeys(routeType)) }

// yamlKeys lists the keys of struct type t.
func yamlKeys(t reflect.Type) []string {
	var keys []string
	for i := range t.NumField() {
		if key, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); key != "" && key != "-" {
			keys = append(keys, key)
		}
	}
	return keys
}

// filterField finds the key of a top-level or route mapping that a filter
// owns (filters.GlobalKeyOwner, RouteKeyOwner), as the field of the
// filter's config type, so checkNode can vet it like the gateway's own.
func filterField(t reflect.Type, key string) (reflect.StructField, bool) {
	var cfg any
	switch t {
	case configType:
		if reg := filters.GlobalKeyOwner(key); reg != nil {
			cfg = reg.Global()
		}
	case routeType:
		if reg := filters.RouteKeyOwner(key); reg != nil {
			cfg = reg.Route()
		}
	}
	if cfg == nil {
		return reflect.StructField{}, false
	}
	return fieldByTag(reflect.TypeOf(cfg).Elem(), key)
}

// decodeDocument decodes root, the document's top node, into c: the
// gateway's own keys into c's fields, and the keys each filter owns, at
// the top level and in each route, into that filter's config. checkNode
// has vetted every key and scalar already; what can still fail here (a
// key written twice) fails with the decoder's message.
func decodeDocument(root *yaml.Node, c *Config) error {
	core, globals := splitFilterKeys(root, filters.GlobalKeyOwner)
	var routeKeys []map[string]*yaml.Node
	if i := keyIndex(core, "routes"); i >= 0 && core.Kind == yaml.MappingNode {
		if seq := resolve(core.Content[i+1]); seq.Kind == yaml.SequenceNode {
			stripped := *seq
			stripped.Content = make([]*yaml.Node, len(seq.Content))
			for j, item := range seq.Content {
				var own map[string]*yaml.Node
				stripped.Content[j], own = splitFilterKeys(item, filters.RouteKeyOwner)
				routeKeys = append(routeKeys, own)
			}
			core.Content[i+1] = &stripped
		}
	}
	if err := core.Decode(c); err != nil {
		return err
	}
	c.filterGlobals = map[string]filters.GlobalConfig{}
	for name, n := range globals {
		reg, _ := filters.Lookup(name)
		g := reg.Global()
		if err := n.Decode(g); err != nil {
			return err
		}
		c.filterGlobals[name] = g
	}
	packRoutes(c.Routes) // a null item becomes a route of zero values, for Validate to name
	for i := range c.Routes {
		r := c.Routes[i]
		r.filterConfigs = map[string]filters.RouteConfig{}
		if i >= len(routeKeys) {
			continue
		}
		for name, n := range routeKeys[i] {
			reg, _ := filters.Lookup(name)
			rc := reg.Route()
			if err := n.Decode(rc); err != nil {
				return err
			}
			r.filterConfigs[name] = rc
		}
	}
	return nil
}

// splitFilterKeys separates the keys of mapping m that a filter owns (owner
// returns it) from the rest: core is a copy of m without them, and own
// holds, per filter name, a mapping of that filter's keys. Merge keys
// (<<) are expanded first, explicit keys winning, so a filter key reached
// through an alias still goes to its filter. A node that is not a mapping
// is returned as it is, for the decoder to refuse.
func splitFilterKeys(m *yaml.Node, owner func(key string) *filters.Registration) (core *yaml.Node, own map[string]*yaml.Node) {
	m = resolve(m)
	if m.Kind != yaml.MappingNode {
		return m, nil
	}
	stripped := *m
	stripped.Content = nil
	for _, kv := range mappingPairs(m) {
		reg := owner(kv[0].Value)
		if reg == nil {
			stripped.Content = append(stripped.Content, kv[0], kv[1])
			continue
		}
		if own == nil {
			own = map[string]*yaml.Node{}
		}
		n := own[reg.Name]
		if n == nil {
			n = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: m.Line, Column: m.Column}
			own[reg.Name] = n
		}
		n.Content = append(n.Content, kv[0], kv[1])
	}
	return &stripped, own
}

// mappingPairs returns m's key-value pairs with merge keys expanded, as
// YAML defines them: an explicit key overrides a merged one, and of the
// mappings merged, an earlier one overrides a later one.
func mappingPairs(m *yaml.Node) [][2]*yaml.Node {
	var explicit, merged [][2]*yaml.Node
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Tag != "!!merge" {
			explicit = append(explicit, [2]*yaml.Node{k, v})
			continue
		}
		v = resolve(v)
		sources := []*yaml.Node{v}
		if v.Kind == yaml.SequenceNode {
			sources = v.Content
		}
		for _, src := range sources {
			if src = resolve(src); src.Kind == yaml.MappingNode {
				merged = append(merged, mappingPairs(src)...)
			}
		}
	}
	if len(merged) == 0 {
		return explicit
	}
	seen := map[string]bool{}
	out := explicit
	for _, kv := range explicit {
		seen[kv[0].Value] = true
	}
	for _, kv := range merged {
		if !seen[kv[0].Value] {
			seen[kv[0].Value] = true
			out = append(out, kv)
		}
	}
	return out
}

// resolve follows an alias to the node it names.
func resolve(n *yaml.Node) *yaml.Node {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

// keyIndex returns the index in mapping m's Content of key, or -1.
func keyIndex(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return i
		}
	}
	return -1
}

// MarshalYAML writes c as Parse reads it: the gateway's own keys, then
// each filter's top-level keys, in filter order.
func (c Config) MarshalYAML() (any, error) {
	type plain Config // without methods, so encoding it does not recurse
	return withFilterKeys(plain(c), func(name string) any { return c.filterGlobals[name] })
}

// MarshalYAML writes r as Parse reads it: the route's own keys, then each
// filter's route keys, in filter order.
func (r Route) MarshalYAML() (any, error) {
	type plain Route
	return withFilterKeys(plain(r), func(name string) any { return r.filterConfigs[name] })
}

// withFilterKeys encodes v, a struct, and appends the keys of each
// registered filter's config that cfg returns.
func withFilterKeys(v any, cfg func(filter string) any) (*yaml.Node, error) {
	n := &yaml.Node{}
	if err := n.Encode(v); err != nil {
		return nil, err
	}
	for _, reg := range filters.Registered() {
		fc := cfg(reg.Name)
		if fc == nil || reflect.ValueOf(fc).IsNil() {
			continue
		}
		var keys yaml.Node
		if err := keys.Encode(fc); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, keys.Content...)
	}
	return n, nil
}
