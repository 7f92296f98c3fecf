// Request buffering: a small body is read and validated whole before an
// upstream connection is taken, so a malformed one never reaches an upstream.

package engine

import (
	"github.com/loopgate/loopgate/codec"
)

// wantsBuffer reports whether the request's body is held whole before an
// upstream is asked: a Content-Length within limit, or any chunked body (its
// size shows only as it arrives; one that outgrows limit streams after
// all). The chunked pass checks the route's body limit.
func (ex *exchange) wantsBuffer(req *codec.Request, limit int64) bool {
	if limit <= 0 {
		return false
	}
	ex.bufferLimit = limit
	switch ex.reqMode {
	case codec.BodyLength:
		return req.ContentLength <= limit
	case codec.BodyChunked:
		maxBody := ex.snap.limits.MaxBodyBytes
		if ex.route.maxBody > 0 {
			maxBody = ex.route.maxBody
		}
		ex.preChunked.Reset(maxBody)
		ex.preOff, ex.payload = 0, 0
		return true
	}
	return false
}

// bufferBody reports whether the whole body is in the client's input, ready
// to go. Otherwise the request waits in the buffering-body state with its
// head saved, and bufferBody runs again on every read; once the body is
// complete it carries on with proceed. The body stays in the client's input
// buffer (bounded by the connection's inbound cap) and is walked without
// copying; a chunked body is validated by a separate decoder pass, so
// pumpBody later reads it again from the start. It also reports false when
// the body was malformed and answered.
func (ex *exchange) bufferBody() bool {
	cc, l := ex.cc, ex.loop
	buf, _ := cc.gc.Peek(-1)
	if !ex.headGone {
		buf = buf[ex.headLen:]
	}
	complete := false
	switch ex.reqMode {
	case codec.BodyLength:
		complete = int64(len(buf)) >= ex.reqRemaining
	case codec.BodyChunked:
		for ex.preOff < len(buf) && !complete && int64(ex.preOff) <= ex.bufferLimit {
			n, data, done, err := ex.preChunked.Next(buf[ex.preOff:])
			if err != nil {
				ex.discardHead()
				ex.badBody(err)
				return false
			}
			ex.preOff += n
			ex.payload += int64(len(data))
			complete = done
		}
		// A chunked body held whole goes upstream with a Content-Length, as
		// nginx sends it: an HTTP/1.0 upstream (Python's wsgiref, say)
		// cannot read chunked framing.
		ex.dechunk = complete
		if !complete && int64(ex.preOff) > ex.bufferLimit {
			complete = true // too large to hold: it streams, as a long body does
		}
	}
	if complete {
		// Held whole within request_buffer_bytes: it can be sent again
		// (proceed keeps it only when the route may retry the request).
		ex.keepBody = ex.reqMode == codec.BodyLength || ex.dechunk
		return true
	}
	if cc.state != stateBufferingBody {
		ex.save()
		cc.setState(stateBufferingBody)
	}
	l.wheel.Arm(&cc.timer, ex.snap.timeouts.idle)
	return false
}

// bodyArrived runs on each read while buffering: once the body is whole the
// saved request carries on.
func (ex *exchange) bodyArrived() {
	if ex.bufferBody() {
		ex.cc.timer.Stop()
		ex.proceed(&ex.req)
	}
}
