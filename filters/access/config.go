// The ip_access and limits filters' configuration, validation and
// registration.

package access

import (
	"net/netip"
	"strings"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool/units"
)

// The names the config gives this package's filters.
const (
	NameIPAccess = "ip_access"
	NameLimits   = "limits"
)

func init() {
	filters.Register(filters.Registration{
		Name: NameIPAccess, Order: 200, Default: true, // default, so that runtime bans apply to every route
		RouteIndependent: true,
		Global:           func() filters.GlobalConfig { return new(IPLists) },
		Route:            func() filters.RouteConfig { return new(IPLists) },
		New:              newIPAccess,
		Service:          func() any { return NewBans(MaxBans) }, // the server's one ban list
		ClientIP:         ClientIP,                               // the engine's client behind trusted_proxies
	})
	filters.Register(filters.Registration{
		Name: NameLimits, Order: 150, NeedsRoute: true,
		Route: func() filters.RouteConfig { return new(LimitsRoute) },
		New:   newLimits,
	})
}

// MaxBans bounds the server's runtime ban list.
const MaxBans = 100_000

// IPLists are the ip_access filter's keys, at the top level (applying to
// every route) and in a route (applying to it, after the global lists).
// Entries are IP addresses or CIDR prefixes (filters.ParsePrefix).
type IPLists struct {
	Allow []string `yaml:"ip_allow,omitempty"` // default empty = all allowed
	Deny  []string `yaml:"ip_deny,omitempty"`  // default empty; checked before ip_allow; 403, code 40302

	allow, deny []netip.Prefix // parsed by Validate
}

var (
	_ filters.GlobalConfig = (*IPLists)(nil)
	_ filters.RouteConfig  = (*IPLists)(nil)
)

// Provision does nothing: empty lists are the defaults.
func (l *IPLists) Provision() {}

// Validate parses both lists, reporting each bad entry.
func (l *IPLists) Validate(c *filters.Check) {
	l.allow = c.Prefixes("ip_allow", l.Allow)
	l.deny = c.Prefixes("ip_deny", l.Deny)
}

// EnabledBy: a list of the route's own, or a global one (global lists
// apply to every route).
func (l *IPLists) EnabledBy(global filters.GlobalConfig) string {
	switch g, _ := global.(*IPLists); {
	case l.set():
		return "the route's ip_allow/ip_deny"
	case g != nil && g.set():
		return "the global ip_allow/ip_deny, which apply to every route"
	}
	return ""
}

func (l *IPLists) set() bool { return l != nil && len(l.Allow)+len(l.Deny) > 0 }

// newIPAccess builds a route's ip_access filter from the parsed lists and
// the server's ban list (a *Bans service), when the engine provides one.
func newIPAccess(b *filters.Build) (filters.Filter, error) {
	var g, r IPLists
	if p, ok := b.Global.(*IPLists); ok {
		g = *p
	}
	if p, ok := b.Config.(*IPLists); ok {
		r = *p
	}
	bans, _ := filters.Service[*Bans](b)
	return NewIPFilter(b.Order, g.allow, g.deny, r.allow, r.deny, bans), nil
}

// LimitsRoute is the limits filter's route key.
type LimitsRoute struct {
	Limits *RouteLimits `yaml:"limits,omitempty"` // default none: the global limits apply
}

// RouteLimits tighten the global limits for one route; zero inherits.
type RouteLimits struct {
	MaxURIBytes    units.ByteSize `yaml:"max_uri_bytes"`
	MaxHeaderCount int            `yaml:"max_header_count"`
	MaxHeaderBytes units.ByteSize `yaml:"max_header_bytes"`
	MaxBodyBytes   units.ByteSize `yaml:"max_body_bytes"`
}

var (
	_ filters.RouteConfig    = (*LimitsRoute)(nil)
	_ filters.RequestLimiter = (*LimitsRoute)(nil)
)

// Provision does nothing: zero limits inherit the global ones.
func (l *LimitsRoute) Provision() {}

// Validate requires each limit to be unset (0) or within the global one: a
// route may only tighten.
func (l *LimitsRoute) Validate(c *filters.Check) {
	if l.Limits == nil {
		return
	}
	g, r := c.Env.Limits(), l.Limits
	tighter(c, "limits.max_uri_bytes", r.MaxURIBytes, units.ByteSize(g.MaxURIBytes))
	tighter(c, "limits.max_header_count", r.MaxHeaderCount, g.MaxHeaderCount)
	tighter(c, "limits.max_header_bytes", r.MaxHeaderBytes, units.ByteSize(g.MaxHeaderBytes))
	tighter(c, "limits.max_body_bytes", r.MaxBodyBytes, units.ByteSize(g.MaxBodyBytes))
}

func tighter[T ~int | ~int64](c *filters.Check, key string, v, global T) {
	switch {
	case v < 0:
		c.Add(key, "must not be negative, got %v", v)
	case v > global:
		c.Add(key, "%v exceeds the global limits.%s %v; a route may only tighten it", v, key[strings.LastIndexByte(key, '.')+1:], global)
	}
}

// EnabledBy: the limits section.
func (l *LimitsRoute) EnabledBy(filters.GlobalConfig) string {
	if l.Limits != nil {
		return "limits"
	}
	return ""
}

// RequestLimits returns the route's limits in the parser's terms.
func (l *LimitsRoute) RequestLimits() (codec.Limits, bool) {
	if l.Limits == nil {
		return codec.Limits{}, false
	}
	return codec.Limits{
		MaxURIBytes:    int(l.Limits.MaxURIBytes),
		MaxHeaderCount: l.Limits.MaxHeaderCount,
		MaxHeaderBytes: int(l.Limits.MaxHeaderBytes),
		MaxBodyBytes:   int64(l.Limits.MaxBodyBytes),
	}, true
}

func newLimits(b *filters.Build) (filters.Filter, error) {
	l, ok := b.Config.(*LimitsRoute)
	if !ok {
		return nil, nil
	}
	limits, ok := l.RequestLimits()
	if !ok {
		return nil, nil
	}
	return NewLimitsFilter(b.Order, limits), nil
}
