// Request field helpers shared by the filters: header and cookie lookups,
// arena reservation.

package transform

import (
	"bytes"
	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

// header returns the value of the first field called name (any case) and
// whether there is one; a present field may have an empty value.
func header(h codec.Headers, name string) ([]byte, bool) {
	for i := range h {
		if codec.EqualFold(h[i].Name, name) {
			return h[i].Value, true
		}
	}
	return nil, false
}

// cookie returns the value of the first cookie called name (case-sensitive,
// as cookie names are) across every Cookie field, without the optional
// surrounding double quotes.
func cookie(h codec.Headers, name string) ([]byte, bool) {
	for i := range h {
		if !codec.EqualFold(h[i].Name, "cookie") {
			continue
		}
		v := h[i].Value
		for len(v) > 0 {
			pair := v
			if semi := bytes.IndexByte(v, ';'); semi >= 0 {
				pair, v = v[:semi], v[semi+1:]
			} else {
				v = nil
			}
			pair = codec.TrimOWS(pair)
			eq := bytes.IndexByte(pair, '=')
			if eq < 0 || string(codec.TrimOWS(pair[:eq])) != name {
				continue
			}
			val := codec.TrimOWS(pair[eq+1:])
			if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
				val = val[1 : len(val)-1]
			}
			return val, true
		}
	}
	return nil, false
}

// zeros backs reserve: copying a run of it into the arena claims that many
// bytes for the caller to overwrite.
var zeros [16 << 10]byte

// reserve returns n bytes in the exchange's arena for the caller to fill,
// so values built from several parts cost no allocation. filters.Exchange
// offers only Own (copy in), hence the copy of zeros. Past len(zeros), far
// beyond any default head size, it falls back to the heap.
func reserve(x *filters.Exchange, n int) []byte {
	if n <= len(zeros) {
		return x.Own(zeros[:n])
	}
	return make([]byte, n)
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
