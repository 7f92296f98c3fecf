// Head rewriting in both directions: hop-by-hop headers out, framing re-decided.

package engine

import (
	"strconv"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool"
)

// buildUpstreamHead writes the request head for the upstream into a pooled
// buffer: the request line in origin form over HTTP/1.1, the client's
// end-to-end headers (Host included, unchanged; the node address when the
// client sent none), and the body framing.
// Hop-by-hop headers, and those the client's Connection header names, stay
// behind: they describe the client's connection, not ours.
func (ex *exchange) buildUpstreamHead(req *codec.Request, node string) *pool.Buffer {
	path := req.Path
	var edits *filters.HeaderEdits
	if ex.chain != nil {
		edits = &ex.fx.ReqEdits
		if ex.fx.Path != nil {
			path = ex.fx.Path
		}
	}
	b := pool.Get(ex.headLen + 64 + len(req.Host) + len(node) + len(path))
	dst := b.B
	dst = append(dst, req.Method...)
	dst = append(dst, ' ')
	dst = append(dst, path...)
	if len(req.Query) > 0 {
		dst = append(dst, '?')
		dst = append(dst, req.Query...)
	}
	dst = append(dst, " HTTP/1.1\r\n"...)
	// For an absolute-form target the codec took Host from its authority,
	// which replaces any Host header (RFC 9112 3.2.2).
	absolute := len(req.URI) > 0 && req.URI[0] != '/' && req.URI[0] != '*'
	switch {
	case len(req.Host) == 0: // HTTP/1.0 may omit Host; HTTP/1.1 upstreams require it
		dst = appendHeader(dst, "Host", node)
	case absolute:
		dst = appendHeader(dst, "Host", string(req.Host))
	}
	// An empty Host field is replaced by the node, never sent beside it.
	dst = appendEndToEnd(dst, req.Headers, absolute || len(req.Host) == 0, edits)
	dst = appendFraming(dst, req.Chunked, req.ContentLength)
	dst = append(dst, "\r\n"...)
	b.B = dst
	return b
}

// appendClientHead writes the response head for the client.
func appendClientHead(dst []byte, r *codec.Response, framing respFraming, clientMinor int, closing bool, edits *filters.HeaderEdits) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(r.Status), 10)
	dst = append(dst, ' ')
	dst = append(dst, r.Reason...)
	dst = append(dst, "\r\n"...)
	dst = appendEndToEnd(dst, r.Headers, false, edits)
	switch {
	case r.Chunked && framing == frameAsIs && clientMinor == 1, framing == frameEncode:
		dst = append(dst, "Transfer-Encoding: chunked\r\n"...)
	case r.ContentLength >= 0:
		dst = appendContentLength(dst, r.ContentLength)
	}
	switch {
	case closing:
		dst = append(dst, "Connection: close\r\n"...)
	case clientMinor == 0:
		dst = append(dst, "Connection: keep-alive\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// appendEndToEnd copies the headers that are not hop-by-hop, leaving out Host
// when dropHost is set, and applies the filters' edits. Content-Length is
// written once by the caller, since the codec accepts identical duplicates an
// upstream might not.
func appendEndToEnd(dst []byte, hs codec.Headers, dropHost bool, edits *filters.HeaderEdits) []byte {
	for _, h := range hs {
		// Connection may not strip Host: a request without it would reach
		// the upstream's default virtual host.
		listed := hs.Listed(h.Name) && !isHost(h.Name)
		if codec.IsHopByHop(h.Name) || listed || isContentLength(h.Name) || dropHost && isHost(h.Name) {
			continue
		}
		if edits != nil && edits.Removes(h.Name) {
			continue
		}
		dst = append(dst, h.Name...)
		dst = append(dst, ": "...)
		dst = append(dst, h.Value...)
		dst = append(dst, "\r\n"...)
	}
	if edits != nil {
		for _, h := range edits.Set {
			dst = appendHeader(dst, h.Name, h.Value)
		}
		for _, h := range edits.Append {
			dst = appendHeader(dst, h.Name, h.Value)
		}
	}
	return dst
}

func appendHeader[V string | []byte](dst []byte, name string, value V) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

func isHost(name []byte) bool {
	return len(name) == 4 && name[0]|0x20 == 'h' && name[1]|0x20 == 'o' && name[2]|0x20 == 's' && name[3]|0x20 == 't'
}

// appendFraming writes the request body framing: chunked is passed through
// as chunked, a length as one Content-Length.
func appendFraming(dst []byte, chunked bool, contentLength int64) []byte {
	if chunked {
		return append(dst, "Transfer-Encoding: chunked\r\n"...)
	}
	if contentLength >= 0 {
		return appendContentLength(dst, contentLength)
	}
	return dst
}

func appendContentLength(dst []byte, n int64) []byte {
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, "\r\n"...)
}

func isContentLength(name []byte) bool {
	const cl = "content-length"
	if len(name) != len(cl) {
		return false
	}
	for i := range name {
		if name[i]|0x20 != cl[i] { // '-'|0x20 is '-'
			return false
		}
	}
	return true
}
