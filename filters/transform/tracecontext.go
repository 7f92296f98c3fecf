// The trace_context filter: W3C Trace Context (traceparent, tracestate)
// kept, replaced or started, and a dye header echoed.

package transform

import (
	"math/rand/v2"

	"github.com/loopgate/loopgate/filters"
)

// The lengths of a version-00 traceparent and of its trace id.
const (
	traceparentLen = 55 // "00-" 32 hex "-" 16 hex "-" 2 hex
	TraceIDLen     = 32 // hex digits of a trace id, as the access log shows it
)

type traceContext struct {
	filters.Base
	samplePercent uint64 // of the traces the gateway starts, the share marked sampled
	dye           string // header echoed on the response; "" = none
}

var _ filters.Filter = (*traceContext)(nil)

// NewTraceContext returns the "trace_context" filter from a provisioned
// config. Safe for concurrent use.
func NewTraceContext(order int, c *TraceContext) filters.Filter {
	return &traceContext{Base: filters.Base{FilterName: NameTraceContext, FilterOrder: order},
		samplePercent: uint64(*c.SamplePercent), dye: c.DyeHeader}
}

// Request keeps a valid traceparent (and its tracestate) as the client sent
// it, as a proxy that reports no span of its own should (W3C Trace Context
// §3.2: a vendor that does not participate forwards unchanged), and starts a
// new trace otherwise: a new trace id and parent id, the sampled flag drawn
// from sample_percent, tracestate dropped (§3.3.1: it is meaningless without
// the traceparent it belonged to). The trace id goes to x.TraceID for the
// logs. It does not allocate once the exchange's arena and edit lists have
// grown.
func (f *traceContext) Request(x *filters.Exchange) filters.Verdict {
	// Several traceparent fields are an invalid one (§3.2.2).
	if v, n := x.Req.Headers.Only("traceparent"); n == 1 && validTraceparent(v) {
		x.TraceID = x.Own(v[3 : 3+TraceIDLen])
	} else {
		var tp [traceparentLen]byte
		f.start(&tp)
		own := x.Own(tp[:])
		x.TraceID = own[3 : 3+TraceIDLen]
		x.ReqEdits.AddSet("traceparent", own)
		x.ReqEdits.AddRemove("tracestate")
	}
	if f.dye != "" {
		if v, ok := header(x.Req.Headers, f.dye); ok && len(v) > 0 {
			x.RespEdits.AddSet(f.dye, x.Own(v))
		}
	}
	return filters.Continue
}

// start writes a new version-00 traceparent into tp.
func (f *traceContext) start(tp *[traceparentLen]byte) {
	copy(tp[:], "00-")
	for {
		hi, lo := rand.Uint64(), rand.Uint64()
		if hi|lo != 0 { // all zeros is the invalid trace id
			putHex(tp[3:19], hi)
			putHex(tp[19:35], lo)
			break
		}
	}
	tp[35] = '-'
	span := rand.Uint64()
	for span == 0 {
		span = rand.Uint64()
	}
	putHex(tp[36:52], span)
	tp[52], tp[53], tp[54] = '-', '0', '0'
	if f.samplePercent >= 100 || f.samplePercent > 0 && rand.Uint64N(100) < f.samplePercent {
		tp[54] = '1'
	}
}

func putHex(dst []byte, v uint64) {
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = hexDigit[v&15]
		v >>= 4
	}
}

const hexDigit = "0123456789abcdef"

// validTraceparent applies W3C Trace Context §3.2.2 to v, byte by byte:
// version, trace id, parent id and flags are lower-case hex; version ff and
// all-zero ids are invalid; version 00 is exactly 55 bytes; a later version
// may carry more fields after a '-', which are ignored here (§3.2.4) and
// forwarded as they came.
func validTraceparent(v []byte) bool {
	if len(v) < traceparentLen || !lowerHex(v[0:2]) || v[0] == 'f' && v[1] == 'f' {
		return false
	}
	if v[0] == '0' && v[1] == '0' && len(v) != traceparentLen {
		return false
	}
	if len(v) > traceparentLen && v[traceparentLen] != '-' {
		return false
	}
	return v[2] == '-' && v[35] == '-' && v[52] == '-' &&
		lowerHex(v[3:35]) && !allZero(v[3:35]) &&
		lowerHex(v[36:52]) && !allZero(v[36:52]) &&
		lowerHex(v[53:55])
}

func lowerHex(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != '0' {
			return false
		}
	}
	return true
}
