// The trace_context filter: W3C Trace Context (traceparent, tracestate)
// kept, replaced or started, and a dye header echoed.

package transform

import (
	"encoding/binary"
	"math/bits"
	"math/rand/v2"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/transform/otlp"
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

	exp  *otlp.Exporter // where sampled spans go; nil = no span of its own
	otlp *otlp.Options  // this config's collector, handed to exp with each span

	ids []idSource // one per loop, indexed by Exchange.Loop
}

// idSource is one loop's generator of trace and span ids: wyrand, a 64-bit
// state stepped by a constant and mixed by one 128-bit multiply, seeded
// from the runtime's random source. Ids must be unique and spread evenly
// (W3C Trace Context §3.2.2.3), not secret; three draws from math/rand/v2
// per new trace cost about 150 instructions, this about 15. Padded to a
// cache line: each loop writes only its own.
type idSource struct {
	state uint64
	_     [56]byte
}

func (s *idSource) next() uint64 {
	s.state += 0xa0761d6478bd642f
	hi, lo := bits.Mul64(s.state, s.state^0xe7037ed1a0b428db)
	return hi ^ lo
}

// source is the id generator of x's loop.
func (f *traceContext) source(x *filters.Exchange) *idSource {
	if x.Loop < len(f.ids) {
		return &f.ids[x.Loop]
	}
	return &f.ids[0] // a loop the filter was not built for: share the first
}

var _ filters.Filter = (*traceContext)(nil)

// NewTraceContext returns the "trace_context" filter from a provisioned
// config. Safe for concurrent use. With exp (and c.OTLP set) it reports a
// span of its own for every sampled request; exp must be started.
func NewTraceContext(order, loops int, c *TraceContext, exp *otlp.Exporter) filters.Filter {
	f := &traceContext{Base: filters.Base{FilterName: NameTraceContext, FilterOrder: order},
		samplePercent: uint64(*c.SamplePercent), dye: c.DyeHeader, ids: make([]idSource, max(loops, 1))}
	for i := range f.ids {
		f.ids[i].state = rand.Uint64()
	}
	if c.OTLP != nil && exp != nil {
		f.exp, f.otlp = exp, c.OTLP.options()
	}
	return f
}

// Request keeps a valid traceparent (and its tracestate) as the client sent
// it, as a proxy that reports no span of its own should (W3C Trace Context
// §3.2: a vendor that does not participate forwards unchanged), and starts a
// new trace otherwise: a new trace id and parent id, the sampled flag drawn
// from sample_percent, tracestate dropped (§3.3.1: it is meaningless without
// the traceparent it belonged to). The trace id goes to x.TraceID for the
// logs. It does not allocate once the exchange's arena and edit lists have
// grown.
//
// When it exports spans (otlp), the gateway takes part in the trace: a
// sampled request gets a span of its own, whose parent is the client's
// span, and the upstream's traceparent names the gateway's span as its
// parent instead (§3.2.2.3: a participating vendor sends its own
// parent-id), written as version 00 (§3.2.4), with the client's flags and
// tracestate.
func (f *traceContext) Request(x *filters.Exchange) filters.Verdict {
	// Several traceparent fields are an invalid one (§3.2.2).
	if v, n := x.Req.Headers.Only("traceparent"); n == 1 && validTraceparent(v) {
		if f.exp != nil && hexValue(v[54])&1 == 1 {
			var tp [traceparentLen]byte
			copy(tp[:], v[:traceparentLen])
			tp[0], tp[1] = '0', '0'
			id := f.source(x).spanID()
			putHex(tp[36:52], id)
			own := x.Own(tp[:])
			x.TraceID = own[3 : 3+TraceIDLen]
			x.ReqEdits.AddSet("traceparent", own)
			f.startSpan(x, id)
			decodeHex(x.Span.Parent[:], v[36:52])
		} else {
			x.TraceID = x.Own(v[3 : 3+TraceIDLen])
		}
	} else {
		var tp [traceparentLen]byte
		id := f.start(f.source(x), &tp)
		own := x.Own(tp[:])
		x.TraceID = own[3 : 3+TraceIDLen]
		x.ReqEdits.AddSet("traceparent", own)
		x.ReqEdits.AddRemove("tracestate")
		if f.exp != nil && tp[54] == '1' {
			f.startSpan(x, id) // the parent-id the upstream gets is the gateway's span
		}
	}
	if f.dye != "" {
		if v, ok := header(x.Req.Headers, f.dye); ok && len(v) > 0 {
			x.RespEdits.AddSet(f.dye, x.Own(v))
		}
	}
	return filters.Continue
}

