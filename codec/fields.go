// Field-line parsing shared by requests and responses, and the framing facts it collects.

package codec

import (
	"bytes"
	"encoding/binary"
)

// fieldState collects, while field lines are parsed, what the framing and connection rules need.
// It lives on the parser's stack for one call.
type fieldState struct {
	isRequest bool // apply request-only rules (Host, Expect)

	contentLength int64 // -1 when absent
	teSeen        bool  // a Transfer-Encoding field was seen (its value was validated as "chunked")

	connClose     bool // Connection lists "close"
	connKeepAlive bool // Connection lists "keep-alive"
	connNames     bool // Connection names a field that is not hop-by-hop already
	teTrailers    bool // TE lists "trailers"
	connUpgrade   bool // Connection lists "upgrade"
	upgradeSeen   bool // an Upgrade field is present

	expectContinue bool   // Expect: 100-continue
	hostCount      int    // number of Host fields
	host           []byte // value of the Host field
	hostName       []byte // host without its port, as splitHost found it
	hostPort       int    // its port, -1 when absent
	hostUpper      bool   // hostName has an upper-case letter
}

// parseFields parses field lines from buf[pos:] up to and including the empty line that ends the head,
// appending them to *hdrs. It returns the offset just past that empty line, or (0, nil) when buf ends first.
// Errors are request sentinels; ParseResponse maps them to 502.
func parseFields(buf []byte, pos int, lim *Limits, fs *fieldState, hdrs *Headers) (int, error) {
	for {
		if pos >= len(buf) {
			return needMoreHead(buf, lim)
		}
		switch buf[pos] {
		case '\r':
			if pos+1 >= len(buf) {
				return needMoreHead(buf, lim)
			}
			if buf[pos+1] != '\n' {
				return 0, ErrMalformed
			}
			pos += 2
			if pos > lim.MaxHeaderBytes {
				return 0, ErrHeadersTooLarge
			}
			return pos, nil
		case ' ', '\t':
			return 0, ErrObsFold
		}

		nl := bytes.IndexByte(buf[pos:], '\n')
		if nl < 0 {
			return needMoreHead(buf, lim)
		}
		next := pos + nl + 1 // offset of the next line
		if next > lim.MaxHeaderBytes || len(*hdrs) >= lim.MaxHeaderCount {
			return 0, ErrHeadersTooLarge
		}
		if nl == 0 || buf[next-2] != '\r' {
			return 0, ErrMalformed // bare LF
		}
		name, value, err := splitFieldLine(buf[pos : next-2])
		if err != nil {
			return 0, err
		}
		appendHeader(hdrs, name, value)
		if err := fs.apply(name, value); err != nil {
			return 0, err
		}
		pos = next
	}
}

// appendHeader appends one field to *hdrs. Assigning the fields one by one into the slot, rather than
// appending a Header literal, avoids a store-forwarding stall in the compiled copy.
func appendHeader(hdrs *Headers, name, value []byte) {
	h := *hdrs
	if len(h) < cap(h) {
		h = h[:len(h)+1]
	} else {
		h = append(h, Header{})
	}
	slot := &h[len(h)-1]
	slot.Name = name
	slot.Value = value
	*hdrs = h
}

// needMoreHead reports that the head is incomplete, unless buf is already too long to hold a head within limits.
// An incomplete head is at least len(buf)+1 bytes long.
func needMoreHead(buf []byte, lim *Limits) (int, error) {
	if len(buf) >= lim.MaxHeaderBytes {
		return 0, ErrHeadersTooLarge
	}
	return 0, nil
}

// splitFieldLine splits one field line (without CRLF) into name and OWS-trimmed value, validating both.
func splitFieldLine(line []byte) (name, value []byte, err error) {
	i := 0
	for i < len(line) && tcharTable[line[i]] {
		i++
	}
	if i == len(line) {
		return nil, nil, ErrMalformed // no colon
	}
	switch line[i] {
	case ':':
	case ' ', '\t':
		return nil, nil, ErrSpaceBeforeColon
	default:
		return nil, nil, ErrBadHeaderName
	}
	if i == 0 {
		return nil, nil, ErrBadHeaderName
	}
	value = line[i+1:]
	if !validValue(value) {
		return nil, nil, ErrBadHeaderValue
	}
	return line[:i], TrimOWS(value), nil
}

// validValue reports whether every byte of v is a field-value byte (valueTable).
// It tests sixteen bytes a step, as two words, for a control byte or DEL; the last 1 to 15 bytes of a
// value of at least 8 take one or two words, the last ending at the value's end and overlapping bytes
// already found clean, and a value under 8 bytes one word (shortWord). Only where a word shows such a
// byte (usually an HTAB) does it look byte by byte, from there on.
func validValue(v []byte) bool {
	n, i := len(v), 0
	for ; i+16 <= n; i += 16 {
		w := v[i : i+16] // of a constant length: the word loads need no bounds checks
		if controlBytes2(binary.LittleEndian.Uint64(w[:8]), binary.LittleEndian.Uint64(w[8:16])) != 0 {
			return validBytes(v[i:])
		}
	}
	switch {
	case i == n:
		return true
	case n >= 8:
		w := controlBytes(binary.LittleEndian.Uint64(v[n-8:]))
		if n-i > 8 {
			w |= controlBytes(binary.LittleEndian.Uint64(v[i:]))
		}
		if w == 0 {
			return true
		}
	case controlBytes(shortWord(v)) == 0:
		return true
	}
	return validBytes(v[i:])
}

