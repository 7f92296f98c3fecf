// Host syntax: the one grammar for Host fields and absolute-form authorities, and NormalizeHost.

package codec

import "bytes"

// NormalizeHost appends the normalised Host to dst: lower-cased, one trailing dot dropped from a
// reg-name, the port validated (digits only, ≤ 65535, at most one) and removed, IPv6 literals kept
// bracketed. Errors: ErrBadHost (already exists, 400/40001).
//
// Host-based routing compares the result, so "Admin.Test.", "admin.test" and "admin.test:80" must be
// one name. An empty host gives an empty name, port -1 and no error: HTTP/1.0 may omit Host and
// HTTP/1.1 allows it empty, and the caller decides what an empty name routes to.
//
// The accepted syntax is exactly what ParseRequest accepts in a Host field or an absolute-form
// authority (both use splitHost):
//
//   - reg-name or IPv4: labels of ALPHA, DIGIT, "-", "_", "~" or RFC 3986 sub-delims, separated by
//     single dots, with at most one trailing dot. Percent-encoding is refused: no client sends it, and
//     it would give one host several spellings that a router would have to decode to compare.
//   - IP-literal: "[" IPv6address "]" (RFC 3986 3.2.2). IPvFuture and zone identifiers are refused.
//     The address is lower-cased but not rewritten to its shortest form (RFC 5952).
//   - port: ":" and 1 to 5 digits with a value ≤ 65535. An empty port ("a:") is refused.
//
// port is -1 when absent. On error name is dst unchanged. It allocates only if dst must grow; safe for
// concurrent use on distinct dst.
func NormalizeHost(dst, host []byte) (name []byte, port int, err error) {
	if len(host) == 0 {
		return dst, -1, nil
	}
	h, port, upper, ok := splitHost(host)
	if !ok {
		return dst, -1, ErrBadHost
	}
	return appendHostName(dst, h, upper), port, nil
}

// appendHostName is NormalizeHost's name from splitHost's host: one trailing dot dropped from a
// reg-name, lower-cased when upper says it has an upper-case letter.
func appendHostName(dst, h []byte, upper bool) []byte {
	h = trimHostDot(h)
	n := len(dst)
	name := append(dst, h...)
	if upper {
		for i := n; i < len(name); i++ {
			name[i] = lowerTable[name[i]]
		}
	}
	return name
}

// trimHostDot drops the one trailing dot a reg-name may have.
func trimHostDot(h []byte) []byte {
	if len(h) > 0 && h[0] != '[' && h[len(h)-1] == '.' {
		return h[:len(h)-1]
	}
	return h
}

// NormalHost is NormalizeHost(dst, r.Host) for a request ParseRequest filled, from what the parser
// found while it checked the Host: the name is not scanned again, and when it has no upper-case
// letter it is returned as the view into the parsed buffer that r.Host is, without a copy. port is -1
// when absent.
func (r *Request) NormalHost(dst []byte) (name []byte, port int) {
	if !r.hostUpper {
		return trimHostDot(r.hostName), r.hostPort
	}
	return appendHostName(dst, r.hostName, true), r.hostPort
}

// splitHost checks that h (non-empty) is uri-host [ ":" port ] and splits it: host is the reg-name,
// IPv4 address or bracketed IP-literal as received, port its value or -1, upper whether host has an
// upper-case letter.
func splitHost(h []byte) (host []byte, port int, upper, ok bool) {
	var rest []byte
	if h[0] == '[' {
		end := bytes.IndexByte(h, ']')
		if end < 0 || !validIPv6(h[1:end]) {
			return nil, -1, false, false
		}
		host, rest = h[:end+1], h[end+1:]
		for _, c := range host {
			upper = upper || ('A' <= c && c <= 'Z')
		}
	} else {
		end, up, ok := scanRegName(h)
		if !ok {
			return nil, -1, false, false
		}
		host, rest, upper = h[:end], h[end:], up
	}
	if len(rest) == 0 {
		return host, -1, upper, true
	}
	if rest[0] != ':' {
		return nil, -1, false, false
	}
	port, ok = parsePort(rest[1:])
	return host, port, upper, ok
}

