// The JSON lines: the access line and the error-log Event, and how a
// Record becomes one of them.

package accesslog

import (
	"bytes"
	"reflect"
	"sync"
	"time"
	"unsafe"

	"github.com/bytedance/sonic/encoder"
	"github.com/loopgate/loopgate/filters"
)

// accessLine is one access-log line. Field names follow what nginx and
// Envoy users grep for; docs/operations.md lists them.
type accessLine struct {
	Time          string       `json:"time"` // the request's first byte, UTC
	RequestID     string       `json:"request_id"`
	TraceID       string       `json:"trace_id,omitempty"` // the W3C trace id (trace_context)
	ClientIP      string       `json:"client_ip"`
	Method        string       `json:"method"`
	Path          string       `json:"path"` // as the client sent it, without the query
	PathTruncated bool         `json:"path_truncated,omitempty"`
	Status        int          `json:"status"`
	Code          int          `json:"code,omitempty"` // a gateway-made answer's JSON error code
	Route         string       `json:"route,omitempty"`
	Upstream      string       `json:"upstream,omitempty"` // the node's address
	BytesIn       int64        `json:"bytes_in"`
	BytesOut      int64        `json:"bytes_out"`
	DurationUs    int64        `json:"duration_us"`
	UpstreamUs    *int64       `json:"upstream_us,omitempty"` // to the upstream's response head
	Retries       int          `json:"retries"`
	End           string       `json:"end"`
	TLSVersion    string       `json:"tls_version,omitempty"`
	TLSCipher     string       `json:"tls_cipher,omitempty"`
	SNI           string       `json:"sni,omitempty"`
	Filters       []filterLine `json:"filters,omitempty"`
}

type filterLine struct {
	Name   string `json:"name"`
	SelfNs int64  `json:"self_ns"`
}

