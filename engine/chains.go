// Building each route's filter chain from the config.

package engine

import (
	"fmt"
	"net/netip"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
	"github.com/loopgate/loopgate/filters/auth"
	"github.com/loopgate/loopgate/filters/transform"
)

// chainBuilder holds what every route's chain shares: parsed lists, the
// auth verifier, and the server-owned ban list, revocations and stats.
type chainBuilder struct {
	cfg                  *config.Config
	loops                int
	groups               map[string]int
	orders               map[string]int
	trusted, allow, deny []netip.Prefix
	verifier             *auth.Verifier
	bans                 *access.Bans
	reg                  *registry // where each route's filter stats live
}

// newChainBuilder takes the state that outlives a reload from kept (the
// server's), so chains compiled for a new config share it.
func newChainBuilder(cfg *config.Config, loops int, groups map[string]int, kept *durable) (*chainBuilder, error) {
	b := &chainBuilder{cfg: cfg, loops: loops, groups: groups, orders: map[string]int{}, bans: kept.bans, reg: kept.metrics}
	for name, o := range config.DefaultFilterOrders {
		b.orders[name] = o
	}
	for name, o := range cfg.FilterOrders {
		b.orders[name] = o
	}
	var err error
	if b.trusted, err = access.ParsePrefixes(cfg.TrustedProxies); err != nil {
		return nil, fmt.Errorf("engine: trusted_proxies: %w", err)
	}
	if b.allow, err = access.ParsePrefixes(cfg.IPAllow); err != nil {
		return nil, fmt.Errorf("engine: ip_allow: %w", err)
	}
	if b.deny, err = access.ParsePrefixes(cfg.IPDeny); err != nil {
		return nil, fmt.Errorf("engine: ip_deny: %w", err)
	}
	if b.verifier, err = auth.NewVerifier(&cfg.Auth, loops, kept.revoked); err != nil {
		return nil, fmt.Errorf("engine: auth: %w", err)
	}
	return b, nil
}

// chain returns the route's chain, or nil when it runs no filter. It is the
// global list plus the route's additions minus its opt-outs, plus every
// filter the route's own options turn on.
func (b *chainBuilder) chain(r *config.Route) (*filters.Chain, error) {
	want := map[string]bool{}
	for _, n := range b.cfg.Filters {
		want[n] = true
	}
	for _, n := range r.DisableFilters {
		delete(want, n)
	}
	for _, n := range r.Filters {
		want[n] = true
	}
	want[config.FilterAuth] = want[config.FilterAuth] || r.Auth == "required"
	want[config.FilterExternalAuth] = want[config.FilterExternalAuth] || r.ExternalAuth
	want[config.FilterIPAccess] = want[config.FilterIPAccess] || len(b.allow)+len(b.deny)+len(r.IPAllow)+len(r.IPDeny) > 0
	want[config.FilterLimits] = want[config.FilterLimits] || r.Limits != nil
	want[config.FilterHeaders] = want[config.FilterHeaders] || r.RequestHeaders != nil || r.ResponseHeaders != nil
	want[config.FilterRewrite] = want[config.FilterRewrite] || r.Rewrite != nil
	want[config.FilterGray] = want[config.FilterGray] || r.Gray != nil
	want[config.FilterHash] = want[config.FilterHash] || r.Hash != nil

	var fs []filters.Filter
	for name, on := range want {
		if !on {
			continue
		}
		f, err := b.filter(name, r)
		if err != nil {
			return nil, fmt.Errorf("engine: route %q: %s: %w", r.ID, name, err)
		}
		if f != nil {
			fs = append(fs, f)
		}
	}
	if len(fs) == 0 {
		return nil, nil
	}
	return filters.NewChainStats(fs, b.loops, func(filter string) *filters.Stats { return b.reg.filter(r.ID, filter) })
}

// filter builds one named filter for route r; nil means the filter has
// nothing to do on this route.
func (b *chainBuilder) filter(name string, r *config.Route) (filters.Filter, error) {
	order := b.orders[name]
	switch name {
	case config.FilterRequestID:
		return transform.NewRequestID(order), nil
	case config.FilterForwarded:
		return transform.NewForwarded(order, b.trusted), nil
	case config.FilterIPAccess:
		routeAllow, err := access.ParsePrefixes(r.IPAllow)
		if err != nil {
			return nil, err
		}
		routeDeny, err := access.ParsePrefixes(r.IPDeny)
		if err != nil {
			return nil, err
		}
		return access.NewIPFilter(order, b.allow, b.deny, routeAllow, routeDeny, b.bans), nil
	case config.FilterLimits:
		if r.Limits == nil {
			return nil, nil
		}
		return access.NewLimitsFilter(order, *r.Limits), nil
	case config.FilterAuth:
		return auth.NewFilter(b.verifier, order, r.Roles), nil
	case config.FilterExternalAuth:
		g, ok := b.groups[b.cfg.Auth.External.Upstream]
		if !ok {
			return nil, fmt.Errorf("auth.external.upstream %q is not an upstream", b.cfg.Auth.External.Upstream)
		}
		return auth.NewExternal(&b.cfg.Auth.External, g, order), nil
	case config.FilterHeaders:
		if r.RequestHeaders == nil && r.ResponseHeaders == nil {
			return nil, nil
		}
		return transform.NewHeaders(order, r.RequestHeaders, r.ResponseHeaders)
	case config.FilterRewrite:
		if r.Rewrite == nil {
			return nil, nil
		}
		return transform.NewRewrite(order, r.Rewrite)
	case config.FilterGray:
		if r.Gray == nil {
			return nil, nil
		}
		g, ok := b.groups[r.Gray.Upstream]
		if !ok {
			return nil, fmt.Errorf("gray.upstream %q is not an upstream", r.Gray.Upstream)
		}
		return transform.NewGray(order, r.Gray, g), nil
	case config.FilterHash:
		if r.Hash == nil {
			return nil, nil
		}
		return transform.NewHash(order, r.Hash), nil
	}
	return nil, fmt.Errorf("unknown filter %q", name)
}
