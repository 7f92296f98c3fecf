// exchange: one proxied request and its upstream call: the request side of
// the upstream.Receiver (body pump) and how the exchange ends; response.go
// holds the response side.

package engine

import (
	"net/netip"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/accesslog"
	"github.com/loopgate/loopgate/engine/wheel"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/upstream"
)

// respFraming is how upstream body bytes are put on the client connection.
type respFraming uint8

const (
	frameAsIs    respFraming = iota // Content-Length or no body: wire bytes pass through unchanged
	frameDecode                     // chunked upstream, HTTP/1.0 client: payload only, then close
	frameEncode                     // close-delimited upstream, HTTP/1.1 client: chunk the payload
	frameRechunk                    // chunked upstream, HTTP/1.1 client: canonical size lines, no extensions
)

// exchange is one request from a client and its upstream call. Exchanges
// are recycled through the loop's free list. Owned by the loop.
type exchange struct {
	loop  *loop
	cc    *clientConn // nil once the exchange is finished
	call  upstream.Call
	snap  *snapshot // the config version the request runs on, start to finish; set by begin
	route *route    // nil until routed
	chain *filters.Chain
	fx    filters.Exchange // the filters' view of the request
	sub   subCall          // a filter's sub-request

	headLen  int
	hostPort int           // the Host port, -1 when none
	headGone bool          // the head was discarded from the client's input
	saved    *pool.Buffer  // a parked request's head (see park)
	req      codec.Request // the parsed saved head

	// Parking (inbox.go). gen survives recycling: a ticket of an earlier
	// request never matches a later one's park.
	node         *resumeNode // what this exchange's tickets post; nil until its first park
	gen          uint64      // the park generation; bumped whenever a park ends
	filtering    bool        // a request phase is on the stack: Park may issue a ticket
	ticketOut    bool        // Park issued a ticket and the park has not ended
	parked       bool        // the request phases wait for that ticket's resume
	suspendTimer wheel.Timer // timeouts.suspend while parked

	id    [24]byte
	idLen int

	minor          int
	isHEAD         bool
	idempotent     bool
	expectContinue bool // the client waits for a 100 before its body
	continueSent   bool // the gateway answered the Expect itself (see bufferBody)
	teTrailers     bool // the client accepts trailers (TE: trailers)

	bufferLimit int64                // request_buffer_bytes for this request
	preChunked  codec.ChunkedDecoder // validates a buffered chunked body
	preOff      int                  // body bytes preChunked has validated
	payload     int64                // the payload bytes among them
	dechunk     bool                 // the chunked body was held whole: send it with a Content-Length
	bodyChecked bool                 // proceed has decided whether to hold the body

	reqMode      codec.BodyMode
	reqRemaining int64
	reqChunked   codec.ChunkedDecoder
	reqDone      bool
	callReady    bool
	bodyStalled  bool      // the upstream is behind; pumpBody resumes on the next tick
	stalledSince time.Time // when the upstream last took body bytes, while stalled

	finishWhenDrained bool // the response is complete but still spooled

	framing      respFraming
	respStarted  bool
	respCut      bool              // the gateway closed the client connection mid-response (see cut)
	cutReason    filters.EndReason // why, when respCut
	respFiltered bool              // the response filters ran
	interims     int               // 1xx responses forwarded
	trailers     *pool.Buffer      // response trailer section, kept for a TE: trailers client

	// For metrics (see record). started is 0 once the exchange is counted.
	started int64 // loopstat.Now at the request's first byte
	status  int   // the final status sent (or being sent); 0 = none yet

	// For the Done phase (filters.End).
	bytesIn, bytesOut int64
	forwarded         bool   // an upstream call was started
	clientGone        bool   // the client's connection ended the exchange
	errCode           int    // the JSON error code of a gateway-made answer; 0 = none
	errMsg            string // its message

	// For the logs (see logEnd).
	logReq        accesslog.Request // method and path, copied while the head is readable
	logClient     netip.Addr        // the client trusted_proxies yield on a route without filters; zero = the peer
	upstreamStart int64             // loopstat.Now at the call's start; 0 = not noted
	upstreamNs    int64             // from then to the final response head; -1 = none

	// Retries (retry.go), set when the first attempt starts.
	attempt       int              // the attempt running: 1 for the first
	tried         upstream.NodeSet // nodes of group earlier attempts failed on
	group         *upstream.Group  // the group attempts pick from
	upDef         *upstreamDef     // the upstream attempts go to (pickNode)
	budget        *retryBudget     // upDef's; set by forward, nil again once counted out
	budgetLim     budgetLimits     // its limits in the exchange's config version
	retrying      bool             // the exchange holds a retry in the budget (a retry after a connect failure takes none)
	retryMethod   bool             // the route retries the method after its bytes reached a node
	hostFromNode  bool             // the request had no Host: the head names the node
	keepBody      bool             // the body, held whole, stays in the client's input until the attempt is final (replay)
	kept          int              // bytes of it sent and kept there
	chunkLimit    int64            // the chunked body's size limit, to decode it again for a replay
	contentLength int64            // the request's Content-Length, to send it again for a replay

	// The circuit breaker (breaker.go): the phase the call was admitted
	// under, and how the upstream call ended.
	brkPhase      *breakerPhase   // nil when the route has no breaker or it was counted
	callStart     int64           // loopstat.Now at the first attempt
	upErr         *upstream.Error // the final attempt's failure; nil when none
	upStatus      int             // the final attempt's response status; 0 when none
	retryAfterBuf [20]byte        // the Retry-After value of a 55301
	isoHeld       bool            // a permit of the route's isolation limiter is held (isolation.go)

	// Waiting for that permit (isolationqueue.go).
	isoWaiting       bool
	isoPrev, isoNext *exchange   // links in the loop's permitWaiters
	isoTimer         wheel.Timer // the route's queue_timeout
}