// startSpan marks x's span for export, with id as its span id.
func (f *traceContext) startSpan(x *filters.Exchange, id uint64) {
	x.Span.Export = true
	binary.BigEndian.PutUint64(x.Span.ID[:], id)
	x.Span.Method = x.Own(x.Req.Method)
}

// Done exports the span of a request Request marked: the exchange's
// duration ending now, its route, status and node. It does not allocate.
func (f *traceContext) Done(x *filters.Exchange) {
	if !x.Span.Export {
		return
	}
	var s otlp.Span
	decodeHex(s.TraceID[:], x.TraceID)
	s.SpanID, s.ParentID = x.Span.ID, x.Span.Parent
	s.End = time.Now().UnixNano()
	s.Start = s.End - x.End.Duration
	s.Status, s.Reason, s.Route, s.Node = x.End.Status, x.End.Reason.String(), x.RouteID, x.End.Node
	s.SetMethod(x.Span.Method)
	f.exp.Record(x.Loop, f.otlp, &s)
}

// spanID is a random span id; zero is the invalid one.
func (s *idSource) spanID() uint64 {
	for {
		if id := s.next(); id != 0 {
			return id
		}
	}
}

// start writes a new version-00 traceparent into tp and returns its
// parent-id.
func (f *traceContext) start(ids *idSource, tp *[traceparentLen]byte) uint64 {
	copy(tp[:], "00-")
	for {
		hi, lo := ids.next(), ids.next()
		if hi|lo != 0 { // all zeros is the invalid trace id
			putHex(tp[3:19], hi)
			putHex(tp[19:35], lo)
			break
		}
	}
	tp[35] = '-'
	span := ids.spanID()
	putHex(tp[36:52], span)
	tp[52], tp[53], tp[54] = '-', '0', '0'
	if f.samplePercent >= 100 || f.samplePercent > 0 && ids.next()%100 < f.samplePercent {
		tp[54] = '1'
	}
	return span
}

// putHex writes v as 16 lower-case hex digits into dst[:16]. It spreads
// each nibble into a byte and turns all eight of a word into digits at
// once (a digit past 9 gets 'a'-'0'-10 more), with no loop: a new trace
// writes 48 digits, and a loop over them was a quarter of the filter's
// instructions.
func putHex(dst []byte, v uint64) {
	binary.BigEndian.PutUint64(dst[0:8], hexWord(spreadNibbles(uint32(v>>32))))
	binary.BigEndian.PutUint64(dst[8:16], hexWord(spreadNibbles(uint32(v))))
}

// spreadNibbles puts the 8 nibbles of x into the low halves of 8 bytes,
// the most significant first.
func spreadNibbles(x uint32) uint64 {
	v := uint64(x)
	v = (v | v<<16) & 0x0000ffff0000ffff
	v = (v | v<<8) & 0x00ff00ff00ff00ff
	return (v | v<<4) & 0x0f0f0f0f0f0f0f0f
}

// hexWord turns 8 bytes of values 0-15 into their hex digits.
func hexWord(v uint64) uint64 {
	letters := ((v + 0x0606060606060606) >> 4) & 0x0101010101010101 // 1 in each byte past 9
	return v + 0x3030303030303030 + letters*('a'-'0'-10)
}

// hexValue is the value of a lower-case hex digit validTraceparent let
// through.
func hexValue(c byte) byte {
	if c >= 'a' {
		return c - 'a' + 10
	}
	return c - '0'
}

// decodeHex fills dst from the lower-case hex digits src (2 per byte).
func decodeHex(dst, src []byte) {
	for i := range dst {
		dst[i] = hexValue(src[2*i])<<4 | hexValue(src[2*i+1])
	}
}

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
