// parseAddr: an allocation-free IP address parser for header bytes.

package access

import (
	"bytes"
	"net/netip"
)

// parseAddr parses b as a bare IPv4 or IPv6 address with netip.ParseAddr's
// grammar, minus zones (an address with "%zone" is refused: a zone never
// names a remote client, and a zoned address would not match any list). It
// exists because netip.ParseAddr(string(b)) allocates: its error keeps the
// input string, so the conversion escapes. 4in6 addresses are unmapped.
func parseAddr(b []byte) (netip.Addr, bool) {
	for _, c := range b {
		switch c {
		case '.':
			var ip [4]byte
			if !parseIPv4(b, ip[:]) {
				return netip.Addr{}, false
			}
			return netip.AddrFrom4(ip), true
		case ':':
			return parseIPv6(b)
		}
	}
	return netip.Addr{}, false
}

// parseIPv4 parses dotted decimal into out (4 bytes): four fields of 1-3
// digits, each at most 255, without leading zeros.
func parseIPv4(b []byte, out []byte) bool {
	var val, field, digits int
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case '0' <= c && c <= '9':
			if digits == 1 && val == 0 {
				return false // leading zero
			}
			val = val*10 + int(c-'0')
			digits++
			if val > 255 {
				return false
			}
		case c == '.':
			if digits == 0 || field == 3 {
				return false
			}
			out[field] = byte(val)
			field++
			val, digits = 0, 0
		default:
			return false
		}
	}
	if digits == 0 || field != 3 {
		return false
	}
	out[3] = byte(val)
	return true
}

// parseIPv6 follows net/netip's parseIPv6, on bytes and without zones.
func parseIPv6(s []byte) (netip.Addr, bool) {
	var ip [16]byte
	ellipsis := -1 // position of "::" in ip

	if len(s) >= 2 && s[0] == ':' && s[1] == ':' {
		ellipsis = 0
		s = s[2:]
		if len(s) == 0 {
			return netip.IPv6Unspecified(), true
		}
	}

	i := 0
	for i < 16 {
		off := 0
		acc := uint32(0)
	digits:
		for ; off < len(s); off++ {
			c := s[off]
			switch {
			case '0' <= c && c <= '9':
				acc = acc<<4 + uint32(c-'0')
			case 'a' <= c && c <= 'f':
				acc = acc<<4 + uint32(c-'a'+10)
			case 'A' <= c && c <= 'F':
				acc = acc<<4 + uint32(c-'A'+10)
			default:
				break digits
			}
			if off > 3 {
				return netip.Addr{}, false // more than 4 digits
			}
		}
		if off == 0 {
			return netip.Addr{}, false
		}

		if off < len(s) && s[off] == '.' { // trailing embedded IPv4
			if (ellipsis < 0 && i != 12) || i+4 > 16 {
				return netip.Addr{}, false
			}
			if !parseIPv4(s, ip[i:i+4]) {
				return netip.Addr{}, false
			}
			s = nil
			i += 4
			break
		}

		ip[i] = byte(acc >> 8)
		ip[i+1] = byte(acc)
		i += 2

		s = s[off:]
		if len(s) == 0 {
			break
		}
		if s[0] != ':' || len(s) == 1 {
			return netip.Addr{}, false
		}
		s = s[1:]
		if s[0] == ':' {
			if ellipsis >= 0 {
				return netip.Addr{}, false // a second "::"
			}
			ellipsis = i
			s = s[1:]
			if len(s) == 0 {
				break
			}
		}
	}

	if len(s) != 0 {
		return netip.Addr{}, false
	}
	if i < 16 {
		if ellipsis < 0 {
			return netip.Addr{}, false
		}
		n := 16 - i
		for j := i - 1; j >= ellipsis; j-- {
			ip[j+n] = ip[j]
		}
		clear(ip[ellipsis : ellipsis+n])
	} else if ellipsis >= 0 {
		return netip.Addr{}, false // "::" must stand for at least one group
	}
	return netip.AddrFrom16(ip).Unmap(), true
}

// parseHostAddr parses an address as proxies write it in X-Forwarded-For and
// X-Real-IP: bare, "[v6]", "[v6]:port" or "v4:port".
func parseHostAddr(b []byte) (netip.Addr, bool) {
	if len(b) > 0 && b[0] == '[' {
		end := bytes.IndexByte(b, ']')
		if end < 0 || !portOK(b[end+1:]) {
			return netip.Addr{}, false
		}
		a, ok := parseIPv6(b[1:end])
		return a, ok
	}
	if a, ok := parseAddr(b); ok {
		return a, true
	}
	// "v4:port": exactly one colon, after a dotted address.
	c := bytes.IndexByte(b, ':')
	if c < 0 || bytes.IndexByte(b[c+1:], ':') >= 0 || !portOK(b[c:]) {
		return netip.Addr{}, false
	}
	var ip [4]byte
	if !parseIPv4(b[:c], ip[:]) {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(ip), true
}

// portOK accepts "" or ":" followed by 1-5 digits.
func portOK(b []byte) bool {
	if len(b) == 0 {
		return true
	}
	if b[0] != ':' || len(b) < 2 || len(b) > 6 {
		return false
	}
	for _, c := range b[1:] {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}
