// Gateway-generated responses: the JSON error body every failure carries.

package engine

import (
	"net/http"
	"strconv"

	"github.com/loopgate/loopgate/codec"

	"github.com/loopgate/loopgate/filters"
)

// writeError sends {"code":NNNNN,"message":"...","request_id":"..."} with
// the given status. headOnly leaves the body out (HEAD requests). extra
// are the rejection's own headers (WWW-Authenticate, Allow, Retry-After);
// edits, when set, are the route's response header edits, which apply to
// gateway-made answers as to proxied ones.
func (cc *clientConn) writeError(status, code int, msg string, id []byte, headOnly bool, extra []filters.Header, edits *filters.HeaderEdits) bool {
	l := cc.loop
	l.out = appendError(l.takeOut(), status, code, msg, id, cc.closeAfter, headOnly, extra, edits, cc.hsts)
	return cc.write(l.out)
}

// hsts is a rendered Strict-Transport-Security line, or nil.
func appendError(dst []byte, status, code int, msg string, id []byte, closing, headOnly bool, extra []filters.Header, edits *filters.HeaderEdits, hsts []byte) []byte {
	bodyLen := len(`{"code":,"message":"","request_id":""}`) + digits(code) + jsonLen(msg) + jsonLen(string(id))
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, ' ')
	dst = append(dst, reason(status)...)
	dst = append(dst, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(bodyLen), 10)
	dst = append(dst, "\r\nX-Request-Id: "...)
	dst = append(dst, id...)
	if closing {
		dst = append(dst, "\r\nConnection: close"...)
	}
	dst = append(dst, "\r\n"...)
	dst = append(dst, hsts...)
	for _, h := range extra {
		dst = appendHeader(dst, h.Name, h.Value)
	}
	if edits != nil {
		for _, h := range edits.Set {
			if !gatewayField(h.Name) {
				dst = appendHeader(dst, h.Name, h.Value)
			}
		}
		for _, h := range edits.Append {
			if !gatewayField(h.Name) {
				dst = appendHeader(dst, h.Name, h.Value)
			}
		}
	}
	dst = append(dst, "\r\n"...)
	if headOnly {
		return dst
	}
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(code), 10)
	dst = append(dst, `,"message":"`...)
	dst = appendJSONString(dst, msg)
	dst = append(dst, `","request_id":"`...)
	dst = appendJSONString(dst, string(id))
	return append(dst, `"}`...)
}

// gatewayField reports the fields an error response frames itself, which
// route edits must not duplicate.
func gatewayField(name string) bool {
	n := []byte(name)
	return isContentLength(n) || codec.EqualFold(n, "content-type") || codec.EqualFold(n, "x-request-id") ||
		codec.IsHopByHop(n)
}

func digits(n int) int {
	d := 1
	for n >= 10 {
		n /= 10
		d++
	}
	return d
}

// jsonLen is the escaped length of s, matching appendJSONString.
func jsonLen(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			n += 2
		case c < 0x20:
			n += 6
		default:
			n++
		}
	}
	return n
}

func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// reason is the status line's reason phrase: the standard one for every
// status the gateway answers with (a filter may reject with any), empty
// for a status that has none, as nginx writes an unknown one. A client
// must not rely on it (RFC 9112, section 4), but people and old clients
// read it, and "405 Error" misleads them.
func reason(status int) string { return http.StatusText(status) }
