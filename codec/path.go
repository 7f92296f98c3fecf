// Path normalisation: one canonical spelling of a request path, computed once before routing.

package codec

import "bytes"

// PathFlags report forms found in a path that are kept but that a route must opt in to.
// NormalizePath only reports them; the caller decides, and by default answers 400 to a path that
// sets any flag, because an upstream may read an escaped slash or a backslash as a separator
// that the gateway's router did not see.
type PathFlags uint8

const (
	PathEscapedSlash PathFlags = 1 << iota // %2F or %5C (any case) was present; kept encoded, hex uppercased
	PathBackslash                          // a raw '\' was present; re-encoded as %5C in the output
)

// String names the flags, for logs and test failures. It does not allocate.
func (f PathFlags) String() string {
	switch f {
	case 0:
		return "0"
	case PathEscapedSlash:
		return "PathEscapedSlash"
	case PathBackslash:
		return "PathBackslash"
	case PathEscapedSlash | PathBackslash:
		return "PathEscapedSlash|PathBackslash"
	}
	return "PathFlags(?)"
}

// NormalizePath appends the normalised form of path (the request-target's path, no query, starting with '/')
// to dst and returns it. Errors are *Error sentinels with 400/40001.
//
// Routing decides on the normalised path and the same bytes go upstream (normalise once, before anything
// decides), so that "/pub/../admin", "//admin" and "/%61dmin" cannot reach a route that "/admin" would not.
// The rules apply in this order, in one left-to-right pass:
//
//  1. %XX of an unreserved character (ALPHA / DIGIT / "-" / "." / "_" / "~") is decoded; any other %XX
//     keeps its escape with the hex upper-cased. '%' without two hex digits is ErrBadPercent; %00 is
//     ErrNulInPath. %2F and %5C stay escaped (decoding them would create separators the client did
//     not send) and set PathEscapedSlash. A raw '\' becomes %5C and sets PathBackslash, since some
//     upstreams treat it as '/'.
//  2. Repeated slashes merge into one.
//  3. Dot segments are removed (RFC 3986 5.2.4), those spelled %2E included. A ".." that would climb
//     above the root is ErrPathAboveRoot. A trailing "/." or "/.." leaves a trailing slash, and a
//     trailing slash is kept.
//
// Other bytes, ';' and bytes >= 0x80 included, are copied unchanged. "*" (OPTIONS *) is returned as is;
// any other path that does not start with '/' is ErrBadTarget. The flags are reported, not enforced:
// the caller refuses a flagged path with 400 unless the route opted in.
//
// The result is idempotent: normalising it again gives the same bytes. It is at most 3*len(path) bytes
// (len(path) unless path holds raw backslashes); when cap(dst) allows that, NormalizePath does not
// allocate. Time is O(len(path)). On error out is dst unchanged. Safe for concurrent use on distinct dst.
func NormalizePath(dst, path []byte) (out []byte, flags PathFlags, err error) {
	if len(path) == 1 && path[0] == '*' {
		return append(dst, '*'), 0, nil
	}
	if len(path) == 0 || path[0] != '/' {
		return dst, 0, ErrBadTarget
	}
	if isNormalPath(path) {
		return append(dst, path...), 0, nil
	}
	root := len(dst) + 1 // out[root-1] is the leading '/', which nothing removes
	out = append(dst, '/')
	i := 1
	for {
		// Copy one segment of path (up to the next raw '/') into out, decoding as we go.
		seg := len(out)
		for i < len(path) && path[i] != '/' {
			switch c := path[i]; c {
			case '%':
				if i+2 >= len(path) {
					return dst, 0, ErrBadPercent
				}
				hi, lo := hexValue[path[i+1]], hexValue[path[i+2]]
				if hi < 0 || lo < 0 {
					return dst, 0, ErrBadPercent
				}
				switch v := byte(hi)<<4 | byte(lo); {
				case v == 0:
					return dst, 0, ErrNulInPath
				case unreservedTable[v]:
					out = append(out, v)
				default:
					if v == '/' || v == '\\' {
						flags |= PathEscapedSlash
					}
					out = append(out, '%', upperHex[hi], upperHex[lo])
				}
				i += 3
			case '\\':
				flags |= PathBackslash
				out = append(out, "%5C"...)
				i++
			default:
				j := i + 1
				for j < len(path) && pathPlainTable[path[j]] {
					j++
				}
				out = append(out, path[i:j]...)
				i = j
			}
		}

		// The segment is complete: drop it if empty (merged slashes) or a dot segment.
		switch s := out[seg:]; {
		case len(s) == 0:
		case len(s) == 1 && s[0] == '.':
			out = out[:seg]
		case len(s) == 2 && s[0] == '.' && s[1] == '.':
			if seg == root {
				return dst, 0, ErrPathAboveRoot
			}
			// Drop the previous segment. The bytes scanned here are removed, so the scans add up to O(n).
			out = out[:root+bytes.LastIndexByte(out[root:seg-1], '/')+1]
		default:
			if i < len(path) {
				out = append(out, '/')
			}
		}
		if i == len(path) {
			return out, flags, nil
		}
		i++ // the '/' after the segment
	}
}

// isNormalPath reports, in one cheap scan, that path (starting with '/') holds nothing any rule
// would change: no '%', no backslash, and no '/' followed by '/' or '.'. Most request paths pass it.
func isNormalPath(path []byte) bool {
	for i, c := range path {
		if pathPlainTable[c] {
			continue
		}
		if c != '/' || (i+1 < len(path) && (path[i+1] == '/' || path[i+1] == '.')) {
			return false
		}
	}
	return true
}

const upperHex = "0123456789ABCDEF"

var (
	// unreservedTable: RFC 3986 unreserved characters, whose percent-encoding is equivalent to the byte.
	unreservedTable = byteSet(alnum + "-._~")

	// pathPlainTable: path bytes NormalizePath copies without a closer look.
	pathPlainTable = func() (t [256]bool) {
		for i := range t {
			t[i] = i != '/' && i != '%' && i != '\\'
		}
		return t
	}()
)
