// exchange: one proxied request and its upstream call: its phase, its state
// grouped by concern, the one place each group is reset (begin), and how
// the exchange ends (respond, cut, done, record). The phases themselves
// are driven by run (phases.go).

package engine

import (
	"net/netip"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/accesslog"
	"github.com/loopgate/loopgate/engine/policy"
	"github.com/loopgate/loopgate/engine/wheel"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/upstream"
)

// phase is where an exchange is. A reader of one field knows what the
// exchange waits for and which of its groups are live.
//
// Transitions, all through exchange.setPhase (phaseMoves is the table):
//
//	done -> routing              begin: a parsed head took the exchange off the free list
//	routing -> filtering         the route runs filters
//	filtering -> parked          a filter suspended the request with a ticket out
//	parked -> filtering          the ticket was resumed (inbox.go)
//	routing, filtering -> buffering        a small body is awaited whole (bufferBody)
//	routing, filtering, buffering -> waiting   over the route's isolation limit, queued for a permit
//	routing, filtering, buffering, waiting -> attempting   the upstream head is built and the call started
//	attempting -> streaming      the final response head was accepted (ResponseHead)
//	routing ... attempting -> streaming    the gateway answers itself (respond): a local reply
//	                             is an ordinary response
//	streaming -> streaming       a held-back head was dropped for a clean 502 (CallFailed)
//	streaming -> spooled         the last body byte is read, but some wait in the spool
//	any -> done                  putExchange: finished, or the client left
//
// A retry stays in attempting. Parked and waiting each hold the
// exchange's one phase timer (suspend, queue_timeout), which leaving the
// phase stops.
type phase uint8

const (
	phaseDone       phase = iota // finished, or not begun: on the free list
	phaseRouting                 // Host and path normalised, matched against the routes
	phaseFiltering               // the request filters run (a ticket may be taken only now)
	phaseParked                  // a filter's ticket is out; the request waits for its resume
	phaseBuffering               // a small body is awaited whole before any upstream is asked
	phaseWaiting                 // waiting in the loop's queue for an isolation permit
	phaseAttempting              // an upstream call is under way (the first attempt or a retry)
	phaseStreaming               // the response (an upstream's or the gateway's) is going to the client
	phaseSpooled                 // the response is complete upstream; its last bytes wait in the spool
	numPhases
)

var phaseNames = [numPhases]string{"done", "routing", "filtering", "parked", "buffering", "waiting", "attempting", "streaming", "spooled"}

func (p phase) String() string { return phaseNames[p] }

// phaseMoves[from] has bit to set for each legal transition.
var phaseMoves = [numPhases]uint16{
	phaseDone:       1 << phaseRouting,
	phaseRouting:    1<<phaseFiltering | 1<<phaseBuffering | 1<<phaseWaiting | 1<<phaseAttempting | 1<<phaseStreaming | 1<<phaseDone,
	phaseFiltering:  1<<phaseParked | 1<<phaseBuffering | 1<<phaseWaiting | 1<<phaseAttempting | 1<<phaseStreaming | 1<<phaseDone,
	phaseParked:     1<<phaseFiltering | 1<<phaseStreaming | 1<<phaseDone,
	phaseBuffering:  1<<phaseWaiting | 1<<phaseAttempting | 1<<phaseStreaming | 1<<phaseDone,
	phaseWaiting:    1<<phaseAttempting | 1<<phaseStreaming | 1<<phaseDone,
	phaseAttempting: 1<<phaseStreaming | 1<<phaseDone,
	phaseStreaming:  1<<phaseStreaming | 1<<phaseSpooled | 1<<phaseDone,
	phaseSpooled:    1 << phaseDone,
}

// phaseChecks makes an illegal transition panic; the tests set it. In
// production the transition is made anyway: a wrong table must not take
// the gateway down.
var phaseChecks = false

// setPhase moves the exchange to p, the one place its phase changes.
// Leaving parked or waiting stops the phase timer those two phases arm.
func (ex *exchange) setPhase(p phase) {
	from := ex.phase
	if phaseChecks && phaseMoves[from]&(1<<p) == 0 {
		panic(illegalMove{from, p})
	}
	if from == phaseParked || from == phaseWaiting {
		ex.timer.Stop()
	}
	ex.phase = p
}

// illegalMove is the panic of a transition phaseMoves does not allow. A
// value, not a message: setPhase is inlined at every transition, and the
// message's concatenation would put the same cold code in each of them.
type illegalMove struct{ from, to phase }

func (m illegalMove) Error() string {
	return "engine: exchange phase " + m.from.String() + " -> " + m.to.String()
}

// responding reports whether the response has begun: a head was accepted
// or the gateway is answering, so no retry and no second answer may start.
func (ex *exchange) responding() bool {
	return ex.phase == phaseStreaming || ex.phase == phaseSpooled
}

