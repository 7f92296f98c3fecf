// Chunked transfer coding: the incremental ChunkedDecoder and the encoding helpers.

package codec

import (
	"math"
	"strconv"
)

// Bounds on chunked framing that a peer could otherwise inflate without sending payload.
const (
	maxChunkSizeDigits = 16       // hex digits in a chunk-size, leading zeros included
	maxChunkLineBytes  = 4 << 10  // a chunk-size line with its extensions, CRLF excluded
	maxTrailerBytes    = 16 << 10 // the whole trailer section, final CRLF included
)

// LastChunk ends a chunked body that has no trailers.
const LastChunk = "0\r\n\r\n"

// AppendChunkHeader appends the chunk-size line for a chunk of size bytes ("%x\r\n") to dst.
// size must be positive: a zero size is the last-chunk, which needs LastChunk's extra CRLF.
// It allocates only if dst must grow. Safe for concurrent use on distinct dst.
func AppendChunkHeader(dst []byte, size int) []byte {
	dst = strconv.AppendInt(dst, int64(size), 16)
	return append(dst, '\r', '\n')
}

// chunkState is the decoder's position in the chunked grammar (RFC 9112 7.1).
// Transitions: size -> extName0 | sizeLF; extName0 -> extName; extName -> extName0 | extValue0 | sizeLF;
// extValue0 -> extToken | extQuoted; extToken -> extName0 | sizeLF; extQuoted -> extQuotedPair | extQuotedEnd;
// extQuotedPair -> extQuoted; extQuotedEnd -> extName0 | sizeLF; sizeLF -> data (size > 0) | trailerStart
// (size 0); data -> dataCR -> dataLF -> size; trailerStart -> trailerName -> trailerValue -> trailerLF ->
// trailerStart; trailerStart -> endLF -> done. Any unexpected byte moves the decoder to a sticky error
// instead. The states from trailerStart up to done are the trailer section (InTrailers).
type chunkState uint8

const (
	stSize          chunkState = iota // hex digits of chunk-size
	stExtName0                        // ';' seen: first byte of an extension name expected
	stExtName                         // extension name
	stExtValue0                       // '=' seen: token or DQUOTE expected
	stExtToken                        // token extension value
	stExtQuoted                       // inside a quoted-string extension value
	stExtQuotedPair                   // after a backslash in a quoted-string
	stExtQuotedEnd                    // closing DQUOTE seen: ';' or CR expected
	stSizeLF                          // CR of the size line seen, LF expected
	stData                            // payload bytes of the current chunk
	stDataCR                          // CR after payload expected
	stDataLF                          // LF after payload expected
	stTrailerStart                    // start of a trailer field line, or CR of the final CRLF
	stTrailerName                     // trailer field name
	stTrailerValue                    // trailer field value, up to CR
	stTrailerLF                       // CR of a trailer line seen, LF expected
	stEndLF                           // final CR seen, LF expected
	stDone                            // body complete
)

var chunkStateNames = [...]string{"size", "extName0", "extName", "extValue0", "extToken", "extQuoted",
	"extQuotedPair", "extQuotedEnd", "sizeLF", "data", "dataCR", "dataLF", "trailerStart", "trailerName",
	"trailerValue", "trailerLF", "endLF", "done"}

// String names the state, for test failures and debugging.
func (s chunkState) String() string {
	if int(s) < len(chunkStateNames) {
		return chunkStateNames[s]
	}
	return "chunkState(?)"
}

// ChunkedDecoder walks a chunked body incrementally, byte boundaries anywhere.
// The zero value is ready and unlimited; Reset readies it for a new body. A decoder is owned by one
// goroutine (the connection's event loop) and is not safe for concurrent use. It never allocates.
type ChunkedDecoder struct {
	state      chunkState
	size       uint64 // chunk-size being read (stSize) or payload bytes left in the chunk (stData)
	digits     int    // hex digits read for the current size
	lineBytes  int    // bytes of the current size line so far
	trailerLen int    // bytes of the trailer section so far
	total      int64  // payload bytes announced so far
	maxBody    int64  // limit on total; <= 0 means unlimited
	err        error  // sticky once set
}

