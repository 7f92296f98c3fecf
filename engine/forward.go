// Head rewriting in both directions: hop-by-hop headers out, framing re-decided.

package engine

import (
	"bytes"
	"encoding/binary"
	"strconv"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool"
)

// buildUpstreamHead writes the request head for the upstream into a pooled
// buffer: the request line in origin form over HTTP/1.1 with the normalised
// (or rewritten, then normalised again) path, the normalised Host, the
// client's end-to-end headers, and the body framing.
// Hop-by-hop headers, and those the client's Connection header names, stay
// behind: they describe the client's connection, not ours. So do fields a
// client must not set: the identity headers the gateway manages, and names
// with '_' unless allow_underscore_headers.
func (ex *exchange) buildUpstreamHead(req *codec.Request, node string) (*pool.Buffer, error) {
	l := ex.loop
	snap := ex.snap
	path := req.Path
	var edits *filters.HeaderEdits
	if ex.chain != nil {
		edits = &ex.fx.ReqEdits
		if ex.fx.Path != nil {
			p, _, err := codec.NormalizePath(l.scratch[:0], ex.fx.Path)
			if err != nil {
				return nil, err
			}
			path = p
		}
	}
	b := l.heads.Get(ex.head.headLen + 64 + len(req.Host) + len(node) + len(path) + len(ex.cc.certHeaders))
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
	// which replaces any Host header (RFC 9112 3.2.2). HTTP/1.0 may omit
	// Host; HTTP/1.1 upstreams require it, so the node stands in.
	dst = append(dst, "Host: "...)
	if len(req.Host) == 0 {
		dst = append(dst, node...)
	} else {
		dst = append(dst, req.Host...)
		if ex.head.hostPort >= 0 {
			dst = append(dst, ':')
			dst = appendPort(dst, ex.head.hostPort)
		}
	}
	dst = append(dst, "\r\n"...)
	drop := clientFields{managed: &snap.managed, underscore: !snap.allowUnderscore, expect: ex.body.continueSent}
	dst = appendEndToEnd(dst, req.Headers, req.ConnectionNames, true, edits, &drop)
	if ex.upgrade.asked { // the one case Upgrade is not hop-by-hop: the tunnel is asked of the upstream
		dst = ex.appendUpgrade(dst, req.Headers)
	}
	dst = append(dst, ex.cc.certHeaders...) // the client certificate's, when its listener sends them
	if ex.body.dechunk {
		dst = appendContentLength(dst, ex.body.payload)
	} else {
		dst = appendFraming(dst, req.Chunked, req.ContentLength)
	}
	dst = append(dst, "\r\n"...)
	b.B = dst
	return b, nil
}

// clientFields are request fields a client may send but the upstream must
// not receive from it.
type clientFields struct {
	managed    *headerNames // identity headers the gateway sets itself
	underscore bool         // names containing '_' (WSGI/CGI fold them onto '-')
	expect     bool         // Expect, when the gateway answered it already
}

func (d *clientFields) drops(name []byte) bool {
	if d.underscore && bytes.IndexByte(name, '_') >= 0 {
		return true
	}
	if d.expect && codec.EqualFold(name, "expect") {
		return true
	}
	return d.managed.has(name)
}

// appendClientHead writes the response head for the client; hsts is the
// listener's rendered Strict-Transport-Security line, or nil.
func appendClientHead(dst []byte, r *codec.Response, framing respFraming, clientMinor int, closing bool, edits *filters.HeaderEdits, hsts []byte) []byte {
	dst = appendStatusLine(dst, r)
	dst = appendEndToEnd(dst, r.Headers, r.ConnectionNames, false, edits, nil)
	dst = append(dst, hsts...)
	switch {
	case framing == frameRechunk, framing == frameEncode,
		r.Chunked && framing == frameAsIs && clientMinor == 1: // HEAD: the head GET would have had
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

// appendStatusLine writes r's status line as HTTP/1.1, the version the
// gateway speaks to its clients whatever the upstream spoke. "200 OK", the
// line nearly every response has, is copied whole: building it costs four
// appends and the digit arithmetic (about 50 instructions more). A table of
// more statuses compares reasons through memequal and saves nothing.
func appendStatusLine(dst []byte, r *codec.Response) []byte {
	if r.Status == 200 && len(r.Reason) == 2 && r.Reason[0] == 'O' && r.Reason[1] == 'K' {
		return append(dst, "HTTP/1.1 200 OK\r\n"...)
	}
	dst = append(dst, "HTTP/1.1 "...)
	if s := r.Status; s >= 100 && s <= 999 { // what the codec parses: three digits, without strconv
		dst = append(dst, byte('0'+s/100), byte('0'+s/10%10), byte('0'+s%10))
	} else {
		dst = strconv.AppendInt(dst, int64(s), 10)
	}
	dst = append(dst, ' ')
	dst = append(dst, r.Reason...)
	return append(dst, "\r\n"...)
}

// appendEndToEnd copies the headers that are not hop-by-hop, leaving out Host
// when dropHost is set and what client (when set) drops, and applies the
// filters' edits. Content-Length is written once by the caller, since the
// codec accepts identical duplicates an upstream might not. lists is the
// codec's ConnectionNames: only then can a Connection field name a field
// IsHopByHop does not drop anyway, so only then is every field looked up in
// the Connection lists (most messages carry no Connection field, or one
// naming only keep-alive).
func appendEndToEnd(dst []byte, hs codec.Headers, lists, dropHost bool, edits *filters.HeaderEdits, client *clientFields) []byte {
	for i := range hs { // by index: a Header is two slices, copied per step by range
		name := hs[i].Name
		switch {
		case codec.IsHopByHop(name), isContentLength(name), dropHost && isHost(name):
			continue
		// Connection may not strip Host: a request without it would reach
		// the upstream's default virtual host.
		case lists && hs.Listed(name) && !isHost(name):
			continue
		case edits != nil && edits.Removes(name), client != nil && client.drops(name):
			continue
		}
		dst = append(dst, name...)
		dst = append(dst, ": "...)
		dst = append(dst, hs[i].Value...)
		dst = append(dst, "\r\n"...)
	}
	if edits != nil {
		for i := range edits.Set { // by index, as above
			dst = appendHeader(dst, edits.Set[i].Name, edits.Set[i].Value)
		}
		for i := range edits.Append {
			dst = appendHeader(dst, edits.Append[i].Name, edits.Append[i].Value)
		}
	}
	return dst
}

// appendPort appends a port number (0 to 65535) in decimal, without
// strconv's general path: it runs for every request with a port in Host.
func appendPort(dst []byte, p int) []byte {
	var d [5]byte
	i := len(d)
	for {
		i--
		d[i] = byte('0' + p%10)
		p /= 10
		if p == 0 {
			break
		}
	}
	return append(dst, d[i:]...)
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
	// Two 8-byte words, case folded with |0x20 ('-'|0x20 is '-'): it runs
	// for every field both ways.
	return len(name) == len("content-length") &&
		binary.LittleEndian.Uint64(name)|0x2020202020202020 == contentLengthLo &&
		binary.LittleEndian.Uint64(name[6:])|0x2020202020202020 == contentLengthHi
}

var (
	contentLengthLo = binary.LittleEndian.Uint64([]byte("content-"))
	contentLengthHi = binary.LittleEndian.Uint64([]byte("t-length"))
)