var _ upstream.Receiver = (*exchange)(nil)

// begin resets the exchange for a newly parsed request.
func (ex *exchange) begin(cc *clientConn, req *codec.Request, headLen int) {
	ex.cc = cc
	// The loop's running version (serve just brought it up to date)
	// serves the request to its end, whatever reloads happen meanwhile.
	ex.snap, ex.route, ex.chain = cc.loop.state.snap, nil, nil
	ex.headLen, ex.headGone, ex.hostPort = headLen, false, -1
	ex.idLen = cc.loop.nextRequestID(&ex.id)
	ex.minor = req.Minor
	ex.isHEAD = string(req.Method) == "HEAD"
	ex.idempotent = idempotent(req.Method)
	ex.expectContinue = req.ExpectContinue
	ex.continueSent, ex.dechunk, ex.bodyChecked = false, false, false
	ex.teTrailers = acceptsTrailers(req.Headers)
	ex.fx.Rejection = filters.Rejection{}
	ex.fx.Req = req
	ex.callReady = false
	ex.bodyStalled = false
	ex.finishWhenDrained = false
	ex.framing = frameAsIs
	ex.respStarted, ex.respFiltered, ex.interims, ex.respCut = false, false, 0, false
	ex.started, ex.status, ex.errCode = ex.loop.now(), 0, 0
	ex.bytesIn, ex.bytesOut = int64(headLen), 0
	ex.forwarded, ex.clientGone = false, false
	ex.errMsg = ""
	ex.logReq.Set(req.Method, req.Path)
	ex.logClient = netip.Addr{}
	ex.upstreamStart, ex.upstreamNs = 0, -1
	ex.brkPhase, ex.upErr, ex.upStatus, ex.isoHeld = nil, nil, 0, false
	ex.keepBody, ex.kept = false, 0
	if cc.state == stateReadingHead { // the head took more than one read
		ex.started = cc.headStart
	}
	switch {
	case req.Chunked:
		ex.reqMode = codec.BodyChunked
		ex.reqChunked.Reset(ex.snap.limits.MaxBodyBytes)
		ex.chunkLimit = ex.snap.limits.MaxBodyBytes
	case req.ContentLength > 0:
		ex.reqMode = codec.BodyLength
		ex.reqRemaining, ex.contentLength = req.ContentLength, req.ContentLength
	default:
		ex.reqMode = codec.BodyNone
	}
	ex.reqDone = ex.reqMode == codec.BodyNone
}

