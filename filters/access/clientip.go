// ClientIP and the prefix lists it reads: who the client is behind trusted proxies.

package access

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/loopgate/loopgate/codec"
)

// ClientIP returns the client's address as the trusted proxies in front of
// the gateway report it. It does not allocate and is safe for concurrent use.
//
// A peer that is not in trusted is the client, whatever its headers say. For
// a trusted peer, X-Forwarded-For (every field, each a comma-separated list)
// is walked right to left, the way proxies append to it, and the first
// address that is not trusted is the client. The walk stops at the first
// entry that is not an address: everything left of it came through a hop
// that cannot be vouched for. When every address walked is trusted, the
// leftmost of them is the client. Without any usable X-Forwarded-For entry,
// a valid X-Real-IP is the client; otherwise the peer is.
//
// Entries may be bare addresses, "[v6]", "[v6]:port" or "v4:port"; zoned
// addresses are refused. 4in6 addresses (in headers and the peer) are
// unmapped, so they match IPv4 prefixes.
func ClientIP(peer netip.Addr, h codec.Headers, trusted []netip.Prefix) netip.Addr {
	peer = peer.Unmap()
	if !Contains(trusted, peer) {
		return peer
	}
	var leftmost netip.Addr // leftmost trusted address walked so far
	for i := len(h) - 1; i >= 0; i-- {
		if !codec.EqualFold(h[i].Name, "x-forwarded-for") {
			continue
		}
		v := h[i].Value
		for len(v) > 0 {
			comma := lastIndexByte(v, ',')
			entry := codec.TrimOWS(v[comma+1:])
			v = v[:max(comma, 0)]
			if len(entry) == 0 {
				continue // "a,,b" or a trailing comma: nothing was claimed
			}
			a, ok := parseHostAddr(entry)
			if !ok {
				return orRealIP(leftmost, h, peer)
			}
			if !Contains(trusted, a) {
				return a
			}
			leftmost = a
		}
	}
	return orRealIP(leftmost, h, peer)
}

// orRealIP finishes ClientIP's walk: the leftmost trusted address if there
// was one, else a valid X-Real-IP, else the peer.
func orRealIP(leftmost netip.Addr, h codec.Headers, peer netip.Addr) netip.Addr {
	if leftmost.IsValid() {
		return leftmost
	}
	if a, ok := parseHostAddr(h.Get("X-Real-IP")); ok {
		return a
	}
	return peer
}

// Contains reports whether ip (unmapped) is in any of the prefixes. It is a
// linear scan, meant for short lists such as trusted proxies; NewIPFilter
// builds a sorted range set for longer ones. A zoned IPv6 address is never
// contained. Safe for concurrent use; does not allocate.
func Contains(prefixes []netip.Prefix, ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// ParsePrefixes parses CIDRs ("10.0.0.0/8", "2001:db8::/32") and bare
// addresses (a single-address prefix) as written in the config. Surrounding
// spaces are ignored, host bits are cleared ("10.1.2.3/8" is 10.0.0.0/8),
// 4in6 prefixes become IPv4 prefixes, and zones are refused. An empty list
// gives nil.
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := parsePrefix(strings.TrimSpace(s))
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, fmt.Errorf("access: %q is not an IP address or CIDR", s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("access: %q is not an IP address or CIDR", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	return normalizePrefix(p), nil
}

// normalizePrefix clears host bits and turns a 4in6 prefix (::ffff:a.b.c.d/96
// or longer) into the IPv4 prefix it stands for.
func normalizePrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked()
}

func lastIndexByte(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}