// Reset readies d for a new body. maxBody <= 0 means unlimited; payload beyond it is ErrBodyTooLarge.
func (d *ChunkedDecoder) Reset(maxBody int64) {
	*d = ChunkedDecoder{maxBody: maxBody}
}

// Done reports whether the last-chunk and trailer section have been consumed.
func (d *ChunkedDecoder) Done() bool { return d.state == stDone }

// InTrailers reports whether d is inside the trailer section: the last-chunk line ("0\r\n", extensions
// allowed) has been consumed and the final empty line has not. It is false once Done.
//
// Check InTrailers before calling Next: if true, src[:n] of that call is trailer-section bytes (field
// lines and the final CRLF) and nothing else, because Next returns right after the last-chunk line.
// A caller that forwards trailers collects those spans into the section for ForEachTrailer; one that
// drops them (a proxy must not forward what it cannot vet) sends LastChunk's final CRLF instead.
func (d *ChunkedDecoder) InTrailers() bool { return d.state >= stTrailerStart && d.state < stDone }

// Next consumes framing and payload from the start of src. It returns how many bytes it consumed (n),
// the payload among them (data, a view into src[:n], possibly empty) and done once the final CRLF
// has been consumed. A pass-through proxy forwards src[:n]; a decoding one forwards data.
// n is 0 only when src is empty, the body is already done, or err != nil, so callers loop while
// n > 0 && !done, then wait for more bytes; bytes after the body stay unconsumed.
//
// A call yields at most one payload span and returns right after it, so a call that returns
// payload never fails: a framing error is reported by the next call, with n == 0. A call also
// returns right after the last-chunk line (n > 0, data nil, done false), so that the bytes of every
// later call are trailer section only (see InTrailers). Errors are ErrBadChunk or ErrBodyTooLarge,
// and sticky. Chunk extensions are validated and skipped; trailers are validated and consumed but
// not returned as data.
func (d *ChunkedDecoder) Next(src []byte) (n int, data []byte, done bool, err error) {
	if d.err != nil {
		return 0, nil, false, d.err
	}
	i := 0
	for i < len(src) && d.state != stDone {
		if d.state == stData {
			k := len(src) - i
			if uint64(k) > d.size {
				k = int(d.size)
			}
			d.size -= uint64(k)
			if d.size == 0 {
				d.state = stDataCR
			}
			return i + k, src[i : i+k], false, nil
		}
		if err := d.step(src[i]); err != nil {
			d.err = err
			return 0, nil, false, err
		}
		i++
		if d.state == stTrailerStart && d.trailerLen == 0 {
			return i, nil, false, nil // the last-chunk line ends here; what follows is trailer section
		}
	}
	return i, nil, d.state == stDone, nil
}

