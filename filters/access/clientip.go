// ClientIP and the prefix lists it reads: who the client is behind trusted proxies.

package access

import (
	"fmt"
	"net/netip"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

// ClientIP returns the client's address as the trusted proxies in front of
// the gateway report it, never a value the client itself could have
// chosen. It does not allocate and is safe for concurrent use.
//
// It is nginx's realip with real_ip_recursive on:
//
//  1. A peer that is not in trusted is the client, whatever its headers say.
//  2. For a trusted peer, the X-Forwarded-For fields, taken in order as one
//     comma-separated list, are walked right to left, the order proxies
//     append in; empty entries are skipped. The first address that is not
//     trusted is the client. A trusted one is the hop before, and the walk
//     goes on left of it.
//  3. An entry that is not an address ("unknown", a zoned IPv6 address)
//     ends the walk: whatever is left of it came through a hop nobody
//     vouches for. The client is then the last trusted address walked,
//     or the peer when the unparsable entry was the rightmost.
//  4. When every entry is a trusted address, the leftmost is the client.
//  5. Only when no X-Forwarded-For entry exists at all does X-Real-IP
//     count: the last X-Real-IP field, the one the proxy nearest the
//     gateway wrote (it sets or appends the field; a client's own comes
//     before it). A last value that is not an address leaves the peer.
//
// Step 3 and step 5 never fall back to a header the client sent: with
// "X-Forwarded-For: unknown", a client-supplied X-Real-IP does not count.
//
// Entries may be bare addresses, "[v6]", "[v6]:port" or "v4:port"; zoned
// addresses are refused. 4in6 addresses (in headers and the peer) are
// unmapped, so they match IPv4 prefixes.
func ClientIP(peer netip.Addr, h codec.Headers, trusted []netip.Prefix) netip.Addr {
	peer = peer.Unmap()
	if !Contains(trusted, peer) {
		return peer
	}
	hop := peer // the last trusted address walked: the hop the next entry came through
	walked := false
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
			walked = true
			a, ok := parseHostAddr(entry)
			if !ok {
				return hop
			}
			if !Contains(trusted, a) {
				return a
			}
			hop = a
		}
	}
	if walked {
		return hop
	}
	return lastRealIP(h, peer)
}

// lastRealIP is the address in the last X-Real-IP field, or peer when
// there is none or it is not an address.
func lastRealIP(h codec.Headers, peer netip.Addr) netip.Addr {
	for i := len(h) - 1; i >= 0; i-- {
		if codec.EqualFold(h[i].Name, "x-real-ip") {
			if a, ok := parseHostAddr(h[i].Value); ok {
				return a
			}
			return peer
		}
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
