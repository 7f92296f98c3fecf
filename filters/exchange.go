// Exchange: the typed per-request context filters read and write.

package filters

import (
	"crypto/tls"
	"net/netip"
	"strings"

	"github.com/loopgate/loopgate/codec"
)

// Exchange carries one request through its chain. The engine owns it and
// reuses it; a filter may keep nothing from it past the call, except across
// a park, when Req stays valid for the function the ticket resumes with.
type Exchange struct {
	// Req is the parsed request during the request phases. It is nil in
	// the response phase: by then the bytes it viewed are released or
	// reused, so a filter that needs a request field later copies it
	// (Own) in its request phase.
	Req       *codec.Request
	RequestID []byte     // the request's ID (from X-Request-Id or generated)
	TraceID   []byte     // the W3C trace id, 32 hex digits, set by trace_context; nil = none
	Span      Span       // the gateway's own span, set by trace_context when it exports spans
	Peer      netip.Addr // the TCP peer
	// TLS is the client connection's TLS state on an HTTPS listener (the
	// version, SNI, and a verified client certificate in PeerCertificates,
	// with client_auth); nil on plain HTTP. Read-only.
	TLS      *tls.ConnectionState
	ClientIP netip.Addr // the client as trusted proxies report it (see RealIP)
	RouteID  string
	Loop     int          // index of the running event loop, for per-loop filter state
	Sub      SubRequester // the loop's async client, for filters that call out

	Identity  Identity      // set by auth filters
	Upstream  UpstreamEdits // set by routing filters (gray, sticky)
	ReqEdits  HeaderEdits   // applied to the upstream request head
	RespEdits HeaderEdits   // applied to the response head
	Path      []byte        // rewritten path for the upstream; nil = unchanged

	Rejection Rejection // what Respond answers with
	Status    int       // response status, known in the response phase

	Timings [MaxChain]Timing // per filter, in chain order

	// Start is when the request began (its first byte), on the monotonic
	// clock Now reads.
	Start int64
	// End is how the exchange ended, set before the Done phase.
	End End

	now    int64    // the clock at the running phase's start (Now); 0 outside the chain's phases
	arena  []byte   // backing store for bytes filters produce (Own)
	parker Parker   // the engine's side of Park
	stats  *StatSet // where a shared chain records this exchange's timings (SetStats); nil = nowhere
	next   int      // chain position to continue from after a park
	began  int      // filters whose request phase began: Done runs for these
}

// Now is the monotonic clock in nanoseconds, the one Start is on, finer
// than the loop's 10 ms timer wheel (a rate limiter needs that). In a
// filter's request or response phase, or the function its ticket resumes
// with, it is the reading the chain took as that phase began (the chain
// reads the clock at every boundary to time the filters), so asking costs
// no clock read; elsewhere it reads the clock.
func (x *Exchange) Now() int64 {
	if x.now != 0 {
		return x.now
	}
	return nanotime()
}

// End describes how an exchange ended, for the Done phase.
type End struct {
	Reason   EndReason
	Status   int   // the status sent; 499 when the client left before any
	BytesIn  int64 // request bytes read: head and body
	BytesOut int64 // response bytes handed to the client connection
	Node     string
	Duration int64 // nanoseconds from Start to the end
	Retries  int   // resends on a fresh connection
}

// EndReason is why an exchange ended.
type EndReason uint8

const (
	EndServed          EndReason = iota // a response from the upstream went out whole
	EndRejected                         // a filter or the gateway answered (4xx)
	EndUpstreamFailed                   // the gateway answered a 5xx for the upstream or itself, or closed a response the upstream broke off
	EndTimeout                          // a deadline passed (408, 504)
	EndClientGone                       // the client left, or its connection failed, first
	EndUpstreamStalled                  // the response was under way when the upstream stopped taking the request body for longer than the response timeout; the gateway closed the connection
	EndBadRequestBody                   // the response was under way when the client's body broke its framing or its size limit; the gateway closed the connection
)

var endReasonNames = [...]string{"served", "rejected", "upstream_failed", "timeout", "client_gone", "upstream_stalled", "bad_request_body"}

func (r EndReason) String() string { return endReasonNames[r] }

// MaxChain is the longest chain a route may have.
const MaxChain = 16

// Identity is who the request is from, once authenticated.
type Identity struct {
	Authenticated bool
	Subject       []byte // user ID (JWT sub, API key consumer, X-User-Id from external auth)
	Tenant        []byte
	Roles         []string
	Kind          string // how it was established: KindJWT, KindAPIKey or KindExternal
}

// The credential kinds of Identity.Kind.
const (
	KindJWT      = "jwt"      // a verified JWT (auth)
	KindAPIKey   = "api_key"  // a configured API key (auth)
	KindExternal = "external" // the auth service's answer (external_auth)
)

