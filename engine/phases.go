// The request side of an exchange: the driver (run) and the phases it
// takes a request through, in this order: route, request filters (which
// may park it), the Expect and a small body held whole, the route's
// breaker and isolation permit, then the upstream call's first attempt.

package engine

import (
	"unsafe"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/upstream"
)

// start takes a parsed head: it checks the process-wide buffer budget, then
// hands the request to the driver. The head's views live in the client's
// input buffer until it is discarded, so everything needed later is copied
// out first.
func (cc *clientConn) start(req *codec.Request, headLen int) {
	l := cc.loop
	l.stats.requests.Add(1)
	ex := l.getExchange()
	ex.begin(cc, req, headLen)
	cc.ex = ex
	if !req.KeepAlive || l.srv.draining.Load() {
		cc.closeAfter = true
	}
	if ex.body.mode != codec.BodyNone {
		if l.srv.buffered.Load() >= ex.snap.maxBuffered {
			ex.discardHead()
			cc.closeAfter = true // the body is not read, so the framing is lost
			ex.fx.Rejection.AddHeader("Retry-After", retryAfterOne)
			ex.respond(503, 50303, "gateway buffer budget exhausted; retry later")
			return
		}
	}
	ex.run()
}

// run is the request driver: every request phase, in the order a request
// meets them, from the phase the exchange is in. It returns when a phase
// answers the request, or waits; whatever ends a wait calls run again, and
// the phase the exchange waited in brings it back to the step after:
//
//	routing ─▶ [filtering ─▶ (parked ─▶ resume ─▶ filtering)] ─▶ 100 Continue
//	  ─▶ body held whole? (buffering ─▶ bodyArrived) ─▶ breaker ─▶ permit
//	  (waiting ─▶ grantPermits) ─▶ attempting
//
// From attempting on, the upstream call's callbacks carry the exchange
// (reqbody.go, response.go, and retry.go's edge back to another attempt).
func (ex *exchange) run() {
	switch ex.phase {
	case phaseRouting: // from start
		if !ex.routeRequest() {
			return // answered: a bad Host or path, no route, an escaped slash
		}
		if ex.chain != nil && !ex.afterFilters(ex.runFilters()) {
			return // parked, or answered by a filter
		}
		fallthrough
	case phaseFiltering: // from resume (inbox.go): the filters let the request through
		if ex.body.mode != codec.BodyNone && (!ex.sendContinue() || !ex.holdBody()) {
			return // the client is gone, the body is still arriving, or it was bad
		}
		fallthrough
	case phaseBuffering: // from bodyArrived: the body is whole
		if ex.route.breaker != nil && !ex.admitBreaker() {
			return // answered 503, code 55301
		}
		// A call refused or never started from here on gives its breaker
		// permit back when the exchange ends (recordBreaker: no outcome).
		if ex.route.isolationCfg != nil && !ex.acquireIsolation() {
			return // answered 429, code 42901, or waiting for a permit
		}
		fallthrough
	case phaseWaiting: // from grantPermits: the permit is held
		ex.callUpstream()
	default:
		// No wait ends in another phase. As with setPhase, the tests
		// panic; in production the request is left to its deadlines
		// rather than the gateway taken down.
		if phaseChecks {
			panic("engine: run in phase " + ex.phase.String())
		}
	}
}

