// response: the upstream.Receiver callbacks that carry an upstream's
// response to the client: its head, interim 1xx responses, body, and the
// call's failure.

package engine

import (
	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/upstream"
)

// ResponseHead writes the client's response head.
func (ex *exchange) ResponseHead(c *upstream.Call, r *codec.Response) bool {
	cc := ex.cc
	if cc == nil {
		return false
	}
	if r.Status == 101 { // only a call that asked for it gets here (upstream.Options.Upgrade)
		return ex.switchProtocols(c, r)
	}
	if r.Status >= 200 {
		if ex.route.retry.RetriesStatus(r.Status) && ex.retryAfter(c, failStatus, c.Pool()) {
			return false
		}
		ex.end.upStatus = r.Status
		ex.dropKeptBody()
		if ex.upgrade.asked {
			ex.upgradeRefused(c, r.Status)
		}
	}
	if r.Status < 200 {
		// Interim responses bypass the spool; an upstream sending them
		// without end would queue bytes without bound.
		if ex.resp.interims++; ex.resp.interims > maxInterim {
			c.Abort()
			if !ex.body.done {
				cc.closeAfter = true
			}
			ex.respond(502, 50202, "upstream sent too many interim responses")
			return false
		}
		return ex.interim(r)
	}
	switch r.BodyMode(ex.head.isHEAD) {
	case codec.BodyChunked:
		if ex.head.minor == 0 {
			ex.resp.framing = frameDecode
			cc.closeAfter = true
		} else {
			ex.resp.framing = frameRechunk
		}
	case codec.BodyUntilClose:
		if ex.head.minor == 0 {
			cc.closeAfter = true
		} else {
			ex.resp.framing = frameEncode
		}
	}
	ex.setPhase(phaseStreaming)
	ex.markUpstreamHead()
	if ex.loop.srv.draining.Load() {
		// Shutdown began; its drain task may not have reached this loop
		// yet. The response says so, rather than leaving the client to
		// find the connection closed.
		cc.closeAfter = true
	}
	ex.end.status = r.Status
	if !ex.body.done {
		cc.closeAfter = true // answered before the body ended: the framing is lost
	}
	if cc.state == stateWaitingUpstream || cc.state == stateReadingBody {
		cc.setState(stateWritingResponse)
	}
	// The head waits in l.out for the first body bytes of the same read, so
	// a small response leaves in one write; OnTraffic flushes it otherwise.
	// Until it leaves, a failed body can still become a clean 502 (see
	// CallFailed).
	var edits *filters.HeaderEdits
	if ex.chain != nil {
		// The first byte's reading (upstream.Call took it with Fresh, in
		// this callback, after the request phases, which ended before the
		// call began) starts the response phases.
		ex.runResponseFiltersFrom(r.Status, ex.loop.fresh())
		edits = &ex.fx.RespEdits
		if ex.chain.Body() != nil && ex.holdResponse(r) {
			return true // the head waits for the body (respbody.go)
		}
	}
	l := ex.loop
	l.out = appendClientHead(l.takeOut(), r, ex.resp.framing, ex.head.minor, cc.closeAfter, edits, cc.hsts)
	cc.headPending = true
	l.pendingHead = cc
	return true
}

// runResponseFilters runs the chain's response phases once per exchange.
// The request view is gone by now (its bytes were discarded or reused), so
// Req is cleared rather than left pointing at someone else's request.
func (ex *exchange) runResponseFilters(status int) { ex.runResponseFiltersFrom(status, 0) }

// runResponseFiltersFrom is runResponseFilters with the clock read at now,
// after the request phases ended (see filters.Chain.RunResponseFrom); 0
// reads it anew.
func (ex *exchange) runResponseFiltersFrom(status int, now int64) {
	if ex.resp.filtered {
		return
	}
	ex.resp.filtered = true
	ex.fx.Req = nil
	ex.fx.Status = status
	if now == 0 {
		ex.chain.RunResponse(&ex.fx)
		return
	}
	ex.chain.RunResponseFrom(&ex.fx, now)
}

