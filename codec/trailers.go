// Trailer sections of chunked bodies: walking their field lines and the fields they must not carry.

package codec

import "bytes"

// ForEachTrailer calls fn for each field line of section, in order, with the name as received and the
// value with surrounding OWS trimmed. section is a complete trailer section as a ChunkedDecoder consumed
// it (the src[:n] spans of the calls made while InTrailers, concatenated): field lines, then the final
// CRLF. The decoder has validated it, so ForEachTrailer does not check again; it stops at the first
// empty line and skips a line without a colon. name and value are views into section, valid while it is.
// It does not allocate. Safe for concurrent use.
func ForEachTrailer(section []byte, fn func(name, value []byte)) {
	for len(section) > 0 {
		line := section
		if nl := bytes.IndexByte(section, '\n'); nl >= 0 {
			line, section = section[:nl], section[nl+1:]
		} else {
			section = nil
		}
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) == 0 {
			return // the final CRLF
		}
		if colon := bytes.IndexByte(line, ':'); colon > 0 {
			fn(line[:colon], TrimOWS(line[colon+1:]))
		}
	}
}

// ForbiddenTrailer reports whether a field named name must not be forwarded in a trailer section.
//
// RFC 9110 6.5.1 forbids trailers that a recipient needs before the content, and a proxy that
// checked or rewrote a field in the head must not let the same field arrive unchecked after the body.
// The list is (case-insensitive):
//
//   - framing and routing: Content-Length, Transfer-Encoding, Trailer, Host, and the hop-by-hop
//     fields of IsHopByHop (Connection, Keep-Alive, Proxy-Connection, TE, Upgrade, ...);
//   - request modifiers: Cache-Control, Expect, Max-Forwards, Pragma, Range and every If-* conditional;
//   - authentication and state: Authorization, Proxy-Authenticate, Proxy-Authorization,
//     WWW-Authenticate, Cookie and Set-Cookie (RFC 9110 does not name the last two, but a gateway
//     that vets cookies in the head must not accept them after the body);
//   - response control data: Age, Date, Expires, Location, Retry-After, Vary, Warning;
//   - content processing: Content-Encoding, Content-Type, Content-Range.
//
// A caller forwarding trailers also drops the fields the message's Connection field lists. It does not
// allocate. Safe for concurrent use.
func ForbiddenTrailer(name []byte) bool {
	if IsHopByHop(name) {
		return true
	}
	if len(name) > 3 && EqualFold(name[:3], "if-") {
		return true
	}
	switch len(name) {
	case 3:
		return EqualFold(name, "age")
	case 4:
		return EqualFold(name, "host") || EqualFold(name, "date") || EqualFold(name, "vary")
	case 5:
		return EqualFold(name, "range")
	case 6:
		return EqualFold(name, "cookie") || EqualFold(name, "expect") || EqualFold(name, "pragma")
	case 7:
		return EqualFold(name, "expires") || EqualFold(name, "warning")
	case 8:
		return EqualFold(name, "location")
	case 10:
		return EqualFold(name, "set-cookie")
	case 11:
		return EqualFold(name, "retry-after")
	case 12:
		return EqualFold(name, "content-type") || EqualFold(name, "max-forwards")
	case 13:
		return EqualFold(name, "authorization") || EqualFold(name, "cache-control") || EqualFold(name, "content-range")
	case 14:
		return EqualFold(name, "content-length")
	case 16:
		return EqualFold(name, "content-encoding") || EqualFold(name, "www-authenticate")
	}
	return false
}