// routeRequest normalises the request's Host and path and matches a route.
// What the router and the filters judge is what goes upstream: the
// normalised path (not the raw target) is forwarded. It reports false when
// the request was answered.
func (ex *exchange) routeRequest() bool {
	cc, l := ex.cc, ex.loop
	req := ex.fx.Req
	snap := ex.snap // the one config version the request runs on (see begin)
	// The parser checked the Host and split it.
	host, port := req.NormalHost(l.host[:0])
	path, flags, err := codec.NormalizePath(l.path[:0], req.Path)
	if err != nil {
		ex.localReply(err)
		return false
	}
	req.Host, req.Path, ex.head.hostPort = host, path, port
	if cc.redirect != 0 { // a plain listener with redirect_https
		ex.redirectHTTPS(req, cc.redirect)
		return false
	}
	res := snap.table.Match(host, req.Method, path, l.scratch[:0])
	if !res.Found {
		if res.Allow != "" {
			ex.fx.Rejection.AddHeader("Allow", readOnlyBytes(res.Allow))
			ex.localReply(errMethodNotAllowed)
			return false
		}
		ex.localReply(errNoRoute)
		return false
	}
	ex.route = snap.routes.at(res.Index)
	ex.shard = ex.route.metrics.begin(l.index) // until record
	ex.flight = l.flight                       // snap's, as l runs snap (see begin)
	ex.flight.add(1)
	if flags != 0 && !ex.route.keepEscapes {
		ex.localReply(errEscapedSlash)
		return false
	}
	if ex.route.tls != routeTLSAny && ex.refusedByRouteTLS(req) {
		return false
	}
	if req.Upgrade && !ex.admitUpgrade(req) {
		return false
	}
	if ex.body.mode == codec.BodyChunked && ex.route.maxBody > 0 {
		ex.decode.body.Reset(ex.route.maxBody)
		ex.body.chunkLimit = ex.route.maxBody
	}
	ex.chain = ex.route.chain
	if ex.chain == nil && len(snap.trusted) > 0 && l.log.access != nil {
		// The access log names the client trusted_proxies yield, as on
		// a route with filters (fx.ClientIP, runFilters).
		ex.log.client = l.srv.services.clientIP(cc.peer, req.Headers, snap.trusted)
	}
	return true
}

// runFilters runs the route's request filters and returns their verdict.
func (ex *exchange) runFilters() filters.Verdict {
	cc, snap := ex.cc, ex.snap
	fx := &ex.fx
	req := fx.Req
	fx.Reset(req, ex.head.id[:ex.head.idLen], cc.peer, ex.loop.index, ex)
	fx.Start = ex.end.started
	fx.RouteID = ex.route.id
	fx.SetStats(&ex.route.metrics.filters) // the chain may be shared by many routes
	fx.Sub = ex
	if cc.tls != nil {
		fx.TLS = cc.tls.State()
	}
	if len(snap.trusted) > 0 {
		fx.ClientIP = ex.loop.srv.services.clientIP(cc.peer, req.Headers, snap.trusted)
	}
	ex.setPhase(phaseFiltering)
	return ex.chain.RunRequest(fx)
}

// retryAfterOne is the Retry-After of a 503 for a spent buffer budget.
var retryAfterOne = []byte("1")

// readOnlyBytes views s as bytes without copying, for values that are only
// written out (the router's precomputed Allow lists). Never modify them.
func readOnlyBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

var (
	errNoRoute          = &codec.Error{Status: 404, Code: 40401, Message: "no route for this path"}
	errMethodNotAllowed = &codec.Error{Status: 405, Code: 40501, Message: "method not allowed on this path"}
	errEscapedSlash     = &codec.Error{Status: 400, Code: 40001, Message: "encoded slash or backslash in path"}
)

// afterFilters acts on the request filters' verdict, from run or from a
// resume (see inbox.go), and reports whether the request goes on (Continue).
//
// A ticket resumed before its filter even returned Suspend (a sub-request
// that failed at once, a filter that resumes its own ticket) needs nothing
// special: the resume is queued, and the loop delivers it after this
// callback, to the park made here.
func (ex *exchange) afterFilters(v filters.Verdict) bool {
	if v == filters.Suspend && ex.park.ticketOut {
		ex.parkRequest()
		return false
	}
	ex.endPark() // a filter that parked and then decided at once voided its ticket
	switch v {
	case filters.Continue:
		return true
	case filters.Respond:
	case filters.Suspend:
		// Nothing could ever resume it: answer now rather than at the
		// suspend deadline.
		ex.fx.Reject(500, 50001, "a filter suspended the request without parking it")
	default:
		ex.fx.Reject(500, 50001, "a filter returned an unknown verdict")
	}
	ex.discardHead()
	if !ex.body.done {
		ex.cc.closeAfter = true
	}
	r := &ex.fx.Rejection
	ex.respond(r.Status, r.Code, r.Message)
	return false
}

// parkRequest keeps a parked request alive (see save) until its ticket is
// resumed; it may wait at most timeouts.suspend.
func (ex *exchange) parkRequest() {
	ex.setPhase(phaseParked)
	ex.loop.wheel.Arm(&ex.timer, ex.snap.timeouts.suspend)
	ex.save()
	// Out of Idle/ReadingHead, so serve takes no pipelined request while
	// this one waits; any body waits too, with no read deadline meanwhile.
	ex.cc.setState(stateWaitingUpstream)
	ex.cc.stopTimer()
}

