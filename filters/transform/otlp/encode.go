// The OTLP/JSON encoding of a batch: an ExportTraceServiceRequest, with
// ids in hex and times as decimal strings, as the OTLP spec's JSON mapping
// writes them.

package otlp

import (
	"strconv"
	"unicode/utf8"
)

// spanKindServer is SPAN_KIND_SERVER; statusError is STATUS_CODE_ERROR.
const (
	spanKindServer = 2
	statusError    = 2
)

// Encode appends to dst one ExportTraceServiceRequest holding spans, under
// a resource named service.
func Encode(dst []byte, service string, spans []Span) []byte {
	dst = append(dst, `{"resourceSpans":[{"resource":{"attributes":[`...)
	dst = stringAttr(dst, "service.name", service)
	dst = append(dst, `]},"scopeSpans":[{"scope":{"name":"loopgate"},"spans":[`...)
	for i := range spans {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = encodeSpan(dst, &spans[i])
	}
	return append(dst, `]}]}]}`...)
}

func encodeSpan(dst []byte, s *Span) []byte {
	dst = append(dst, `{"traceId":"`...)
	dst = appendHex(dst, s.TraceID[:])
	dst = append(dst, `","spanId":"`...)
	dst = appendHex(dst, s.SpanID[:])
	if s.ParentID != [8]byte{} {
		dst = append(dst, `","parentSpanId":"`...)
		dst = appendHex(dst, s.ParentID[:])
	}
	dst = append(dst, `","name":`...)
	// The span's name is the method and the route, as the semantic
	// conventions name a server span ("GET api").
	dst = append(dst, '"')
	dst = appendEscaped(dst, string(s.Method()))
	dst = append(dst, ' ')
	dst = appendEscaped(dst, s.Route)
	dst = append(dst, '"')
	dst = append(dst, `,"kind":`...)
	dst = strconv.AppendInt(dst, spanKindServer, 10)
	dst = append(dst, `,"startTimeUnixNano":"`...)
	dst = strconv.AppendInt(dst, s.Start, 10)
	dst = append(dst, `","endTimeUnixNano":"`...)
	dst = strconv.AppendInt(dst, s.End, 10)
	dst = append(dst, `","attributes":[`...)
	dst = stringAttr(dst, "http.request.method", string(s.Method()))
	dst = append(dst, ',')
	dst = stringAttr(dst, "http.route", s.Route)
	dst = append(dst, `,{"key":"http.response.status_code","value":{"intValue":"`...)
	dst = strconv.AppendInt(dst, int64(s.Status), 10)
	dst = append(dst, `"}}`...)
	if s.Node != "" {
		dst = append(dst, ',')
		dst = stringAttr(dst, "loopgate.node", s.Node)
	}
	if s.Reason != "" {
		dst = append(dst, ',')
		dst = stringAttr(dst, "loopgate.end", s.Reason)
	}
	dst = append(dst, `],"status":{`...)
	// A server span is an error for a 5xx only (semantic conventions: a
	// 4xx is the client's).
	if s.Status >= 500 {
		dst = append(dst, `"code":`...)
		dst = strconv.AppendInt(dst, statusError, 10)
	}
	return append(dst, `}}`...)
}

func stringAttr(dst []byte, key, value string) []byte {
	dst = append(dst, `{"key":`...)
	dst = appendString(dst, key)
	dst = append(dst, `,"value":{"stringValue":`...)
	dst = appendString(dst, value)
	return append(dst, `}}`...)
}

const hexDigits = "0123456789abcdef"

func appendHex(dst, b []byte) []byte {
	for _, c := range b {
		dst = append(dst, hexDigits[c>>4], hexDigits[c&15])
	}
	return dst
}

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced.
func appendString(dst []byte, s string) []byte {
	return append(appendEscaped(append(dst, '"'), s), '"')
}

// appendEscaped appends s's JSON string escape, without the quotes.
func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
			i++
		case c < 0x20:
			dst = append(dst, `\u00`...)
			dst = append(dst, hexDigits[c>>4], hexDigits[c&15])
			i++
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				dst = append(dst, `\ufffd`...)
			} else {
				dst = append(dst, s[i:i+n]...)
			}
			i += n
		}
	}
	return dst
}
