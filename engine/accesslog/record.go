// Record: one finished exchange, fixed size, as a loop hands it over.

package accesslog

import (
	"net/netip"

	"github.com/loopgate/loopgate/filters"
)

// The bounds of the bytes a Record copies.
const (
	MaxMethod    = 16  // longer methods are cut
	MaxPath      = 256 // longer paths are cut and flagged (path_truncated)
	MaxRequestID = 128 // the request_id filter keeps at most 128 characters
	MaxTraceID   = 32  // a W3C trace id's hex digits
)

// Request is the part of a Record copied from the request head while the
// head is still readable (its bytes are gone by the time the exchange
// ends). The engine keeps one in each exchange and copies it into the
// record at the end.
type Request struct {
	method    [MaxMethod]byte
	path      [MaxPath]byte
	methodLen uint8
	pathLen   uint16
	pathCut   bool // the path was longer than MaxPath
}

// Set copies method and path (bounded). No allocation.
func (q *Request) Set(method, path []byte) {
	q.methodLen = uint8(copy(q.method[:], method))
	q.pathLen = uint16(copy(q.path[:], path))
	q.pathCut = len(path) > MaxPath
}

// Clear forgets the request (an unparsed one has neither method nor path).
func (q *Request) Clear() { q.methodLen, q.pathLen, q.pathCut = 0, 0, false }

// Record is one finished exchange, or one gateway-made error. Strings must
// be immutable and outlive the record (config strings, constants); bytes
// are copied.
type Record struct {
	Start    int64 // loopstat.Now at the request's first byte
	Duration int64 // nanoseconds from Start to the end of the exchange
	Upstream int64 // nanoseconds from the upstream call's start to its response head; -1 = no response head
	BytesIn  int64 // request bytes read: head and body
	BytesOut int64 // response bytes handed to the client connection

	Status     uint16 // the status sent; 499 when the client left first
	Retries    uint16
	Code       uint32 // the JSON error code of a gateway-made answer, or of why a response was cut; 0 = none
	Suppressed uint32 // error records the loop's Limiter held back before this one
	Cut        bool   // the response was cut after its head went out (Code and Message say why)

	End     string // how the exchange ended: filters.EndReason's name
	Route   string // route id; "" = matched no route
	Node    string // upstream node address; "" = none was called
	Message string // the gateway's error message; "" = none
	Event   string // an error line's event when not implied by Code and Cut (EventUpgradeRefused); "" = implied

	// The client connection's TLS: "TLS 1.3", the cipher suite's IANA
	// name, and the SNI the client sent; all "" on a plain connection.
	TLSVersion, TLSCipher, SNI string

	Client netip.Addr
	Req    Request

	// Chain names the filters whose self times Self holds, in chain order;
	// nil when the route ran none. Self saturates at about 4.3 s.
	Chain   *filters.Chain
	Self    [filters.MaxChain]uint32
	Filters uint8

	id       [MaxRequestID]byte
	idLen    uint8
	trace    [MaxTraceID]byte
	traceLen uint8
}

// SetRequestID copies the request ID (bounded).
func (r *Record) SetRequestID(id []byte) { r.idLen = uint8(copy(r.id[:], id)) }

// SetTraceID copies the trace id (bounded); nil = none.
func (r *Record) SetTraceID(id []byte) { r.traceLen = uint8(copy(r.trace[:], id)) }

// SetFilters copies the self time of each filter of chain from timings.
func (r *Record) SetFilters(chain *filters.Chain, timings *[filters.MaxChain]filters.Timing) {
	r.Chain = chain
	if chain == nil {
		r.Filters = 0
		return
	}
	n := chain.Len()
	for i := 0; i < n; i++ {
		r.Self[i] = saturate(int64(timings[i].Self))
	}
	r.Filters = uint8(n)
}

func saturate(ns int64) uint32 {
	switch {
	case ns < 0:
		return 0
	case ns > 1<<32-1:
		return 1<<32 - 1
	}
	return uint32(ns)
}