// scanRegName checks the reg-name (or IPv4 address) that h starts with, up to its first ':' or its
// end: one or more non-empty dot-separated labels of regNameTable bytes, optionally followed by one
// dot. It returns where the name ends and whether it has an upper-case letter; one pass, one table
// lookup per byte, as it runs on every request.
func scanRegName(h []byte) (end int, upper, ok bool) {
	label := 0 // bytes in the current label
	end = len(h)
scan:
	for i, c := range h {
		switch hostClass[c] {
		case hostLower:
			label++
		case hostUpper:
			label++
			upper = true
		case hostDot:
			if label == 0 {
				return 0, false, false // an empty label, or a second trailing dot
			}
			label = 0
		default:
			if c != ':' {
				return 0, false, false
			}
			end = i
			break scan
		}
	}
	// Every dot followed a label, so a name of one byte or more is valid,
	// ending in a label or in the one trailing dot.
	return end, upper, end > 0
}

// parsePort parses 1 to 5 decimal digits with a value of at most 65535.
func parsePort(p []byte) (int, bool) {
	if len(p) == 0 || len(p) > 5 {
		return -1, false
	}
	v := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return -1, false
		}
		v = v*10 + int(c-'0')
	}
	if v > 65535 {
		return -1, false
	}
	return v, true
}

// validIPv6 reports whether s is an RFC 3986 IPv6address: eight 16-bit hex groups, or fewer around a
// single "::", the last two optionally written as a dotted IPv4 address.
func validIPv6(s []byte) bool {
	groups, compressed := 0, false
	i := 0
	if len(s) >= 2 && s[0] == ':' && s[1] == ':' {
		compressed, i = true, 2
	}
	for i < len(s) {
		j := i
		for j < len(s) && j-i < 5 && hexValue[s[j]] >= 0 {
			j++
		}
		if j < len(s) && s[j] == '.' { // an IPv4 tail ends the address
			if !validIPv4(s[i:]) {
				return false
			}
			groups += 2
			break
		}
		if j == i || j-i > 4 {
			return false
		}
		groups++
		if j == len(s) {
			break
		}
		if s[j] != ':' || j+1 == len(s) {
			return false // not a separator, or a single trailing colon
		}
		i = j + 1
		if s[i] == ':' {
			if compressed {
				return false // a second "::"
			}
			compressed = true
			i++
		}
	}
	if compressed {
		return groups <= 7
	}
	return groups == 8
}

// validIPv4 reports whether s is four dec-octets (0-255, no leading zeros) separated by dots.
func validIPv4(s []byte) bool {
	octets := 0
	for len(s) > 0 {
		n, v := 0, 0
		for n < len(s) && n < 4 && '0' <= s[n] && s[n] <= '9' {
			v = v*10 + int(s[n]-'0')
			n++
		}
		if n == 0 || n > 3 || v > 255 || (n > 1 && s[0] == '0') {
			return false
		}
		octets++
		s = s[n:]
		if len(s) > 0 {
			if s[0] != '.' || len(s) == 1 {
				return false
			}
			s = s[1:]
		}
	}
	return octets == 4
}

// regNameTable: reg-name bytes other than '.' and pct-encoded: unreserved and sub-delims (RFC 3986 3.2.2).
var regNameTable = byteSet(alnum + "-_~!$&'()*+,;=")

// hostClass sorts bytes for scanRegName in one lookup: regNameTable bytes other than upper-case
// letters, upper-case letters (which NormalizeHost lower-cases), '.', and everything else (0).
var hostClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case 'A' <= c && c <= 'Z':
			t[c] = hostUpper
		case regNameTable[c]:
			t[c] = hostLower
		case c == '.':
			t[c] = hostDot
		}
	}
	return t
}()

const (
	hostLower = 1 + iota // a reg-name byte that is not an upper-case letter
	hostUpper
	hostDot
)
