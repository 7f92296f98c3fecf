// ClientIP and the prefix lists it reads: who the client is behind trusted proxies.

package access

import (
	"fmt"
	"net/netip"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
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

// ParsePrefixes parses an IP list as the config writes it, for programs
// and tests that build filters without a config: each entry as
// filters.ParsePrefix reads it (an address or a CIDR prefix, host bits
// cleared, 4in6 unmapped, zones refused). An empty list gives nil.
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	if len(list) == 0 {
		return nil, nil
	}
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := filters.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("access: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

func lastIndexByte(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}
