// The request phases, in the order the driver runs them: route, request
// filters (which may park the request), build the upstream head, forward.

package engine

import (
	"unsafe"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
	"github.com/loopgate/loopgate/pool"
)

// start takes a parsed head: it checks the process-wide buffer budget, then
// routes the request and runs its request phases. The head's views live in the
// client's input buffer until it is discarded, so everything needed later
// is copied out first.
func (cc *clientConn) start(req *codec.Request, headLen int) {
	l := cc.loop
	l.stats.requests.Add(1)
	ex := l.getExchange()
	ex.begin(cc, req, headLen)
	cc.ex = ex
	if !req.KeepAlive || l.srv.draining.Load() {
		cc.closeAfter = true
	}
	if ex.reqMode != codec.BodyNone {
		if l.srv.buffered.Load() >= ex.snap.maxBuffered {
			ex.discardHead()
			cc.closeAfter = true // the body is not read, so the framing is lost
			ex.fx.Rejection.AddHeader("Retry-After", retryAfterOne)
			ex.respond(503, 50303, "gateway buffer budget exhausted; retry later")
			return
		}
	}
	ex.dispatch(req)
}

// dispatch normalises the request's Host and path, matches a route, and runs
// its request phases. What the router and the filters judge is what goes
// upstream: the normalised path (not the raw target) is forwarded.
func (ex *exchange) dispatch(req *codec.Request) {
	cc, l := ex.cc, ex.loop
	snap := ex.snap // the one config version the request runs on (see begin)
	host, port, err := codec.NormalizeHost(l.host[:0], req.Host)
	if err != nil {
		ex.localReply(err)
		return
	}
	path, flags, err := codec.NormalizePath(l.path[:0], req.Path)
	if err != nil {
		ex.localReply(err)
		return
	}
	req.Host, req.Path, ex.hostPort = host, path, port
	res := snap.table.Match(host, req.Method, path, l.scratch[:0])
	if !res.Found {
		if res.Allow != "" {
			ex.fx.Rejection.AddHeader("Allow", readOnlyBytes(res.Allow))
			ex.localReply(errMethodNotAllowed)
			return
		}
		ex.localReply(errNoRoute)
		return
	}
	ex.route = &snap.routes[res.Index]
	ex.route.metrics.begin(l.index) // until record
	if flags != 0 && !ex.route.keepEscapes {
		ex.localReply(errEscapedSlash)
		return
	}
	if ex.reqMode == codec.BodyChunked && ex.route.maxBody > 0 {
		ex.reqChunked.Reset(ex.route.maxBody)
		ex.chunkLimit = ex.route.maxBody
	}
	if ex.route.chain == nil {
		if len(snap.trusted) > 0 && l.log.access != nil {
			// The access log names the client trusted_proxies yield, as
			// on a route with filters (fx.ClientIP below).
			ex.logClient = access.ClientIP(cc.peer, req.Headers, snap.trusted)
		}
		ex.proceed(req)
		return
	}
	ex.chain = ex.route.chain
	fx := &ex.fx
	fx.Reset(req, ex.id[:ex.idLen], cc.peer, l.index, ex)
	fx.Start = ex.started
	fx.RouteID = ex.route.id
	fx.Sub = ex
	if len(snap.trusted) > 0 {
		fx.ClientIP = access.ClientIP(cc.peer, req.Headers, snap.trusted)
	}
	ex.filtering = true
	v := ex.chain.RunRequest(fx)
	ex.filtering = false
	ex.afterFilters(v)
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

// localReply answers the request with err (a *codec.Error) without an
// upstream. An unread body closes the connection, since its framing is lost.
func (ex *exchange) localReply(err error) {
	e, ok := err.(*codec.Error)
	if !ok {
		e = codec.ErrMalformed
	}
	ex.discardHead()
	if !ex.reqDone {
		ex.cc.closeAfter = true
	}
	ex.respond(e.Status, e.Code, e.Message)
}

// afterFilters acts on the request phases' verdict, from dispatch or from a
// resume (see inbox.go).
//
// A ticket resumed before its filter even returned Suspend (a sub-request
// that failed at once, a filter that resumes its own ticket) needs nothing
// special: the resume is queued, and the loop delivers it after this
// callback, to the park made here.
func (ex *exchange) afterFilters(v filters.Verdict) {
	if v == filters.Suspend && ex.ticketOut {
		ex.park()
		return
	}
	ex.endPark() // a filter that parked and then decided at once voided its ticket
	switch v {
	case filters.Continue:
		ex.proceed(ex.fx.Req)
		return
	case filters.Respond:
	case filters.Suspend:
		// Nothing could ever resume it: answer now rather than at the
		// suspend deadline.
		ex.fx.Reject(500, 50001, "a filter suspended the request without parking it")
	default:
		ex.fx.Reject(500, 50001, "a filter returned an unknown verdict")
	}
	ex.discardHead()
	if !ex.reqDone {
		ex.cc.closeAfter = true
	}
	r := &ex.fx.Rejection
	ex.respond(r.Status, r.Code, r.Message)
}

// park keeps a parked request alive (see save) until its ticket is resumed;
// it may wait at most timeouts.suspend.
func (ex *exchange) park() {
	ex.parked = true
	l := ex.loop
	l.wheel.Arm(&ex.suspendTimer, ex.snap.timeouts.suspend)
	ex.save()
	// Out of Idle/ReadingHead, so serve takes no pipelined request while
	// this one waits; any body waits too, with no read deadline meanwhile.
	ex.cc.setState(stateWaitingUpstream)
	ex.cc.timer.Stop()
}

// save moves the request head out of the client's input buffer (whose views
// die with the callback) into a pooled copy that is parsed again, so the
// request reads the same when it carries on later: after a filter resumes
// it, or once its body has arrived. The normalised path and Host (in loop
// scratch until now) move with it. Body bytes stay in the client's buffer
// until the upstream takes them. Saving twice keeps the first copy.
func (ex *exchange) save() {
	if ex.saved != nil {
		return
	}
	cc := ex.cc
	head, _ := cc.gc.Peek(ex.headLen)
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
	if !ex.parked || ex.cc == nil {
		return
	}
	ex.endPark()
	ex.sub.abort()
	if !ex.reqDone {
		ex.cc.closeAfter = true
	}
	ex.respond(504, 50401, "timed out waiting for a filter")
}

// discardHead drops the request head from the client's input, once.
func (ex *exchange) discardHead() {
	if !ex.headGone {
		ex.headGone = true
		_, _ = ex.cc.gc.Discard(ex.headLen)
	}
}

// proceed takes a request that passed its filters to its upstream call:
// the 100 Continue, the body held whole when small, the route's breaker
// and isolation permit, then callUpstream.
func (ex *exchange) proceed(req *codec.Request) {
	cc, r := ex.cc, ex.route
	if ex.expectContinue && !ex.reqDone {
		// The request passed routing and its filters, so the client may
		// send its body. As nginx and Envoy do, the gateway answers the
		// Expect itself and the upstream never sees it: an upstream that
		// ignores Expect (Python's wsgiref) would otherwise stall the
		// client for its own timeout.
		ex.expectContinue = false
		ex.continueSent = true
		if !cc.write(continueLine) {
			return
		}
	}
	if ex.reqMode != codec.BodyNone && !ex.bodyChecked {
		ex.bodyChecked = true
		if ex.wantsBuffer(req, ex.snap.requestBuffer) && !ex.bufferBody() {
			return // waiting for the rest of the body, or answered
		}
	}
	if r.breaker != nil && !ex.admitBreaker() {
		return
	}
	// A call refused or never started from here on gives its breaker
	// permit back when the exchange ends (recordBreaker: no outcome).
	if r.isolation != nil && !ex.acquireIsolation() {
		return // refused, or waiting for a permit (grantPermits carries on)
	}
	ex.callUpstream(req)
}

// callUpstream picks the node, writes the upstream head and starts the
// call, once the request passed its breaker and holds its permit.
func (ex *exchange) callUpstream(req *codec.Request) {
	cc, l, r := ex.cc, ex.loop, ex.route
	node := ex.pickNode()
	if node == nil {
		ex.localReply(errNoHealthyNode)
		return
	}
	ex.retryMethod = r.retry.allowsMethod(req.Method)
	ex.keepBody = ex.keepBody && ex.retryMethod && r.retry.attempts > 1
	ex.hostFromNode = len(req.Host) == 0
	head, bad := ex.buildUpstreamHead(req, node.Addr)
	if bad != nil { // a rewrite produced a path that does not normalise
		ex.localReply(bad)
		return
	}
	ex.discardHead()
	ex.saved.SafeRelease() // req's views pointed into it; the head is built
	ex.saved = nil
	if ex.reqMode != codec.BodyNone {
		cc.setState(stateReadingBody)
		l.wheel.Arm(&cc.timer, ex.snap.timeouts.idle)
	} else {
		cc.setState(stateWaitingUpstream)
	}
	ex.forward(node, head)
}
