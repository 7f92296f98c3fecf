// The request phases, in the order the driver runs them: route, request
// filters (which may suspend), build the upstream head, forward.

package engine

import (
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/upstream"
)

// start routes a parsed head and runs its request phases. The head's views
// live in the client's input buffer until it is discarded, so everything
// needed later is copied out first.
func (cc *clientConn) start(req *codec.Request, headLen int) {
	l := cc.loop
	l.srv.requests.Add(1)
	ex := l.getExchange()
	ex.begin(cc, req, headLen)
	cc.ex = ex
	if !req.KeepAlive || l.srv.draining.Load() {
		cc.closeAfter = true
	}
	snap := l.srv.snap.Load()
	idx, ok := snap.table.Match(req.Host, req.Method, req.Path, l.scratch[:0])
	if !ok {
		ex.discardHead()
		if req.HasBody() {
			cc.closeAfter = true // the body is not read, so the framing is lost
		}
		ex.respond(404, 40401, "no route for this path")
		return
	}
	ex.route = &snap.routes[idx]
	if ex.reqMode == codec.BodyChunked && ex.route.maxBody > 0 {
		ex.reqChunked.Reset(ex.route.maxBody)
	}
	if ex.route.chain == nil {
		ex.proceed(req)
		return
	}
	ex.chain = ex.route.chain
	fx := &ex.fx
	fx.Reset(req, ex.id[:ex.idLen], cc.peer, l.index, ex.resumeFn)
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

// afterFilters acts on the request phases' verdict.
func (ex *exchange) afterFilters(v filters.Verdict) {
	for {
		switch v {
		case filters.Continue:
			ex.proceed(ex.fx.Req)
			return
		case filters.Respond:
			ex.discardHead()
			if !ex.reqDone {
				ex.cc.closeAfter = true
			}
			r := &ex.fx.Rejection
			ex.respond(r.Status, r.Code, r.Message)
			return
		}
		// Suspend. The filter may already have resumed, synchronously,
		// from inside its own request phase (a sub-request that failed at
		// once); then carry on here rather than re-entering.
		if !ex.resumed {
			ex.park()
			return
		}
		ex.resumed = false
		if v = ex.resumeVerdict; v == filters.Continue {
			ex.filtering = true
			v = ex.chain.RunRequest(&ex.fx)
			ex.filtering = false
		}
	}
}

// resume is filters.Exchange's continuation after a Suspend; it runs on
// the loop, from the suspended filter's callback.
func (ex *exchange) resume(v filters.Verdict) {
	if ex.filtering || !ex.parked {
		ex.resumed, ex.resumeVerdict = true, v
		return
	}
	ex.parked = false
	if v == filters.Continue {
		ex.filtering = true
		v = ex.chain.RunRequest(&ex.fx)
		ex.filtering = false
	}
	ex.afterFilters(v)
}

// park keeps a suspended request alive: its head moves from the client's
// input buffer (whose views die with the callback) into a pooled copy that
// is parsed again, so filters see the same request when they resume. Body
// bytes stay in the client's buffer until the upstream takes them.
func (ex *exchange) park() {
	ex.parked = true
	if ex.saved != nil {
		return
	}
	cc := ex.cc
	head, _ := cc.gc.Peek(ex.headLen)
	ex.saved = pool.Get(len(head))
	ex.saved.B = append(ex.saved.B, head...)
	ex.req.Reset()
	if _, err := codec.ParseRequest(ex.saved.B, &ex.req, &cc.loop.limits); err != nil {
		panic("engine: a parsed head failed to parse again: " + err.Error())
	}
	ex.fx.Req = &ex.req
	ex.discardHead()
	// Out of Idle/ReadingHead, so serve takes no pipelined request while
	// this one waits; any body waits too, with no read deadline meanwhile.
	cc.setState(stateWaitingUpstream)
	cc.timer.Stop()
}

// discardHead drops the request head from the client's input, once.
func (ex *exchange) discardHead() {
	if !ex.headGone {
		ex.headGone = true
		_, _ = ex.cc.gc.Discard(ex.headLen)
	}
}

// proceed picks the node, writes the upstream head and starts the call.
func (ex *exchange) proceed(req *codec.Request) {
	cc, l, r := ex.cc, ex.loop, ex.route
	group := r.group
	var hashKey []byte
	if ex.chain != nil {
		if g := ex.fx.Upstream.Group; g >= 0 {
			group = g
		}
		hashKey = ex.fx.Upstream.HashKey
	}
	g := l.up.Group(group)
	var node *upstream.Pool
	if hashKey != nil {
		node = g.PickHash(hashKey)
	} else {
		node = g.Pick()
	}
	head := ex.buildUpstreamHead(req, node.Addr)
	ex.discardHead()
	ex.saved.SafeRelease() // req's views pointed into it; the head is built
	ex.saved = nil
	if ex.reqMode != codec.BodyNone {
		cc.setState(stateReadingBody)
		l.wheel.Arm(&cc.timer, time.Duration(l.srv.cfg.Timeouts.Idle))
	} else {
		cc.setState(stateWaitingUpstream)
	}
	ex.forward(r, node, head)
}
