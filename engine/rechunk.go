// Chunked responses in canonical form: the client sees size lines Loopgate
// wrote, never the upstream's (no extensions, no odd whitespace), so a
// strict client parser accepts what a lax upstream sent.

package engine

import (
	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool"
)

// writeChunk sends data as one chunk. A small chunk is framed in loop.out
// and leaves in one write, together with a head still held back; a large
// one is framed around the payload, which is never copied.
func (ex *exchange) writeChunk(data []byte) bool {
	cc, l := ex.cc, ex.loop
	if len(data) <= maxCoalesce {
		if cc.headPending {
			l.out = appendChunk(l.out, data)
			return cc.flushHead()
		}
		l.out = appendChunk(l.takeOut(), data)
		return cc.writeBody(l.out)
	}
	if !cc.flushHead() {
		return false
	}
	l.out = codec.AppendChunkHeader(l.takeOut(), len(data))
	return cc.writeBody(l.out) && cc.writeBody(data) && cc.writeBody(crlf)
}

func appendChunk(dst, data []byte) []byte {
	dst = codec.AppendChunkHeader(dst, len(data))
	dst = append(dst, data...)
	return append(dst, '\r', '\n')
}

// writeLastChunk ends the body: the last-chunk, the kept trailer fields a
// TE: trailers client may see, and the final CRLF.
func (ex *exchange) writeLastChunk() bool {
	cc, l := ex.cc, ex.loop
	var dst []byte
	if cc.headPending {
		dst = l.out
	} else {
		dst = l.takeOut()
	}
	dst = append(dst, '0', '\r', '\n')
	if t := ex.resp.trailers; t != nil {
		var edits *filters.HeaderEdits
		if ex.chain != nil {
			edits = &ex.fx.RespEdits // a field the route removes from the head goes from the trailers too
		}
		codec.ForEachTrailer(t.B, func(name, value []byte) {
			if !codec.ForbiddenTrailer(name) && (edits == nil || !edits.Removes(name)) {
				dst = appendHeader(dst, string(name), value)
			}
		})
		t.SafeRelease()
		ex.resp.trailers = nil
	}
	l.out = append(dst, '\r', '\n')
	if cc.headPending {
		return cc.flushHead()
	}
	return cc.writeBody(l.out)
}

// keepTrailers collects the upstream's trailer section for a client that
// accepts trailers. The decoder bounds the section, so this does too.
func (ex *exchange) keepTrailers(raw []byte) {
	if len(raw) == 0 {
		return
	}
	if ex.resp.trailers == nil {
		ex.resp.trailers = pool.Get(len(raw))
	}
	ex.resp.trailers.B = append(ex.resp.trailers.B, raw...)
}
