// Check: what a filter config's Validate reports to, and the field checks
// several filters share.

package filters

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/loopgate/loopgate/codec"
)

// Check is handed to a filter config's Validate. It records each problem
// under the path of the key it concerns, so the config can add the YAML
// line and the route's id, and it answers questions about the rest of the
// configuration. engine/config makes one per section it validates; a test
// may make its own. Not safe for concurrent use.
type Check struct {
	Env   Env        // the rest of the configuration
	Route *RouteInfo // the route whose keys are checked; nil for top-level keys

	// Base is the path of the mapping that holds the keys checked: "" at
	// the top level, "routes[2]" in a route.
	Base string

	// Report receives each problem: its path, as YAML keys spell it
	// ("routes[2].gray.upstream"), and the reason.
	Report func(path, reason string)
}

// Env is what a Validate may ask about the configuration around it.
type Env interface {
	// HasUpstream reports whether an upstream of that name is configured.
	HasUpstream(name string) bool
	// Limits returns the global request limits (the limits section).
	Limits() codec.Limits
	// Global returns the named filter's top-level config, or nil.
	Global(filter string) GlobalConfig
	// FirstRouteRunning returns the index of the first route whose chain
	// holds the named filter, or -1.
	FirstRouteRunning(filter string) int
	// IdentityHeaders returns every header name a filter sets as identity
	// (IdentitySource), in canonical case, without duplicates.
	IdentityHeaders() []string
}

// RouteInfo is what a route check knows of its route.
type RouteInfo struct {
	Index    int
	ID       string
	Upstream string   // the route's own upstream
	Chain    []string // the filters the route runs, by name, in order
}

// Runs reports whether the route's chain holds the named filter.
func (r *RouteInfo) Runs(filter string) bool { return slices.Contains(r.Chain, filter) }

// Add reports a problem at key, a path relative to Base: "gray.upstream",
// "ip_allow[1]", or "" for the mapping itself.
func (c *Check) Add(key, format string, args ...any) {
	c.Report(joinKey(c.Base, key), fmt.Sprintf(format, args...))
}

func joinKey(base, key string) string {
	switch {
	case key == "":
		return base
	case base == "" || key[0] == '[':
		return base + key
	}
	return base + "." + key
}

// RouteSetsIdentity reports whether a filter on the checked route sets
// identity headers (Registration.SetsIdentity).
func (c *Check) RouteSetsIdentity() bool {
	if c.Route == nil {
		return false
	}
	for _, name := range c.Route.Chain {
		if r, ok := Lookup(name); ok && r.SetsIdentity {
			return true
		}
	}
	return false
}

// Positive requires v > 0. Zero can only remain once defaults are applied
// when a negative value overrode the default.
func Positive[T ~int | ~int64](c *Check, key string, v T) {
	if v <= 0 {
		c.Add(key, "must be positive, got %v", v)
	}
}

// HeaderName requires name to be a valid header field name (an RFC 9110
// token) and reports whether it is.
func (c *Check) HeaderName(key, name string) bool {
	if !IsToken(name) {
		c.Add(key, "%q is not a valid header name", name)
		return false
	}
	return true
}

// EditableHeader requires a valid header name the proxy does not manage
// itself: framing (Content-Length, Transfer-Encoding) and hop-by-hop
// headers are decided per connection, and editing them could
// desynchronise a peer. It reports whether name passed.
func (c *Check) EditableHeader(key, name string) bool {
	if !c.HeaderName(key, name) {
		return false
	}
	if codec.IsHopByHop([]byte(name)) || strings.EqualFold(name, "Content-Length") {
		c.Add(key, "%q is managed by the proxy: framing and hop-by-hop headers cannot be edited", name)
		return false
	}
	return true
}

// Target requires s to be writable in a request target as it stands: no
// space, control character or '#', and no '?' unless query is set (a
// path is followed by its own query). Non-ASCII bytes pass, as the request
// parser tolerates them in targets.
func (c *Check) Target(key, s string, query bool) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b <= ' ' || b == 0x7f || b == '#' || b == '?' && !query {
			if query {
				c.Add(key, "%q holds a space, a control character or '#'; percent-encode it", s)
			} else {
				c.Add(key, "%q holds a space, a control character, '?' or '#'; percent-encode it", s)
			}
			return false
		}
	}
	return true
}

// Prefixes parses an IP list (ParsePrefix), reporting each bad entry as
// key[i], and returns the entries that parsed.
func (c *Check) Prefixes(key string, list []string) []netip.Prefix {
	var out []netip.Prefix
	for i, s := range list {
		p, err := ParsePrefix(s)
		if err != nil {
			c.Add(fmt.Sprintf("%s[%d]", key, i), "%q is not an IP address or CIDR prefix", s)
			continue
		}
		out = append(out, p)
	}
	return out
}

// ParsePrefix reads one IP list entry, the one syntax every IP list in the
// config uses: an address or a CIDR prefix, without an IPv6 zone, spaces
// around it ignored. An address is its one-address prefix. The result is
// NormalizePrefix'd.
func ParsePrefix(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil { // refuses zones
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR prefix", s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR prefix", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	return NormalizePrefix(p), nil
}

// NormalizePrefix clears host bits and turns a 4in6 prefix
// (::ffff:a.b.c.d/96 or longer) into the IPv4 prefix it stands for.
func NormalizePrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked()
}

// IsToken reports whether s is an RFC 9110 token, the syntax of header and
// cookie names.
func IsToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tchar[s[i]] {
			return false
		}
	}
	return true
}

var tchar = func() (t [256]bool) {
	for _, c := range []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!#$%&'*+-.^_`|~") {
		t[c] = true
	}
	return t
}()
