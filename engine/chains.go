// Building each route's filter chain from the config, through the filter
// registry.

package engine

import (
	"fmt"
	"net/netip"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
)

// chainBuilder holds what every route's chain shares: what each filter's
// Prepare built, the services filters borrow, and the parsed trusted
// proxies. It knows no filter's config: each filter builds itself from its
// own (filters.Registration.New).
type chainBuilder struct {
	cfg      *config.Config
	chains   *config.Chains // each route's filter names
	loops    int
	groups   map[string]int    // upstream group by name, for filters that route (gray, external_auth)
	trusted  []netip.Prefix    // trusted_proxies, for the client IP
	shared   map[string]any    // what each filter's Prepare built, by filter name
	services *filters.Services // the server's filter-owned objects (services.go)

	// made holds each filters.Registration.RouteIndependent filter built,
	// by filter and route config instance, for the next route given the
	// same instance, with its number in the order they were made.
	made map[madeKey]madeFilter

	// shared holds the chains of routes whose filters are all lent (made),
	// by the made filters' numbers: every route of the same filters, as
	// most routes of a large config are, runs one chain. A chain holds no
	// route's state (its stats are the route's, filters.StatSet).
	sharedChains map[string]sharedChain
}

// madeFilter is a route-independent filter and its number in made.
type madeFilter struct {
	f filters.Filter
	n int
}

// sharedChain is a chain of lent filters, and whether one of them was
// built on what its Prepare made.
type sharedChain struct {
	chain    *filters.Chain
	prepared bool
}

// madeKey names a route-independent filter built for a config instance
// (nil for a filter with no route config).
type madeKey struct {
	filter string
	config filters.RouteConfig
}

// newChainBuilder takes the state that outlives a reload from kept (the
// server's), so chains compiled for a new config share it.
func newChainBuilder(cfg *config.Config, loops int, groups map[string]int, kept *durable) (*chainBuilder, error) {
	b := &chainBuilder{cfg: cfg, chains: cfg.Chains(), loops: loops, groups: groups, trusted: cfg.TrustedPrefixes(),
		shared: map[string]any{}, services: &kept.services.byType}
	for _, f := range filters.Registered() {
		if f.Prepare == nil {
			continue
		}
		v, err := f.Prepare(b.build(f, nil))
		if err != nil {
			return nil, fmt.Errorf("engine: %s: %w", f.Name, err)
		}
		b.shared[f.Name] = v
	}
	return b, nil
}

// build is what filter f's Prepare (r nil) or New for route r gets.
func (b *chainBuilder) build(f *filters.Registration, r *config.Route) *filters.Build {
	order, _ := b.cfg.FilterOrder(f.Name)
	fb := &filters.Build{
		Name: f.Name, Order: order, Loops: b.loops,
		Global:   b.cfg.FilterGlobal(f.Name),
		Trusted:  b.trusted,
		Upstream: b.group,
		Globals:  b.cfg.FilterGlobal,
		Services: b.services,
	}
	if r != nil {
		fb.RouteID, fb.Config, fb.Shared = r.ID, r.FilterConfig(f.Name), b.shared[f.Name]
		fb.Nodes = b.cfg.NodeAddrs(r.Upstream)
	}
	return fb
}

// group resolves an upstream group by name.
func (b *chainBuilder) group(name string) (int, bool) {
	g, ok := b.groups[name]
	return g, ok
}

// chain returns the route's chain, or nil when it runs no filter: each
// filter config.Chain names for it, built by its registration. prepared
// reports whether one of them was built on what its Prepare made.
func (b *chainBuilder) chain(r *config.Route) (chain *filters.Chain, prepared bool, err error) {
	var fs []filters.Filter
	var key [filters.MaxChain * 2]byte // the lent filters' numbers, two bytes each
	keyLen, lent := 0, true
	for _, name := range b.chains.Of(r) {
		reg, _ := filters.Lookup(name) // Chain names registered filters only
		f, n, err := b.filter(reg, r)
		if err != nil {
			return nil, false, fmt.Errorf("engine: route %q: %s: %w", r.ID, name, err)
		}
		if f == nil {
			continue
		}
		fs = append(fs, f)
		prepared = prepared || reg.Prepare != nil
		if lent = lent && n >= 0 && n <= 0xffff && keyLen+2 <= len(key); lent {
			key[keyLen], key[keyLen+1] = byte(n), byte(n>>8)
			keyLen += 2
		}
	}
	if len(fs) == 0 {
		return nil, false, nil
	}
	if lent {
		if sc, ok := b.sharedChains[string(key[:keyLen])]; ok {
			return sc.chain, sc.prepared, nil
		}
	}
	if chain, err = filters.NewSharedChain(fs, b.loops); err != nil {
		return nil, false, err
	}
	if lent {
		if b.sharedChains == nil {
			b.sharedChains = map[string]sharedChain{}
		}
		b.sharedChains[string(key[:keyLen])] = sharedChain{chain, prepared}
	}
	return chain, prepared, nil
}

// filter builds reg's filter for route r, or lends the one built for
// another route with the same config instance when reg is
// RouteIndependent; n is a lent filter's number (madeFilter), -1 for one
// built for r alone.
func (b *chainBuilder) filter(reg *filters.Registration, r *config.Route) (f filters.Filter, n int, err error) {
	if !reg.RouteIndependent {
		f, err = reg.New(b.build(reg, r))
		return f, -1, err
	}
	k := madeKey{reg.Name, r.FilterConfig(reg.Name)}
	if m, ok := b.made[k]; ok {
		return m.f, m.n, nil
	}
	if f, err = reg.New(b.build(reg, r)); err != nil {
		return nil, -1, err
	}
	if b.made == nil {
		b.made = map[madeKey]madeFilter{}
	}
	n = len(b.made)
	b.made[k] = madeFilter{f, n}
	return f, n, nil
}
