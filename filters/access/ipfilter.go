// The ip_access filter: bans, deny lists and allow lists on the client IP.

package access

import (
	"net/netip"

	"github.com/loopgate/loopgate/filters"
)

// ipFilter rejects by x.ClientIP. Immutable; safe for concurrent use.
type ipFilter struct {
	filters.Base
	bans     *Bans     // nil: no runtime bans
	deny     prefixSet // global and route deny lists, merged
	allow    prefixSet // the intersection of the non-empty allow lists
	hasDeny  bool      // deny holds an address: without one, no request searches it
	hasAllow bool      // some allow list was given, so allow is enforced even when empty
}

var _ filters.Filter = (*ipFilter)(nil)

// NewIPFilter returns the "ip_access" filter. A request is refused with 403,
// code 40302, when its client IP is banned, or is in the global or route
// deny list, or is outside a non-empty allow list: the global one and the
// route one each apply, so a route allow list narrows the global one. Deny
// wins over allow. bans may be nil.
//
// Lists are compiled to sorted, merged address ranges per family and
// searched in O(log n), so large lists cost little; lookups ignore zones and
// unmap 4in6 addresses.
func NewIPFilter(order int, globalAllow, globalDeny, routeAllow, routeDeny []netip.Prefix, bans *Bans) filters.Filter {
	f := &ipFilter{
		Base: filters.Base{FilterName: NameIPAccess, FilterOrder: order},
		bans: bans,
		deny: newPrefixSet(append(append([]netip.Prefix(nil), globalDeny...), routeDeny...)),
	}
	f.hasDeny = !f.deny.empty()
	switch ga, ra := len(globalAllow) > 0, len(routeAllow) > 0; {
	case ga && ra:
		f.allow, f.hasAllow = intersect(newPrefixSet(globalAllow), newPrefixSet(routeAllow)), true
	case ga:
		f.allow, f.hasAllow = newPrefixSet(globalAllow), true
	case ra:
		f.allow, f.hasAllow = newPrefixSet(routeAllow), true
	}
	return f
}

// Request checks the client IP. It does not allocate.
func (f *ipFilter) Request(x *filters.Exchange) filters.Verdict {
	ip := x.ClientIP
	if f.bans != nil && f.bans.bannedNow(ip) {
		return x.Reject(403, 40302, "IP banned")
	}
	if (f.hasDeny && f.deny.contains(ip)) || (f.hasAllow && !f.allow.contains(ip)) {
		return x.Reject(403, 40302, "IP denied")
	}
	return filters.Continue
}