// respFraming is how upstream body bytes are put on the client connection.
type respFraming uint8

const (
	frameAsIs    respFraming = iota // Content-Length or no body: wire bytes pass through unchanged
	frameDecode                     // chunked upstream, HTTP/1.0 client: payload only, then close
	frameEncode                     // close-delimited upstream, HTTP/1.1 client: chunk the payload
	frameRechunk                    // chunked upstream, HTTP/1.1 client: canonical size lines, no extensions
	frameHold                       // held for the route's body filter; nothing written yet (respbody.go)
)

// exchange is one request from a client and its upstream call. Exchanges
// are recycled through the loop's free list. Owned by the loop.
//
// The groups below the phase are reset by begin, each with one
// assignment, and filled from the request there; what a group holds that
// must be given back (a budget slot, a permit, a pooled buffer) is given
// back when the exchange ends (putExchange). The most used fields come
// first, so a plain request touches few cache lines.
type exchange struct {
	loop  *loop
	cc    *clientConn // nil once the exchange is finished
	phase phase       // changed only by setPhase
	snap  *snapshot   // the config version the request runs on, start to finish; set by begin
	route *route      // nil until routed
	shard *routeShard // route's series shard of this loop, from routing to record
	// flight is the loop's count of snap's routed exchanges in flight,
	// from routing to record (snapshot.flights).
	flight *flightCount
	chain  *filters.Chain

	head   headInfo  // what the request head said
	resp   respState // the response on its way to the client
	end    outcome   // how it went: the Done phase, metrics, the breaker's record
	retry  attempts  // the upstream call's attempts (retry.go)
	policy admission // what the route's breaker and isolation limiter gave the call
	log    logState  // what only the access log reads
	body   reqBody   // the request body on its way upstream (its mode and done first)
	decode decoders  // its chunked decoders, Reset where they are needed

	upgrade upgradeState // an Upgrade request's tunnel slot and tunnel (upgrade.go); reset by endUpgrade

	call upstream.Call

	hold respHold // a response body held for the route's body filter (respbody.go); zeroed by endHold

	// retryAfterBuf holds the Retry-After value of a 55301 while it is
	// written; begin need not clear it.
	retryAfterBuf [20]byte

	// Parking (inbox.go): not reset by begin, since gen survives
	// recycling (a ticket of an earlier request never matches a later
	// one's park); endPark is where a park ends.
	park parking
	// timer is the phase's deadline: timeouts.suspend while parked, the
	// route's queue_timeout while waiting for a permit. Init once;
	// setPhase stops it when either phase ends.
	timer wheel.Timer

	saved  *pool.Buffer      // a parked, buffering or waiting request's head (see save)
	req    codec.Request     // the parsed saved head
	logReq accesslog.Request // method and path, copied while the head is readable (set whole by begin)
	sub    subCall           // a filter's sub-request
	fx     filters.Exchange  // the filters' view of the request
}

// headInfo is what the request head said, as the exchange needs it after
// the head's bytes are gone.
type headInfo struct {
	headLen    int
	hostPort   int  // the Host port, -1 when none
	minor      int  // the client's HTTP minor version
	gone       bool // the head was discarded from the client's input
	isHEAD     bool
	idempotent bool
	teTrailers bool // the client accepts trailers (TE: trailers)
	idLen      int
	id         [24]byte
}

// reqBody is the request body: its framing as it streams to the upstream
// (pumpBody), the pass that holds a small body whole first (bufferBody),
// and what a replay on another node needs.
type reqBody struct {
	mode         codec.BodyMode
	done         bool // the body went out whole, or there is none
	stalled      bool // the upstream is behind; pumpBody resumes on the next tick
	continueSent bool // the gateway answered the Expect itself (see sendContinue)
	dechunk      bool // the chunked body was held whole: send it with a Content-Length
	keep         bool // the body, held whole, stays in the client's input until the attempt is final (replay)
	kept         int  // bytes of it sent and kept there
	remaining    int64
	stalledSince time.Time // when the upstream last took body bytes, while stalled

	contentLength int64 // the request's Content-Length, to send it again for a replay
	chunkLimit    int64 // the chunked body's size limit, to decode it again for a replay

	// Holding it whole (bufferBody).
	bufferLimit int64 // request_buffer_bytes for this request
	preOff      int   // body bytes decoders.pre has validated
	payload     int64 // the payload bytes among them
}

// decoders are the request body's chunked decoders. They are not reset
// with the body group: each is Reset where a chunked body first needs it,
// so a request without one does not pay for clearing them.
type decoders struct {
	body codec.ChunkedDecoder // the chunked body as it streams (pumpBody); Reset by begin, routeRequest and rewindBody
	pre  codec.ChunkedDecoder // validates a chunked body held whole (bufferBody); Reset by wantsBuffer
}