// step advances the framing state machine by one byte. It is never called in stData or stDone.
func (d *ChunkedDecoder) step(c byte) error {
	switch d.state {
	case stSize:
		if v := hexValue[c]; v >= 0 {
			if d.digits == maxChunkSizeDigits {
				return ErrBadChunk
			}
			d.size = d.size<<4 | uint64(v)
			d.digits++
			return d.countLine()
		}
		if d.digits == 0 {
			return ErrBadChunk
		}
		if err := d.sizeRead(); err != nil {
			return err
		}
		return d.extEnd(c)
	case stExtName0, stExtValue0:
		switch {
		case tcharTable[c] && d.state == stExtName0:
			d.state = stExtName
		case tcharTable[c]:
			d.state = stExtToken
		case c == '"' && d.state == stExtValue0:
			d.state = stExtQuoted
		default:
			return ErrBadChunk // empty name or value, whitespace, bare LF
		}
		return d.countLine()
	case stExtName, stExtToken:
		switch {
		case tcharTable[c]:
			return d.countLine()
		case c == '=' && d.state == stExtName:
			d.state = stExtValue0
			return d.countLine()
		}
		return d.extEnd(c)
	case stExtQuoted:
		switch {
		case c == '"':
			d.state = stExtQuotedEnd
		case c == '\\':
			d.state = stExtQuotedPair
		case !valueTable[c]: // qdtext is valueTable without DQUOTE and backslash
			return ErrBadChunk // control byte, or CR of an unbalanced quote
		}
		return d.countLine()
	case stExtQuotedPair:
		if !valueTable[c] { // HTAB / SP / VCHAR / obs-text
			return ErrBadChunk
		}
		d.state = stExtQuoted
		return d.countLine()
	case stExtQuotedEnd:
		return d.extEnd(c)
	case stSizeLF:
		if c != '\n' {
			return ErrBadChunk
		}
		if d.size == 0 { // last-chunk
			d.state = stTrailerStart
		} else {
			d.state = stData
		}
	case stDataCR:
		if c != '\r' {
			return ErrBadChunk
		}
		d.state = stDataLF
	case stDataLF:
		if c != '\n' {
			return ErrBadChunk
		}
		d.state, d.size, d.digits, d.lineBytes = stSize, 0, 0, 0
	default:
		return d.stepTrailer(c)
	}
	return nil
}

// extEnd handles the byte after a chunk-size or a complete extension: ';' starts another extension
// and CR ends the line. Anything else, whitespace included, is an error: RFC 9112 allows BWS around
// ';' and '=', but other parsers disagree on it, and a disagreement on framing is a smuggling vector.
func (d *ChunkedDecoder) extEnd(c byte) error {
	switch c {
	case ';':
		d.state = stExtName0
		return d.countLine()
	case '\r':
		d.state = stSizeLF
		return nil
	}
	return ErrBadChunk
}

// sizeRead validates a complete chunk-size against int64 and the body limit.
func (d *ChunkedDecoder) sizeRead() error {
	if d.size > math.MaxInt64 || int64(d.size) > math.MaxInt64-d.total {
		return ErrBadChunk
	}
	d.total += int64(d.size)
	if d.maxBody > 0 && d.total > d.maxBody {
		return ErrBodyTooLarge
	}
	return nil
}

// countLine bounds the size line, extensions included.
func (d *ChunkedDecoder) countLine() error {
	d.lineBytes++
	if d.lineBytes > maxChunkLineBytes {
		return ErrBadChunk
	}
	return nil
}

// stepTrailer advances through the trailer section: field lines "name: value CRLF", then CRLF.
func (d *ChunkedDecoder) stepTrailer(c byte) error {
	d.trailerLen++
	if d.trailerLen > maxTrailerBytes {
		return ErrBadChunk
	}
	switch d.state {
	case stTrailerStart:
		switch {
		case c == '\r':
			d.state = stEndLF
		case tcharTable[c]:
			d.state = stTrailerName
		default:
			return ErrBadChunk // bare LF, obs-fold, bad name
		}
	case stTrailerName:
		switch {
		case c == ':':
			d.state = stTrailerValue
		case !tcharTable[c]:
			return ErrBadChunk
		}
	case stTrailerValue:
		switch {
		case c == '\r':
			d.state = stTrailerLF
		case !valueTable[c]:
			return ErrBadChunk
		}
	case stTrailerLF:
		if c != '\n' {
			return ErrBadChunk
		}
		d.state = stTrailerStart
	case stEndLF:
		if c != '\n' {
			return ErrBadChunk
		}
		d.state = stDone
	}
	return nil
}

// hexValue maps a byte to its hex digit value, or -1.
var hexValue = func() (t [256]int8) {
	for i := range t {
		switch {
		case '0' <= i && i <= '9':
			t[i] = int8(i - '0')
		case 'a' <= i && i <= 'f':
			t[i] = int8(i - 'a' + 10)
		case 'A' <= i && i <= 'F':
			t[i] = int8(i - 'A' + 10)
		default:
			t[i] = -1
		}
	}
	return t
}()