// save moves the request head out of the client's input buffer (whose views
// die with the callback) into a pooled copy that is parsed again, so the
// request reads the same when it carries on later: after a filter resumes
// it, once its body has arrived, or once it holds a permit. The normalised
// path and Host (in loop scratch until now) move with it. Body bytes stay
// in the client's buffer until the upstream takes them. Saving twice keeps
// the first copy.
func (ex *exchange) save() {
	if ex.saved != nil {
		return
	}
	cc := ex.cc
	head := cc.peek(ex.head.headLen)
	path, host := ex.fx.Req.Path, ex.fx.Req.Host
	ex.saved = pool.Get(len(head) + len(path) + len(host))
	ex.saved.B = append(ex.saved.B, head...)
	ex.saved.B = append(ex.saved.B, path...)
	ex.saved.B = append(ex.saved.B, host...)
	ex.req.Reset()
	if _, err := codec.ParseRequest(ex.saved.B[:len(head)], &ex.req, &ex.snap.limits); err != nil {
		panic("engine: a parsed head failed to parse again: " + err.Error())
	}
	ex.req.Path = ex.saved.B[len(head) : len(head)+len(path)]
	ex.req.Host = ex.saved.B[len(head)+len(path):]
	ex.fx.Req = &ex.req
	ex.discardHead()
}

// suspendExpired: a filter kept the request parked past timeouts.suspend.
// The park ends, so a resume still on its way is dropped; its pending work
// is cancelled (the sub-request aborted) and the client gets a 504.
func (ex *exchange) suspendExpired() {
	ex.endPark()
	ex.sub.abort()
	if !ex.body.done {
		ex.cc.closeAfter = true
	}
	ex.respond(504, 50401, "timed out waiting for a filter")
}

// phaseExpired is the phase timer: the deadline of the phase that armed it.
func (ex *exchange) phaseExpired() {
	if ex.cc == nil {
		return
	}
	switch ex.phase {
	case phaseParked:
		ex.suspendExpired()
	case phaseWaiting:
		ex.permitWaitExpired()
	}
}

// discardHead drops the request head from the client's input, once.
func (ex *exchange) discardHead() {
	if !ex.head.gone {
		ex.head.gone = true
		ex.cc.discard(ex.head.headLen)
	}
}

// sendContinue answers a client's Expect: 100-continue once the request
// passed routing and its filters, so the client may send its body. As
// nginx and Envoy do, the gateway answers the Expect itself and the
// upstream never sees it: an upstream that ignores Expect (Python's
// wsgiref) would otherwise stall the client for its own timeout. It
// reports false when the client is gone.
func (ex *exchange) sendContinue() bool {
	if !ex.fx.Req.ExpectContinue || ex.body.done {
		return true
	}
	ex.body.continueSent = true
	return ex.cc.write(continueLine)
}

// holdBody holds a small body whole before an upstream is asked, so a
// malformed one never reaches an upstream. It reports whether the request
// goes on now: the body is not to be held, or it is here whole already.
func (ex *exchange) holdBody() bool {
	if !ex.wantsBuffer(ex.fx.Req, ex.snap.requestBuffer) {
		return true
	}
	return ex.bufferBody()
}

// wantsBuffer reports whether the request's body is held whole before an
// upstream is asked: a Content-Length within limit, or any chunked body (its
// size shows only as it arrives; one that outgrows limit streams after
// all). The chunked pass checks the route's body limit.
func (ex *exchange) wantsBuffer(req *codec.Request, limit int64) bool {
	if limit <= 0 {
		return false
	}
	b := &ex.body
	b.bufferLimit = limit
	switch b.mode {
	case codec.BodyLength:
		return req.ContentLength <= limit
	case codec.BodyChunked:
		maxBody := ex.snap.limits.MaxBodyBytes
		if ex.route.maxBody > 0 {
			maxBody = ex.route.maxBody
		}
		ex.decode.pre.Reset(maxBody)
		return true
	}
	return false
}