// respState is the response's framing and what the gateway did to it.
type respState struct {
	framing   respFraming
	filtered  bool              // the response filters ran
	cut       bool              // the gateway closed the client connection mid-response (see cut)
	cutReason filters.EndReason // why, when cut
	interims  int               // 1xx responses forwarded
	trailers  *pool.Buffer      // response trailer section, kept for a TE: trailers client
}

// outcome is how the exchange went, for the Done phase (filters.End), the
// route metrics (record) and the breaker (recordBreaker).
type outcome struct {
	started           int64 // loopstat.Now at the request's first byte; 0 once counted
	callStart         int64 // loopstat.Now at the first attempt
	status            int   // the final status sent (or being sent); 0 = none yet
	bytesIn, bytesOut int64
	clientGone        bool            // the client's connection ended the exchange
	errCode           int             // the JSON error code of a gateway-made answer; 0 = none
	errMsg            string          // its message
	upErr             *upstream.Error // the final attempt's failure; nil when none
	upStatus          int             // the final attempt's response status; 0 when none
}

// attempts are the upstream call's attempts (retry.go), set when the first
// one starts. n is 0 until then: an exchange answered before any call
// has n == 0.
type attempts struct {
	n            int                 // the attempt running: 1 for the first
	attached     bool                // the attempt's connection is attached: the body may stream (CallReady)
	retrying     bool                // the exchange holds a retry in the budget (a retry after a connect failure takes none)
	retryMethod  bool                // the route retries the method after its bytes reached a node
	hostFromNode bool                // the request had no Host: the head names the node
	group        *upstream.Group     // the group attempts pick from
	upDef        *upstreamDef        // the upstream attempts go to (pickNode)
	budget       *policy.Budget      // upDef's; set by forward, nil again once counted out
	budgetLim    policy.BudgetLimits // its limits in the exchange's config version
	tried        upstream.NodeSet    // nodes of group earlier attempts failed on (read only by a retry)
}

// admission is what the route's policies gave the call (admission.go):
// the circuit breaker's phase it was admitted under, the isolation
// permit, and the links of the permit queue while waiting
// (isolationqueue.go).
type admission struct {
	brk        *policy.BreakerPhase // nil when the route has no breaker or it was counted
	iso        *policy.Limiter      // the route's isolation limiter while a permit of it is held; nil = none held
	prev, next *exchange            // links in the loop's permitWaiters, while waiting
}

// logState is what only the logs read.
type logState struct {
	client        netip.Addr // the client trusted_proxies yield on a route without filters; zero = the peer
	upstreamStart int64      // loopstat.Now at the call's start; 0 = not noted
	upstreamNs    int64      // from then to the final response head; -1 = none
}

var _ upstream.Receiver = (*exchange)(nil)

// begin readies the exchange for a newly parsed request: every group is
// reset here, whole, with what the request says.
func (ex *exchange) begin(cc *clientConn, req *codec.Request, headLen int) {
	ex.cc = cc
	ex.setPhase(phaseRouting)
	// The loop's running version (serve just brought it up to date)
	// serves the request to its end, whatever reloads happen meanwhile.
	ex.snap, ex.route, ex.chain = cc.loop.state.snap, nil, nil
	ex.head = headInfo{headLen: headLen, hostPort: -1, minor: req.Minor,
		isHEAD: string(req.Method) == "HEAD", idempotent: idempotent(req.Method), teTrailers: req.TETrailers}
	ex.head.idLen = cc.loop.nextRequestID(&ex.head.id)
	ex.body = reqBody{}
	switch {
	case req.Chunked:
		ex.body.mode = codec.BodyChunked
		ex.decode.body.Reset(ex.snap.limits.MaxBodyBytes)
		ex.body.chunkLimit = ex.snap.limits.MaxBodyBytes
	case req.ContentLength > 0:
		ex.body.mode = codec.BodyLength
		ex.body.remaining, ex.body.contentLength = req.ContentLength, req.ContentLength
	default:
		ex.body.mode = codec.BodyNone
		ex.body.done = true
	}
	ex.resp = respState{}
	started := ex.loop.now()
	if cc.state == stateReadingHead { // the head took more than one read
		started = cc.headStart
	}
	ex.end = outcome{started: started, bytesIn: int64(headLen)}
	ex.retry = attempts{}
	ex.policy = admission{}
	ex.log = logState{upstreamNs: -1}
	ex.logReq.Set(req.Method, req.Path)
	ex.fx.Rejection.Reset()
	ex.fx.Req = req
}