// shortWord packs a value of 1 to 7 bytes into one word for controlBytes: every byte of it at least
// once (two loads that overlap), the rest of the word filled with 'A'.
func shortWord(v []byte) uint64 {
	const fill = 0x4141414141414141
	switch n := len(v); {
	case n >= 4:
		return uint64(binary.LittleEndian.Uint32(v)) | uint64(binary.LittleEndian.Uint32(v[n-4:]))<<32
	case n >= 2:
		return uint64(binary.LittleEndian.Uint16(v)) | uint64(binary.LittleEndian.Uint16(v[n-2:]))<<16 | fill&^0xffffffff
	}
	return uint64(v[0]) | fill&^0xff
}

// controlBytes is not 0 when some byte of the word x is below 0x20 or is 0x7f (DEL). Both tests are
// exact as a yes or no (a borrow may mark bytes above a true one, never a word without one), and a
// byte of 0x80 or more marks neither.
func controlBytes(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	below20 := (x - ones*0x20) &^ x & highs
	del := x ^ ones*0x7f
	return below20 | (del-ones)&^del&highs
}

// controlBytes2 is controlBytes of x | controlBytes of y, with the high bits masked once.
func controlBytes2(x, y uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	dx, dy := x^ones*0x7f, y^ones*0x7f
	return ((x-ones*0x20)&^x | (y-ones*0x20)&^y | (dx-ones)&^dx | (dy-ones)&^dy) & highs
}

// validBytes is validValue's definition, a byte at a time.
func validBytes(v []byte) bool {
	for _, c := range v {
		if !valueTable[c] {
			return false
		}
	}
	return true
}

// apply records what a field means for framing and connection handling.
func (fs *fieldState) apply(name, value []byte) error {
	switch len(name) {
	case 2:
		if fs.isRequest && EqualFold(name, "te") {
			fs.teTrailers = fs.teTrailers || listHas(value, "trailers")
		}
	case 4:
		if fs.isRequest && EqualFold(name, "host") {
			fs.hostCount++
			if fs.hostCount > 1 {
				return ErrDuplicateHost
			}
			if len(value) > 0 {
				host, port, upper, ok := splitHost(value)
				if !ok {
					return ErrBadHost
				}
				fs.hostName, fs.hostPort, fs.hostUpper = host, port, upper
			}
			fs.host = value
		}
	case 6:
		if fs.isRequest && EqualFold(name, "expect") {
			fs.expectContinue = fs.expectContinue || EqualFold(value, "100-continue")
		}
	case 7:
		if EqualFold(name, "upgrade") {
			fs.upgradeSeen = true
		}
	case 10:
		if EqualFold(name, "connection") {
			fs.connectionTokens(value)
		}
	case 14:
		if EqualFold(name, "content-length") {
			n, ok := parseContentLength(value)
			if !ok || (fs.contentLength >= 0 && n != fs.contentLength) {
				return ErrBadContentLength
			}
			fs.contentLength = n
		}
	case 17:
		if EqualFold(name, "transfer-encoding") {
			// Only a single "chunked" is accepted: a second field would apply chunked twice or add a coding.
			if fs.teSeen || !EqualFold(value, "chunked") {
				return ErrUnknownTransferEncoding
			}
			fs.teSeen = true
		}
	}
	return nil
}

// connectionTokens notes the options a Connection value lists: one pass
// over its comma-separated tokens (ignoring case and OWS), where asking
// listHas for each option would read the value once per option.
func (fs *fieldState) connectionTokens(value []byte) {
	for len(value) > 0 {
		end := bytes.IndexByte(value, ',')
		if end < 0 {
			end = len(value)
		}
		tok := TrimOWS(value[:end])
		switch len(tok) {
		case len("close"):
			fs.connClose = fs.connClose || EqualFold(tok, "close")
		case len("upgrade"):
			fs.connUpgrade = fs.connUpgrade || EqualFold(tok, "upgrade")
		case len("keep-alive"):
			fs.connKeepAlive = fs.connKeepAlive || EqualFold(tok, "keep-alive")
		}
		fs.connNames = fs.connNames || len(tok) > 0 && !IsHopByHop(tok)
		if end == len(value) {
			break
		}
		value = value[end+1:]
	}
}

// maxContentLengthDigits keeps a decimal Content-Length below 2^63 without overflow checks.
const maxContentLengthDigits = 18

// parseContentLength parses a Content-Length value: digits only, or a comma list of identical such values.
func parseContentLength(v []byte) (int64, bool) {
	n := int64(-1)
	for {
		end := bytes.IndexByte(v, ',')
		if end < 0 {
			end = len(v)
		}
		digits := TrimOWS(v[:end])
		if len(digits) == 0 || len(digits) > maxContentLengthDigits {
			return 0, false
		}
		var x int64
		for _, c := range digits {
			if c < '0' || c > '9' {
				return 0, false
			}
			x = x*10 + int64(c-'0')
		}
		if n >= 0 && x != n {
			return 0, false
		}
		n = x
		if end == len(v) {
			return n, true
		}
		v = v[end+1:]
	}
}