// acceptsTrailers reports a TE field listing "trailers" (RFC 9110 10.1.4).
func acceptsTrailers(hs codec.Headers) bool {
	for _, h := range hs {
		if len(h.Name) == 2 && h.Name[0]|0x20 == 't' && h.Name[1]|0x20 == 'e' && codec.ContainsToken(h.Value, "trailers") {
			return true
		}
	}
	return false
}

// requestID is the generated ID, or the one the request_id filter kept.
func (ex *exchange) requestID() []byte {
	if ex.chain != nil && ex.fx.RequestID != nil {
		return ex.fx.RequestID
	}
	return ex.id[:ex.idLen]
}

// forward starts the upstream call's first attempt on node p; see
// retryAfter for the others.
func (ex *exchange) forward(p *upstream.Pool, head *pool.Buffer) {
	ex.forwarded = true
	ex.attempt, ex.tried, ex.retrying = 1, upstream.NodeSet{}, false
	ex.callStart = ex.loop.now()
	ex.markUpstreamStart()
	ex.budget, ex.budgetLim = ex.upDef.budget, ex.upDef.budgetLim
	ex.budget.begin(ex.loop.index)
	ex.startCall(p, head)
}

// idempotent: only these methods are resent after a stale connection.
func idempotent(method []byte) bool {
	m := string(method)
	return m == "GET" || m == "HEAD" || m == "OPTIONS"
}

// CallReady streams the body once the upstream connection is attached.
func (ex *exchange) CallReady(*upstream.Call) bool {
	ex.callReady = true
	if !ex.reqDone {
		ex.pumpBody()
	}
	return ex.cc != nil
}

// pumpBody moves request body bytes from the client's input to the upstream.
// Bytes stay in the client's gnet buffer until the call can take them.
func (ex *exchange) pumpBody() {
	cc := ex.cc
	high := ex.snap.maxConnBuffer
	for cc != nil && !ex.reqDone && ex.callReady {
		if ex.call.Backlog() > high {
			// gnet cannot pause the client, so the body waits in its input
			// buffer (bounded by max_body_bytes) until the upstream catches
			// up, for at most the response timeout.
			now := ex.loop.wheel.Now()
			if !ex.bodyStalled {
				ex.stalledSince = now
			} else if now.Sub(ex.stalledSince) > ex.route.responseTimeout {
				ex.stalledTooLong()
				return
			}
			ex.bodyStalled = true
			ex.loop.wheel.Arm(&cc.timer, wheel.DefaultTick)
			return
		}
		ex.bodyStalled = false
		buf, _ := cc.gc.Peek(-1)
		buf = buf[ex.kept:] // a body kept for a replay stays in the input
		if len(buf) == 0 {
			return
		}
		var take int
		var chunk []byte
		last := false // this piece ends the body
		switch ex.reqMode {
		case codec.BodyLength:
			take = len(buf)
			if int64(take) > ex.reqRemaining {
				take = int(ex.reqRemaining)
			}
			ex.reqRemaining -= int64(take)
			last = ex.reqRemaining == 0
		case codec.BodyChunked:
			n, data, done, err := ex.reqChunked.Next(buf)
			if err != nil {
				ex.badBody(err)
				return
			}
			if n == 0 {
				return
			}
			take, last = n, done
			chunk = data
		}
		// Send before Discard: buf may be a copy gnet returns to a shared
		// pool at Discard. A failed Send ends the exchange (CallFailed runs
		// inside it) while reqDone is still false, so the connection closes
		// and no body byte is ever parsed as a request; reqDone is set only
		// once the last piece went out.
		// A chunked body is re-encoded: the upstream sees canonical size
		// lines, no extensions and no trailers, never the client's framing.
		sent, attempt := true, ex.attempt
		switch {
		case ex.reqMode != codec.BodyChunked:
			sent = ex.call.Send(buf[:take])
		case ex.dechunk:
			if len(chunk) > 0 {
				sent = ex.call.Send(chunk)
			}
		case len(chunk) > 0:
			sent = ex.call.SendChunk(chunk)
		case last:
			sent = ex.call.Send(lastChunk)
		}
		chunk = nil
		if ex.attempt != attempt {
			return // the send failed and a retry rewound the kept body: the next attempt sends it
		}
		if ex.keepBody {
			ex.kept += take
		} else {
			_, _ = cc.gc.Discard(take)
		}
		ex.bytesIn += int64(take)
		if !sent {
			return
		}
		if ex.reqDone = last; last {
			ex.call.SendDone()
			if cc.state == stateReadingBody {
				cc.setState(stateWaitingUpstream)
				cc.timer.Stop()
			}
		}
	}
}