// idempotent: only these methods are resent after a stale connection.
func idempotent(method []byte) bool {
	switch string(method) { // compared in place: a string(method) variable would be a copy
	case "GET", "HEAD", "OPTIONS":
		return true
	}
	return false
}

// requestID is the generated ID, or the one the request_id filter kept.
func (ex *exchange) requestID() []byte {
	if ex.chain != nil && ex.fx.RequestID != nil {
		return ex.fx.RequestID
	}
	return ex.head.id[:ex.head.idLen]
}

// localReply answers the request with err (a *codec.Error) without an
// upstream. An unread body closes the connection, since its framing is lost.
func (ex *exchange) localReply(err error) {
	e, ok := err.(*codec.Error)
	if !ok {
		e = codec.ErrMalformed
	}
	ex.discardHead()
	if !ex.body.done {
		ex.cc.closeAfter = true
	}
	ex.respond(e.Status, e.Code, e.Message)
}

// respond sends a gateway-generated JSON error and ends the exchange.
// Response filters run first, so they see the status and their timings
// close.
func (ex *exchange) respond(status, code int, msg string) {
	cc := ex.cc
	ex.dropKeptBody() // whatever ended the exchange, a kept body is never read as the next request
	ex.setPhase(phaseStreaming)
	if ex.loop.srv.draining.Load() {
		cc.closeAfter = true // as in ResponseHead
	}
	ex.end.status, ex.end.errCode, ex.end.errMsg = status, code, msg
	if ex.chain != nil {
		ex.runResponseFilters(status)
	}
	// A local reply is an ordinary response: the route's response header
	// edits (queued by the response phase above) apply to it too.
	var edits *filters.HeaderEdits
	if ex.chain != nil {
		edits = &ex.fx.RespEdits
	}
	if cc.writeError(status, code, msg, ex.requestID(), ex.head.isHEAD, ex.fx.Rejection.Headers(), edits) {
		cc.finish()
	}
}

// cut ends a response already under way by closing the client's
// connection, the only honest signal once part of it went out: a
// truncated body must not look complete. why, code and msg are for the
// logs (an access line ending why, a response_cut error line) and the
// Done phase, since the client never sees them.
func (ex *exchange) cut(why filters.EndReason, code int, msg string) {
	ex.resp.cut, ex.resp.cutReason, ex.end.errCode, ex.end.errMsg = true, why, code, msg
	ex.cc.close()
}

// done sets fx.End, how the exchange ended, and runs the chain's Done
// phase with it, once: putExchange calls it on every path an exchange ends
// by, before logEnd and record, which read fx.End too.
func (ex *exchange) done() {
	o := &ex.end
	if o.started == 0 {
		return
	}
	fx := &ex.fx
	fx.Req = nil
	end := filters.End{Status: o.status, BytesIn: o.bytesIn, BytesOut: o.bytesOut,
		Duration: ex.loop.fresh() - o.started}
	if ex.retry.n > 0 { // an upstream call was started
		end.Node, end.Retries = ex.call.Node(), ex.call.Retries()+ex.retry.n-1
	}
	switch {
	case ex.resp.cut: // the gateway closed the client's connection for it
		end.Reason = ex.resp.cutReason
	case o.status == 0 || o.clientGone:
		end.Reason = filters.EndClientGone
		if end.Status == 0 {
			end.Status = statusClientClosed
		}
	case o.errCode == 0:
		end.Reason = filters.EndServed
	case o.status == 408 || o.status == 504:
		end.Reason = filters.EndTimeout
	case o.status >= 500:
		end.Reason = filters.EndUpstreamFailed
	default:
		end.Reason = filters.EndRejected
	}
	fx.End = end
	if ex.chain != nil {
		ex.chain.RunDone(fx)
	}
}

// record counts the exchange in its route's metrics (the unrouted ones when
// it matched no route), once: putExchange calls it on every path an
// exchange ends by. A client that left before any response was sent is
// counted as 499, as nginx logs it.
func (ex *exchange) record() {
	if ex.end.started == 0 {
		return // never began, or counted already
	}
	l := ex.loop
	code := ex.end.errCode
	if ex.resp.cut {
		code = 0 // not an answer the gateway made: the status class counts it
	}
	if ex.route == nil {
		l.srv.metrics.unrouted.observe(l.index, ex.fx.End.Status, code, ex.fx.End.Duration)
		ex.end.started = 0
		return
	}
	if !ex.route.metrics.quiet.Load() {
		ex.shard.count(ex.fx.End.Status, code, ex.fx.End.Duration)
	}
	// Last: a reader that sees the request out of flight sees it counted,
	// and the registry's sweep never drops a route (or trims its filter
	// stats) before its last count.
	ex.shard.end()
	ex.flight.add(-1)
	ex.end.started = 0
}
