// Head rewriting in both directions: hop-by-hop headers out, framing re-decided.

package engine

import (
	"strconv"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/pool"
)

// buildUpstreamHead writes the request head for the upstream into a pooled
// buffer: the request line in origin form over HTTP/1.1, the client's
// end-to-end headers (Host included, unchanged; the node address when the
// client sent none), and the body framing.
// Hop-by-hop headers, and those the client's Connection header names, stay
// behind: they describe the client's connection, not ours.
func (ex *exchange) buildUpstreamHead(req *codec.Request, headLen int, node string) *pool.Buffer {
	b := pool.Get(headLen + 64 + len(node))
	dst := b.B
	dst = append(dst, req.Method...)
	dst = append(dst, ' ')
	dst = append(dst, req.Path...)
	if len(req.Query) > 0 {
		dst = append(dst, '?')
		dst = append(dst, req.Query...)
	}
	dst = append(dst, " HTTP/1.1\r\n"...)
	if len(req.Host) == 0 { // HTTP/1.0 may omit it; HTTP/1.1 upstreams require it
		dst = append(dst, "Host: "...)
		dst = append(dst, node...)
		dst = append(dst, "\r\n"...)
	}
	dst = appendEndToEnd(dst, req.Headers)
	if req.Chunked {
		dst = append(dst, "Transfer-Encoding: chunked\r\n"...)
	}
	dst = append(dst, "\r\n"...)
	b.B = dst
	return b
}

// appendClientHead writes the response head for the client.
func appendClientHead(dst []byte, r *codec.Response, framing respFraming, clientMinor int, closing bool) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(r.Status), 10)
	dst = append(dst, ' ')
	dst = append(dst, r.Reason...)
	dst = append(dst, "\r\n"...)
	dst = appendEndToEnd(dst, r.Headers)
	if r.Chunked && framing == frameAsIs || framing == frameEncode {
		dst = append(dst, "Transfer-Encoding: chunked\r\n"...)
	}
	switch {
	case closing:
		dst = append(dst, "Connection: close\r\n"...)
	case clientMinor == 0:
		dst = append(dst, "Connection: keep-alive\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// appendEndToEnd copies the headers that are not hop-by-hop.
func appendEndToEnd(dst []byte, hs codec.Headers) []byte {
	for _, h := range hs {
		if codec.IsHopByHop(h.Name) || hs.Listed(h.Name) {
			continue
		}
		dst = append(dst, h.Name...)
		dst = append(dst, ": "...)
		dst = append(dst, h.Value...)
		dst = append(dst, "\r\n"...)
	}
	return dst
}