// Event is one error-log line. The writer sets Time; the other fields are
// the caller's, and empty ones are left out.
type Event struct {
	Time    string `json:"time"`
	Level   string `json:"level"` // LevelError, LevelWarn, LevelInfo or LevelDebug
	Event   string `json:"event"` // what happened, e.g. "gateway_error", "reload"
	Message string `json:"message,omitempty"`

	// A request's error.
	Status     int    `json:"status,omitempty"`
	Code       int    `json:"code,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
	TraceID    string `json:"trace_id,omitempty"`
	ClientIP   string `json:"client_ip,omitempty"`
	Method     string `json:"method,omitempty"`
	Path       string `json:"path,omitempty"`
	Route      string `json:"route,omitempty"`
	Upstream   string `json:"upstream,omitempty"`
	Suppressed uint32 `json:"suppressed,omitempty"` // lines this loop held back before this one

	// A control-plane event (a reload).
	Trigger  string `json:"trigger,omitempty"`
	Triggers int    `json:"triggers,omitempty"` // triggers coalesced into it
	Changes  string `json:"changes,omitempty"`
	Error    string `json:"error,omitempty"`

	// An admin API write (event admin_write): the admin token's name and
	// the config versions before and after.
	Token       string `json:"token,omitempty"`
	FromVersion uint64 `json:"from_version,omitempty"`
	ToVersion   uint64 `json:"to_version,omitempty"`
}

// Event levels.
const (
	LevelError = "error"
	LevelWarn  = "warn"
	LevelInfo  = "info"
	LevelDebug = "debug"
)

// Error-log event names for requests.
const (
	EventGatewayError          = "gateway_error"           // a 5xx or 408 the gateway answered itself
	EventUpstreamConnectFailed = "upstream_connect_failed" // the 502 of a failed dial (code 50201)
	EventResponseCut           = "response_cut"            // the response head went out, then the upstream failed or stalled, or the client's body was bad; the client's connection was closed
	EventUpgradeRefused        = "upgrade_refused"         // an upstream answered an upgrade request with a final status other than 101
)

// codeConnectFailed is upstream.ErrConnect's code.
const codeConnectFailed = 50201

// lineOptions: invalid UTF-8 from a client (a path) becomes U+FFFD rather
// than a line that is not JSON.
const lineOptions = encoder.ValidateString

// timeLayout is RFC 3339 in UTC with microseconds.
const timeLayout = "2006-01-02T15:04:05.000000Z07:00"

// pretouch compiles the encoders of both line types now, so the first
// request's line does not pay for it.
func pretouch() error {
	// The types EncodeInto is given (*[]accessLine for a batch, *Event for
	// an error line) are what sonic compiles on first use, about 8,000
	// allocations: compiled now, the first pass after a start or an idle
	// period does not allocate them while the gateway serves.
	for _, t := range []reflect.Type{reflect.TypeFor[accessLine](), reflect.TypeFor[*[]accessLine](),
		reflect.TypeFor[Event](), reflect.TypeFor[*Event]()} {
		if err := encoder.Pretouch(t); err != nil {
			return err
		}
	}
	return nil
}

// pretouchOnce compiles them once per process: a second Pretouch of a
// type while another writer encodes it races inside sonic (its program
// cache is replaced under the encoder; -race saw it when tests made
// writers in parallel), and once is all the first request needs.
var pretouchOnce = sync.OnceValue(pretouch)

// batchLines is how many access lines one sonic call encodes. sonic's
// EncodeInto allocates 16 bytes per call (it boxes the value's pointer), so
// lines are encoded as a JSON array of up to batchLines and split into
// lines after: one allocation per batch instead of per request.
const batchLines = 128

// formatter turns records into lines. Its buffers are reused; a batch of
// access lines costs one allocation (see batchLines). Owned by the writer
// goroutine.
type formatter struct {
	fields []field // access_log.format's fields; nil = the standard line

	offset  int64 // wall clock minus loopstat clock, read once per pass
	sec     int64 // the second secText shows
	secText []byte
	secBuf  [32]byte

	batch []accessLine // lines[:n], what sonic encodes
	lines [batchLines]accessLine
	ts    [batchLines][40]byte
	ip    [batchLines][64]byte
	fl    [batchLines][filters.MaxChain]filterLine
	upUs  [batchLines]int64

	array []byte // the encoded batch
	ev    Event
	eline []byte // the encoded error line
	ets   [40]byte
	eip   [64]byte
}

func newFormatter(fields []string) *formatter { return &formatter{fields: fieldsOf(fields)} }

// view is a string over b without a copy; valid while b is unchanged (a
// record stays the writer's until it is released, after formatting).
func view(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// time formats a loopstat time as UTC wall-clock time with microseconds.
// The date and time to the second are formatted once per second and
// reused; lines of one pass mostly share them.
func (f *formatter) time(dst *[40]byte, mono int64) string {
	ns := mono + f.offset
	sec := ns / 1e9
	if sec != f.sec || f.secText == nil {
		f.secText = time.Unix(sec, 0).UTC().AppendFormat(f.secBuf[:0], "2006-01-02T15:04:05")
		f.sec = sec
	}
	b := append(dst[:0], f.secText...)
	us := ns % 1e9 / 1e3
	b = append(b, '.', byte('0'+us/1e5), byte('0'+us/1e4%10), byte('0'+us/1e3%10),
		byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10), 'Z')
	return view(b)
}

func client(dst *[64]byte, rec *Record) string {
	if !rec.Client.IsValid() {
		return ""
	}
	return view(rec.Client.AppendTo(dst[:0]))
}

// appendAccess appends the access lines of r's n oldest waiting records
// (n ≤ batchLines) to dst. The caller releases them after.
func (f *formatter) appendAccess(dst []byte, r *Ring, n int) []byte {
	if f.fields != nil {
		for i := 0; i < n; i++ {
			dst = f.appendFields(dst, r.At(i), f.fields)
		}
		return dst
	}
	f.batch = f.lines[:n]
	for i := range f.batch {
		rec := r.At(i)
		a := &f.batch[i]
		a.Time = f.time(&f.ts[i], rec.Start)
		a.RequestID = view(rec.id[:rec.idLen])
		a.TraceID = view(rec.trace[:rec.traceLen])
		a.ClientIP = client(&f.ip[i], rec)
		a.Method = view(rec.Req.method[:rec.Req.methodLen])
		a.Path = view(rec.Req.path[:rec.Req.pathLen])
		a.PathTruncated = rec.Req.pathCut
		a.Status, a.Code = int(rec.Status), int(rec.Code)
		a.Route, a.Upstream = rec.Route, rec.Node
		a.BytesIn, a.BytesOut = rec.BytesIn, rec.BytesOut
		a.DurationUs = rec.Duration / 1e3
		a.UpstreamUs = nil
		if rec.Upstream >= 0 {
			f.upUs[i] = rec.Upstream / 1e3
			a.UpstreamUs = &f.upUs[i]
		}
		a.Retries = int(rec.Retries)
		a.End = rec.End
		a.TLSVersion, a.TLSCipher, a.SNI = rec.TLSVersion, rec.TLSCipher, rec.SNI
		a.Filters = f.fl[i][:rec.Filters]
		for j := range a.Filters {
			a.Filters[j] = filterLine{Name: rec.Chain.Filter(j).Name(), SelfNs: int64(rec.Self[j])}
		}
	}
	f.array = f.array[:0]
	err := encoder.EncodeInto(&f.array, &f.batch, lineOptions)
	clear(f.batch) // drop the views into the records
	if err != nil {
		return dst // cannot happen for this type; lose the lines, not the log
	}
	return splitArray(dst, f.array)
}

// splitArray appends the elements of the encoded batch, one per line.
// Each element begins `{"time":`, and the sequence `},{"time":` cannot
// occur inside a JSON string (a quote in a string is escaped, so a `{"`
// there is always `{\"`), nor inside the filters array (its objects have
// other keys): every occurrence is a boundary between two lines, and its
// comma becomes the newline. Finding them with bytes.Index is much faster
// than scanning the batch byte by byte.
func splitArray(dst, array []byte) []byte {
	if len(array) < 2 {
		return dst
	}
	start := len(dst)
	dst = append(dst, array[1:len(array)-1]...)
	for rest := dst[start:]; ; {
		i := bytes.Index(rest, lineBoundary)
		if i < 0 {
			break
		}
		rest[i+1] = '\n'
		rest = rest[i+len(lineBoundary):]
	}
	if len(dst) > start {
		dst = append(dst, '\n')
	}
	return dst
}

// lineBoundary is where one encoded accessLine ends and the next begins;
// accessLine's first field must stay Time.
var lineBoundary = []byte(`},{"time":`)

// appendError appends rec's error line to dst. It costs one allocation
// (sonic's), which the error log's rate limit bounds.
func (f *formatter) appendError(dst []byte, rec *Record) []byte {
	e := &f.ev
	*e = Event{Time: f.time(&f.ets, rec.Start+rec.Duration), Level: LevelError, Event: EventGatewayError,
		Message: rec.Message, Status: int(rec.Status), Code: int(rec.Code),
		RequestID: view(rec.id[:rec.idLen]), TraceID: view(rec.trace[:rec.traceLen]), ClientIP: client(&f.eip, rec),
		Method: view(rec.Req.method[:rec.Req.methodLen]), Path: view(rec.Req.path[:rec.Req.pathLen]),
		Route: rec.Route, Upstream: rec.Node, Suppressed: rec.Suppressed}
	switch {
	case rec.Cut: // Status is the one the client got, whatever it was
		e.Event = EventResponseCut
	case rec.Code == codeConnectFailed:
		e.Event = EventUpstreamConnectFailed
	case rec.Event != "":
		e.Event = rec.Event
	}
	f.eline = f.eline[:0]
	err := encoder.EncodeInto(&f.eline, e, lineOptions)
	*e = Event{} // drop the views into the record
	if err != nil {
		return dst
	}
	dst = append(dst, f.eline...)
	return append(dst, '\n')
}

// appendLine appends v as one JSON line, for callers off the hot path (it
// allocates).
func appendLine(dst []byte, v any) []byte {
	start := len(dst)
	if err := encoder.EncodeInto(&dst, v, lineOptions); err != nil {
		return dst[:start]
	}
	return append(dst, '\n')
}
