// Chosen fields: the access line access_log.format describes, written by
// hand (no encoder, no allocation) from the record.

package accesslog

import (
	"strconv"
	"unicode/utf8"
)

// field is one access-line field a format can name.
type field uint8

// The fields, named as the standard line's JSON keys (accessLine).
const (
	fieldTime field = iota
	fieldRequestID
	fieldClientIP
	fieldMethod
	fieldPath
	fieldPathTruncated
	fieldStatus
	fieldCode
	fieldRoute
	fieldUpstream
	fieldBytesIn
	fieldBytesOut
	fieldDurationUs
	fieldUpstreamUs
	fieldRetries
	fieldEnd
	fieldFilters
	fieldTraceID
	fieldTLSVersion
	fieldTLSCipher
	fieldSNI
	fieldCount
)

// fieldNames are the fields' names, by field; config.AccessLogFields lists
// the same names for validation.
var fieldNames = [fieldCount]string{"time", "request_id", "client_ip", "method", "path", "path_truncated", "status",
	"code", "route", "upstream", "bytes_in", "bytes_out", "duration_us", "upstream_us", "retries", "end", "filters", "trace_id",
	"tls_version", "tls_cipher", "sni"}

// fieldsOf maps names to fields, in order; unknown names are skipped
// (config validation refuses them).
func fieldsOf(names []string) []field {
	var out []field
	for _, n := range names {
		for f, name := range fieldNames {
			if name == n {
				out = append(out, field(f))
			}
		}
	}
	return out
}

// appendFields appends rec's line with the fields fs, in order: each is
// written whatever its value ("" or 0; upstream_us is null without a
// response head), so every line has the same keys.
func (f *formatter) appendFields(dst []byte, rec *Record, fs []field) []byte {
	dst = append(dst, '{')
	for i, fd := range fs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '"')
		dst = append(dst, fieldNames[fd]...)
		dst = append(dst, '"', ':')
		switch fd {
		case fieldTime:
			dst = appendJSONString(dst, f.time(&f.ets, rec.Start))
		case fieldRequestID:
			dst = appendJSONString(dst, view(rec.id[:rec.idLen]))
		case fieldTraceID:
			dst = appendJSONString(dst, view(rec.trace[:rec.traceLen]))
		case fieldClientIP:
			dst = appendJSONString(dst, client(&f.eip, rec))
		case fieldMethod:
			dst = appendJSONString(dst, view(rec.Req.method[:rec.Req.methodLen]))
		case fieldPath:
			dst = appendJSONString(dst, view(rec.Req.path[:rec.Req.pathLen]))
		case fieldPathTruncated:
			dst = strconv.AppendBool(dst, rec.Req.pathCut)
		case fieldStatus:
			dst = strconv.AppendUint(dst, uint64(rec.Status), 10)
		case fieldCode:
			dst = strconv.AppendUint(dst, uint64(rec.Code), 10)
		case fieldRoute:
			dst = appendJSONString(dst, rec.Route)
		case fieldUpstream:
			dst = appendJSONString(dst, rec.Node)
		case fieldBytesIn:
			dst = strconv.AppendInt(dst, rec.BytesIn, 10)
		case fieldBytesOut:
			dst = strconv.AppendInt(dst, rec.BytesOut, 10)
		case fieldDurationUs:
			dst = strconv.AppendInt(dst, rec.Duration/1e3, 10)
		case fieldUpstreamUs:
			if rec.Upstream < 0 {
				dst = append(dst, "null"...)
			} else {
				dst = strconv.AppendInt(dst, rec.Upstream/1e3, 10)
			}
		case fieldRetries:
			dst = strconv.AppendUint(dst, uint64(rec.Retries), 10)
		case fieldEnd:
			dst = appendJSONString(dst, rec.End)
		case fieldTLSVersion:
			dst = appendJSONString(dst, rec.TLSVersion)
		case fieldTLSCipher:
			dst = appendJSONString(dst, rec.TLSCipher)
		case fieldSNI:
			dst = appendJSONString(dst, rec.SNI)
		case fieldFilters:
			dst = append(dst, '[')
			for j := 0; j < int(rec.Filters); j++ {
				if j > 0 {
					dst = append(dst, ',')
				}
				dst = append(dst, `{"name":`...)
				dst = appendJSONString(dst, rec.Chain.Filter(j).Name())
				dst = append(dst, `,"self_ns":`...)
				dst = strconv.AppendUint(dst, uint64(rec.Self[j]), 10)
				dst = append(dst, '}')
			}
			dst = append(dst, ']')
		}
	}
	return append(dst, '}', '\n')
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. Invalid UTF-8 (a client's
// path) becomes U+FFFD, as sonic's ValidateString makes it on the
// standard line; control characters are escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+n]...)
		}
		i += n
	}
	return append(dst, '"')
}
