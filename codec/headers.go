// Header fields as views into the caller's buffer, their lookups, and the byte-class tables.

package codec

// Header is one field line. Name and Value are views into the buffer that was parsed;
// they are valid only as long as that buffer is. Value has surrounding OWS trimmed.
type Header struct{ Name, Value []byte }

// Headers is the ordered list of field lines as received, duplicates included.
// Lookups are case-insensitive and do not allocate. Reading is safe for concurrent use;
// the owner of the Request or Response is the only writer.
type Headers []Header

// Get returns the value of the first field whose name equals name, ignoring case, or nil.
func (h Headers) Get(name string) []byte {
	for i := range h {
		if EqualFold(h[i].Name, name) {
			return h[i].Value
		}
	}
	return nil
}

// Only returns the value of the field called name (ignoring case) and how
// many fields have that name, counting no further than 2: a caller that
// decides on a field a client could repeat refuses n > 1, since which of the
// fields counts would be a guess the next hop may make differently.
func (h Headers) Only(name string) (value []byte, n int) {
	for i := range h {
		if EqualFold(h[i].Name, name) {
			if n++; n > 1 {
				return value, n
			}
			value = h[i].Value
		}
	}
	return value, n
}

// ConnectionHas reports whether any Connection field lists token (comma-separated, case-insensitive).
func (h Headers) ConnectionHas(token string) bool {
	return connectionLists(h, token)
}

// Listed reports whether name is one of the tokens listed in the Connection field(s).
// A proxy drops such fields before forwarding, together with those IsHopByHop reports (RFC 9110 7.6.1).
func (h Headers) Listed(name []byte) bool {
	return connectionLists(h, name)
}

func connectionLists[T string | []byte](h Headers, token T) bool {
	for i := range h {
		if EqualFold(h[i].Name, "connection") && listHas(h[i].Value, token) {
			return true
		}
	}
	return false
}

// IsHopByHop reports whether name is a hop-by-hop field that a proxy must not forward:
// Connection, Keep-Alive, Proxy-Connection, Proxy-Authenticate, Proxy-Authorization, TE,
// Trailer, Transfer-Encoding or Upgrade (case-insensitive). Safe for concurrent use.
//
// Most names have none of the hop-by-hop names' lengths; that test is
// small enough to be inlined into the caller, so they cost no call.
func IsHopByHop(name []byte) bool {
	return len(name) < 64 && hopByHopLens&(1<<len(name)) != 0 && isHopByHop(name)
}

// hopByHopLens has bit n set for each length n of a hop-by-hop name.
const hopByHopLens = 1<<2 | 1<<7 | 1<<10 | 1<<16 | 1<<17 | 1<<18 | 1<<19

func isHopByHop(name []byte) bool {
	switch len(name) {
	case 2:
		return EqualFold(name, "te")
	case 7:
		return EqualFold(name, "trailer") || EqualFold(name, "upgrade")
	case 10:
		return EqualFold(name, "connection") || EqualFold(name, "keep-alive")
	case 16:
		return EqualFold(name, "proxy-connection")
	case 17:
		return EqualFold(name, "transfer-encoding")
	case 18:
		return EqualFold(name, "proxy-authenticate")
	case 19:
		return EqualFold(name, "proxy-authorization")
	}
	return false
}

// ContainsToken reports whether the comma-separated list value (a TE or
// Connection field value, say) holds token, ignoring case and OWS. It does
// not allocate.
func ContainsToken(value []byte, token string) bool { return listHas(value, token) }

// listHas reports whether the comma-separated list value holds token, ignoring case and OWS.
func listHas[T string | []byte](value []byte, token T) bool {
	for len(value) > 0 {
		end := 0
		for end < len(value) && value[end] != ',' {
			end++
		}
		if EqualFold(TrimOWS(value[:end]), token) {
			return true
		}
		if end == len(value) {
			break
		}
		value = value[end+1:]
	}
	return false
}

// equalFold reports whether a equals b under ASCII case folding. It does not allocate.
// EqualFold reports whether a equals b under ASCII case folding, without
// allocating.
func EqualFold[T string | []byte](a []byte, b T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerTable[a[i]] != lowerTable[b[i]] {
			return false
		}
	}
	return true
}

// TrimOWS strips leading and trailing SP and HTAB (optional whitespace).
func TrimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// Byte classes, indexed by byte value.
var (
	lowerTable = func() (t [256]byte) {
		for i := range t {
			t[i] = byte(i)
			if 'A' <= i && i <= 'Z' {
				t[i] = byte(i) + 'a' - 'A'
			}
		}
		return t
	}()

	// tcharTable: RFC 9110 5.6.2 token characters.
	tcharTable = byteSet(alnum + "!#$%&'*+-.^_`|~")

	// valueTable: field-value bytes (RFC 9110 5.5): HTAB, SP, VCHAR, obs-text.
	valueTable = func() (t [256]bool) {
		for i := range t {
			t[i] = i == '\t' || (i >= 0x20 && i != 0x7f)
		}
		return t
	}()

	// targetTable: request-target bytes: visible ASCII except '#', plus obs-text (UTF-8 paths are tolerated).
	targetTable = func() (t [256]bool) {
		for i := range t {
			t[i] = i > 0x20 && i != 0x7f && i != '#'
		}
		return t
	}()
)

const alnum = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"

func byteSet(chars string) (t [256]bool) {
	for i := 0; i < len(chars); i++ {
		t[chars[i]] = true
	}
	return t
}