// bufferBody reports whether the whole body is in the client's input, ready
// to go. Otherwise the request waits in the buffering phase with its head
// saved, and bufferBody runs again on every read (bodyArrived). The body
// stays in the client's input buffer (bounded by the connection's inbound
// cap) and is walked without copying; a chunked body is validated by a
// separate decoder pass, so pumpBody later reads it again from the start.
// It also reports false when the body was malformed and answered.
func (ex *exchange) bufferBody() bool {
	cc, b := ex.cc, &ex.body
	buf := cc.peek(-1)
	if !ex.head.gone {
		buf = buf[ex.head.headLen:]
	}
	complete := false
	switch b.mode {
	case codec.BodyLength:
		complete = int64(len(buf)) >= b.remaining
	case codec.BodyChunked:
		for b.preOff < len(buf) && !complete && int64(b.preOff) <= b.bufferLimit {
			n, data, done, err := ex.decode.pre.Next(buf[b.preOff:])
			if err != nil {
				ex.discardHead()
				ex.badBody(err)
				return false
			}
			b.preOff += n
			b.payload += int64(len(data))
			complete = done
		}
		// A chunked body held whole goes upstream with a Content-Length, as
		// nginx sends it: an HTTP/1.0 upstream (Python's wsgiref, say)
		// cannot read chunked framing.
		b.dechunk = complete
		if !complete && int64(b.preOff) > b.bufferLimit {
			complete = true // too large to hold: it streams, as a long body does
		}
	}
	if complete {
		// Held whole within request_buffer_bytes: it can be sent again
		// (callUpstream keeps it only when the route may retry the request).
		b.keep = b.mode == codec.BodyLength || b.dechunk
		return true
	}
	if ex.phase != phaseBuffering {
		ex.save()
		ex.setPhase(phaseBuffering)
		cc.setState(stateBufferingBody)
	}
	cc.arm(ex.snap.timeouts.idle)
	return false
}

// bodyArrived runs on each read while buffering: once the body is whole the
// driver carries on.
func (ex *exchange) bodyArrived() {
	if ex.bufferBody() {
		ex.cc.stopTimer()
		ex.run()
	}
}

// callUpstream picks the node, writes the upstream head and starts the
// call's first attempt, once the request passed its breaker and holds its
// permit.
func (ex *exchange) callUpstream() {
	cc, r := ex.cc, ex.route
	req := ex.fx.Req
	node := ex.pickNode()
	if node == nil {
		ex.localReply(errNoHealthyNode)
		return
	}
	ex.retry.retryMethod = r.retry.AllowsMethod(req.Method)
	ex.body.keep = ex.body.keep && ex.retry.retryMethod && r.retry.Attempts > 1
	ex.retry.hostFromNode = len(req.Host) == 0
	head, bad := ex.buildUpstreamHead(req, node.Addr)
	if bad != nil { // a rewrite produced a path that does not normalise
		ex.localReply(bad)
		return
	}
	ex.discardHead()
	ex.saved.SafeRelease() // req's views pointed into it; the head is built
	ex.saved = nil
	if ex.body.mode != codec.BodyNone {
		cc.setState(stateReadingBody)
		cc.arm(ex.snap.timeouts.idle)
	} else {
		cc.setState(stateWaitingUpstream)
	}
	ex.setPhase(phaseAttempting)
	ex.forward(node, head)
}

// forward starts the upstream call's first attempt on node p; see
// retryAfter for the others.
func (ex *exchange) forward(p *upstream.Pool, head *pool.Buffer) {
	a := &ex.retry
	a.n = 1
	ex.end.callStart = ex.loop.now()
	ex.markUpstreamStart()
	a.budget, a.budgetLim = a.upDef.budget, a.upDef.budgetLim
	a.budget.Begin(ex.loop.index)
	ex.startCall(p, head)
}

// startCall starts an attempt of the route's call on p with head, which
// the call owns from now on. Each attempt has the per_try_timeout when the
// route sets one shorter than its response_timeout.
func (ex *exchange) startCall(p *upstream.Pool, head *pool.Buffer) {
	r := ex.route
	timeout := r.responseTimeout
	if r.retry.PerTry > 0 && r.retry.PerTry < timeout {
		timeout = r.retry.PerTry
	}
	tenant, share := ex.poolShare()
	ex.call.Start(p, head, upstream.Options{
		ConnectTimeout:  r.connectTimeout,
		ResponseTimeout: timeout,
		HEAD:            ex.head.isHEAD,
		HasBody:         ex.body.mode != codec.BodyNone,
		Retryable:       ex.body.mode == codec.BodyNone && ex.head.idempotent,
		Upgrade:         ex.upgrade.asked,
		Tenant:          tenant,
		Share:           share,
	})
}