// HasRole reports whether the identity carries role.
func (id *Identity) HasRole(role string) bool {
	for _, r := range id.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// UpstreamEdits steer node selection.
type UpstreamEdits struct {
	Group   int    // upstream group index; -1 = the route's own
	HashKey []byte // non-nil: pick the node by consistent hash of this key
	// Node, when not 0, is the 1-based index of the node of the route's
	// own upstream to call (direct_node), instead of the balancer's pick;
	// health still applies, and the request is not retried elsewhere.
	Node int
}

// HeaderEdits are changes to a head, applied by the engine as it writes it.
// Names are matched case-insensitively. Capacity is bounded; Add reports
// false when full. Fill the lists through the Add methods: a list built or
// changed by hand is still applied, only searched in full (see Removes).
type HeaderEdits struct {
	Remove []string // names to drop
	Set    []Header // replace any existing field with this one
	Append []Header // add alongside existing fields

	// names has nameBit set for every name AddRemove and AddSet queued,
	// and counted says how many that is. The engine asks Removes of every
	// field of the head it writes, and most fields match no edit: while
	// the lists hold just what the Add methods put there, a clear bit
	// answers without a comparison.
	names   uint64
	counted int
}

// Span is the gateway's own span of a request: trace_context starts it in
// its request phase and exports it in its done phase, when it exports
// spans (trace_context.otlp) and the trace is sampled.
type Span struct {
	Export bool    // the span goes to the collector
	ID     [8]byte // the gateway's span id: the upstream's parent
	Parent [8]byte // the client's span id; zero for a trace the gateway started
	Method []byte  // the request method, owned (x.Req is gone by Done)
}

// Header is a name and value filters add to a head.
type Header struct {
	Name  string
	Value []byte
}

// maxEdits bounds each edit list, so a misconfigured chain cannot grow a
// head without limit.
const maxEdits = 32

// AddSet queues a header replacement.
func (e *HeaderEdits) AddSet(name string, value []byte) bool {
	if len(e.Set) >= maxEdits {
		return false
	}
	e.Set = append(e.Set, Header{name, value})
	e.note(name)
	return true
}

// AddAppend queues an additional header.
func (e *HeaderEdits) AddAppend(name string, value []byte) bool {
	if len(e.Append) >= maxEdits {
		return false
	}
	e.Append = append(e.Append, Header{name, value})
	return true
}

// AddRemove queues a header removal.
func (e *HeaderEdits) AddRemove(name string) bool {
	if len(e.Remove) >= maxEdits {
		return false
	}
	e.Remove = append(e.Remove, name)
	e.note(name)
	return true
}

// AddSets queues every edit of set, built once, in one step: a filter that
// makes the same edits for many requests (auth, its identity headers per
// verified credential) builds them into an EditSet and spares each
// request the one-by-one queueing. It reports false, queueing nothing,
// when either list would pass its bound.
func (e *HeaderEdits) AddSets(set *EditSet) bool {
	if len(e.Set)+len(set.set) > maxEdits || len(e.Remove)+len(set.remove) > maxEdits {
		return false
	}
	e.Set = append(e.Set, set.set...)
	e.Remove = append(e.Remove, set.remove...)
	e.names |= set.names
	e.counted += len(set.set) + len(set.remove)
	return true
}

// EditSet is a list of replacements and removals built once and queued
// whole by HeaderEdits.AddSets. Build it with Set and Remove before it is
// shared; it is read-only after, and safe for concurrent use then. The
// zero value is empty.
type EditSet struct {
	set    []Header
	remove []string
	names  uint64 // as HeaderEdits.names
}

// Set adds a replacement of name by value. value must stay valid and
// unchanged as long as the set is queued.
func (s *EditSet) Set(name string, value []byte) {
	s.set = append(s.set, Header{name, value})
	s.names |= nameBitOf(name)
}

// Remove adds a removal of name.
func (s *EditSet) Remove(name string) {
	s.remove = append(s.remove, name)
	s.names |= nameBitOf(name)
}

// note adds a queued Remove or Set name to the names filter.
func (e *HeaderEdits) note(name string) {
	e.names |= nameBitOf(name)
	e.counted++
}

// nameBitOf is name's bit in HeaderEdits.names; none for "", which no
// field is called.
func nameBitOf(name string) uint64 {
	if len(name) == 0 {
		return 0
	}
	return nameBit(len(name), name[0], name[len(name)-1])
}

// nameBit is name's bit in HeaderEdits.names: a mix of its length and of
// its first and last bytes, ASCII case folded (|0x20 may merge two bytes
// that are not letters, never split a letter's two cases), so names equal
// but for case share a bit. Length alone sets apart too few of the usual
// fields (User-Agent and tracestate, Authorization and X-User-Tenant).
func nameBit(n int, first, last byte) uint64 {
	return 1 << ((uint(first|0x20) + uint(last|0x20)*5 + uint(n)*3) & 63)
}

// Removes reports whether name is dropped or replaced by the edits.
func (e *HeaderEdits) Removes(name []byte) bool {
	if len(name) > 0 && e.names&nameBit(len(name), name[0], name[len(name)-1]) == 0 &&
		e.counted == len(e.Remove)+len(e.Set) {
		return false // no queued name can match
	}
	return e.removes(name)
}

// removes is Removes' search of both lists.
func (e *HeaderEdits) removes(name []byte) bool {
	for _, n := range e.Remove {
		if codec.EqualFold(name, n) {
			return true
		}
	}
	for _, h := range e.Set {
		if codec.EqualFold(name, h.Name) {
			return true
		}
	}
	return false
}

// Sets reports whether the edits already replace name: a later filter that
// would set it too can leave the earlier value alone rather than send two
// fields.
func (e *HeaderEdits) Sets(name string) bool {
	for _, h := range e.Set {
		if strings.EqualFold(h.Name, name) {
			return true
		}
	}
	return false
}

func (e *HeaderEdits) reset() {
	e.Remove, e.Set, e.Append = e.Remove[:0], e.Set[:0], e.Append[:0]
	e.names, e.counted = 0, 0
}

// Rejection is the response a filter (or the engine) answers with. Code is
// the JSON error code. It may carry up to MaxRejectionHeaders response
// headers of its own: WWW-Authenticate, Allow, Retry-After, RateLimit-*.
type Rejection struct {
	Status  int
	Code    int
	Message string

	headers [MaxRejectionHeaders]Header
	n       int
}

// MaxRejectionHeaders bounds the headers one rejection carries.
const MaxRejectionHeaders = 6

// AddHeader adds a response header to the rejection. value must stay valid
// until the response is written: a constant, or bytes from Exchange.Own.
// It reports false, adding nothing, when the rejection is full.
func (r *Rejection) AddHeader(name string, value []byte) bool {
	if r.n == len(r.headers) {
		return false
	}
	r.headers[r.n] = Header{Name: name, Value: value}
	r.n++
	return true
}

// Reset empties the rejection. It clears only the header slots in use:
// zeroing all of them costs about 35 instructions on every request, most
// of which never reject.
func (r *Rejection) Reset() {
	clear(r.headers[:r.n])
	r.Status, r.Code, r.Message, r.n = 0, 0, "", 0
}

// Headers returns the rejection's own headers, in the order added. The
// slice is the rejection's: read it, do not keep it.
func (r *Rejection) Headers() []Header { return r.headers[:r.n] }

// Header returns the value of the rejection header called name (ASCII case
// ignored), or nil.
func (r *Rejection) Header(name string) []byte {
	for _, h := range r.headers[:r.n] {
		if codec.EqualFold([]byte(h.Name), name) {
			return h.Value
		}
	}
	return nil
}

// Reject sets the rejection and returns Respond, for one-line use:
//
//	return x.Reject(401, 40101, "missing credentials")
func (x *Exchange) Reject(status, code int, msg string) Verdict {
	x.Rejection = Rejection{Status: status, Code: code, Message: msg}
	return Respond
}

// Own copies b into the exchange's arena so it outlives the request buffer
// (values filters derive and put in edits). The arena is reused per request.
func (x *Exchange) Own(b []byte) []byte {
	start := len(x.arena)
	if cap(x.arena)-start < len(b) {
		// Growing moves earlier values; keep them valid by starting a new
		// block instead (the old one stays referenced by earlier slices).
		x.arena = make([]byte, 0, max(2*cap(x.arena), len(b), 256))
		start = 0
	}
	x.arena = append(x.arena, b...)
	return x.arena[start:len(x.arena):len(x.arena)]
}

// Park parks the request: a filter whose answer comes later calls it in its
// request phase, hands the ticket to whatever produces the answer, and
// returns Suspend. The chain then waits, and the loop serves other
// connections, until the ticket is resumed (see Ticket.Resume) or
// timeouts.suspend passes (504). Calling Park again before returning gives
// the same ticket. A filter that parks and then returns Continue or Respond
// after all voids the ticket: its resume is dropped.
//
// Park is for the request phase, including the function a ticket resumes
// with (to wait again). Without an engine (a nil Parker) it returns the
// zero Ticket.
func (x *Exchange) Park() Ticket {
	if x.parker == nil {
		return Ticket{}
	}
	return x.parker.Park()
}

// Reset prepares the exchange for a new request. parker is how the engine
// parks it (Park); nil when nothing can.
func (x *Exchange) Reset(req *codec.Request, id []byte, peer netip.Addr, loop int, parker Parker) {
	x.Req, x.RequestID, x.Peer, x.ClientIP = req, id, peer, peer
	x.TraceID = nil
	x.Span = Span{}
	x.RouteID = ""
	x.TLS = nil
	x.Loop = loop
	x.Identity = Identity{}
	x.Upstream = UpstreamEdits{Group: -1}
	x.ReqEdits.reset()
	x.RespEdits.reset()
	x.Path = nil
	x.Rejection.Reset()
	x.Status = 0
	x.arena = x.arena[:0]
	x.parker = parker
	x.stats = nil
	x.next, x.began = 0, 0
	x.now = 0
}

// SetStats names the StatSet a shared chain (NewSharedChain) records this
// exchange's filter timings into: its route's. Reset clears it; a chain
// made by NewChain records into its own stats whatever is set here.
func (x *Exchange) SetStats(s *StatSet) { x.stats = s }