// interim forwards a 1xx response (RFC 9110 15.2: a proxy forwards the
// interim responses it did not ask for, 103 Early Hints among them) to an
// HTTP/1.1 client; HTTP/1.0 clients cannot take them. A 100 is dropped
// when the gateway already answered the client's Expect itself.
func (ex *exchange) interim(r *codec.Response) bool {
	if ex.head.minor == 0 || r.Status == 100 && ex.body.continueSent {
		return true
	}
	l := ex.loop
	dst := l.takeOut()
	dst = appendStatusLine(dst, r)
	dst = appendEndToEnd(dst, r.Headers, r.ConnectionNames, false, nil, nil)
	l.out = append(dst, "\r\n"...)
	return ex.cc.write(l.out)
}

// maxInterim bounds the 1xx responses forwarded for one request. Past it
// the exchange fails like any malformed response (502/50202).
const maxInterim = 16

// maxCoalesce bounds the body bytes copied behind a pending head; larger
// pieces cost more to copy than the write they save.
const maxCoalesce = 16 << 10

var continueLine = []byte("HTTP/1.1 100 Continue\r\n\r\n")

// ResponseBody streams body bytes to the client in the chosen framing.
func (ex *exchange) ResponseBody(c *upstream.Call, raw, data []byte, done bool) bool {
	cc := ex.cc
	if cc == nil {
		return false
	}
	ok := true
	switch ex.resp.framing {
	case frameHold:
		return ex.holdPiece(c, raw, data, done)
	case frameAsIs:
		if cc.headPending && len(raw) <= maxCoalesce {
			ex.loop.out = append(ex.loop.out, raw...)
			ok = cc.flushHead()
		} else if ok = cc.flushHead(); ok && len(raw) > 0 {
			ok = cc.writeBody(raw)
		}
	case frameDecode:
		if ok = cc.flushHead(); ok && len(data) > 0 {
			ok = cc.writeBody(data)
		}
	case frameEncode:
		if len(data) > 0 {
			ok = ex.writeChunk(data)
		}
		if ok && done {
			ok = ex.writeLastChunk()
		}
	case frameRechunk:
		switch {
		case len(data) > 0:
			ok = ex.writeChunk(data)
		case c.Trailer() && ex.head.teTrailers:
			ex.keepTrailers(raw)
		}
		if ok && done {
			ok = ex.writeLastChunk()
		}
	}
	if !ok {
		return false
	}
	if done {
		if cc.spool.Pending() {
			ex.setPhase(phaseSpooled) // pumpSpools finishes it
			return true
		}
		cc.finish()
	}
	return true
}

var (
	crlf      = []byte("\r\n")
	lastChunk = []byte(codec.LastChunk)
)

// CallFailed answers with the call's error. Once part of the response is
// out, closing the connection is the only honest signal: a truncated body
// must not look complete. A head still held back (headPending) has not
// left, so it is dropped and the client gets a clean 502 instead; so
// does a response held for a body filter (frameHold).
func (ex *exchange) CallFailed(c *upstream.Call, err *upstream.Error) {
	cc := ex.cc
	if cc == nil {
		return
	}
	if ex.retryAfter(c, classifyFailure(c, err, ex.route.retry.PerTry > 0), c.Pool()) {
		return
	}
	ex.end.upErr = err
	ex.dropKeptBody()
	if ex.responding() {
		switch {
		case ex.resp.framing == frameHold:
			ex.endHold() // nothing of the response left: a clean 502 as below
		case !cc.headPending:
			// Too late for an error response: the client sees the
			// connection close mid-response, and the logs say why.
			why := filters.EndUpstreamFailed
			if err.Status == 504 {
				why = filters.EndTimeout
			}
			ex.cut(why, err.Code, err.Message)
			return
		default:
			cc.headPending = false
			ex.loop.pendingHead = nil
		}
		ex.resp.framing = frameAsIs
	}
	if !ex.body.done {
		cc.closeAfter = true
	}
	ex.respond(err.Status, err.Code, err.Message)
}