// stalledTooLong: the upstream stopped taking the request body.
func (ex *exchange) stalledTooLong() {
	const msg = "upstream stopped reading the request body"
	ex.bodyStalled = false
	ex.call.Abort()
	if ex.respStarted {
		ex.cut(filters.EndUpstreamStalled, 50401, msg)
		return
	}
	ex.cc.closeAfter = true
	ex.respond(504, 50401, msg)
}

// badBody: the request body broke its framing or its size limit.
func (ex *exchange) badBody(err error) {
	cc := ex.cc
	e, ok := err.(*codec.Error)
	if !ok {
		e = codec.ErrMalformed
	}
	if ex.respStarted {
		ex.cut(filters.EndBadRequestBody, e.Code, e.Message)
		return
	}
	ex.call.Abort()
	cc.closeAfter = true
	ex.respond(e.Status, e.Code, e.Message)
}

// cut ends a response already under way by closing the client's
// connection, the only honest signal once part of it went out: a
// truncated body must not look complete. why, code and msg are for the
// logs (an access line ending why, a response_cut error line) and the
// Done phase, since the client never sees them.
func (ex *exchange) cut(why filters.EndReason, code int, msg string) {
	ex.respCut, ex.cutReason, ex.errCode, ex.errMsg = true, why, code, msg
	ex.cc.close()
}

// respond sends a gateway-generated JSON error and ends the exchange.
// Response filters run first, so they see the status and their timings
// close.
func (ex *exchange) respond(status, code int, msg string) {
	cc := ex.cc
	ex.dropKeptBody() // whatever ended the exchange, a kept body is never read as the next request
	ex.respStarted = true
	if ex.loop.srv.draining.Load() {
		cc.closeAfter = true // as in ResponseHead
	}
	ex.status, ex.errCode, ex.errMsg = status, code, msg
	if ex.chain != nil {
		ex.runResponseFilters(status)
	}
	// A local reply is an ordinary response: the route's response header
	// edits (queued by the response phase above) apply to it too.
	var edits *filters.HeaderEdits
	if ex.chain != nil {
		edits = &ex.fx.RespEdits
	}
	if cc.writeError(status, code, msg, ex.requestID(), ex.isHEAD, ex.fx.Rejection.Headers(), edits) {
		cc.finish()
	}
}

// done sets fx.End, how the exchange ended, and runs the chain's Done
// phase with it, once: putExchange calls it on every path an exchange ends
// by, before logEnd and record, which read fx.End too.
func (ex *exchange) done() {
	if ex.started == 0 {
		return
	}
	fx := &ex.fx
	fx.Req = nil
	end := filters.End{Status: ex.status, BytesIn: ex.bytesIn, BytesOut: ex.bytesOut,
		Duration: ex.loop.fresh() - ex.started}
	if ex.forwarded {
		end.Node, end.Retries = ex.call.Node(), ex.call.Retries()+ex.attempt-1
	}
	switch {
	case ex.respCut: // the gateway closed the client's connection for it
		end.Reason = ex.cutReason
	case ex.status == 0 || ex.clientGone:
		end.Reason = filters.EndClientGone
		if end.Status == 0 {
			end.Status = statusClientClosed
		}
	case ex.errCode == 0:
		end.Reason = filters.EndServed
	case ex.status == 408 || ex.status == 504:
		end.Reason = filters.EndTimeout
	case ex.status >= 500:
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
	if ex.started == 0 {
		return // never began, or counted already
	}
	l := ex.loop
	m := l.srv.metrics.unrouted
	if ex.route != nil {
		m = ex.route.metrics
	}
	code := ex.errCode
	if ex.respCut {
		code = 0 // not an answer the gateway made: the status class counts it
	}
	m.observe(l.index, ex.fx.End.Status, code, ex.fx.End.Duration)
	if ex.route != nil {
		// Last: a reader that sees the request out of flight sees it
		// counted, and the registry's sweep never drops a route before
		// its last count.
		m.end(l.index)
	}
	ex.started = 0
}
