// Request buffering: a small body is read and validated whole before the
// request is routed, so a malformed one never reaches an upstream.

package engine

import (
	"time"

	"github.com/loopgate/loopgate/codec"
)

// wantsBuffer reports whether the request's body is buffered before
// routing: a Content-Length within limit, or any chunked body (its size
// shows only as it arrives; one that outgrows limit streams after all).
func (ex *exchange) wantsBuffer(req *codec.Request, limit int64) bool {
	if limit <= 0 {
		return false
	}
	ex.bufferLimit = limit
	switch ex.reqMode {
	case codec.BodyLength:
		return req.ContentLength <= limit
	case codec.BodyChunked:
		ex.preChunked.Reset(int64(ex.loop.limits.MaxBodyBytes))
		ex.preOff, ex.payload = 0, 0
		return true
	}
	return false
}

// bufferBody checks whether the whole body has arrived behind the head; it
// runs at start and on every read while the connection is buffering. The
// body stays in the client's input buffer (bounded by the connection's
// inbound cap) and is walked without copying; a chunked body is validated
// by a separate decoder pass, so pumpBody later re-reads it from the start.
func (ex *exchange) bufferBody() {
	cc, l := ex.cc, ex.loop
	buf, _ := cc.gc.Peek(-1)
	body := buf[ex.headLen:]
	complete := false
	switch ex.reqMode {
	case codec.BodyLength:
		complete = int64(len(body)) >= ex.reqRemaining
	case codec.BodyChunked:
		for ex.preOff < len(body) && !complete && int64(ex.preOff) <= ex.bufferLimit {
			n, data, done, err := ex.preChunked.Next(body[ex.preOff:])
			if err != nil {
				ex.discardHead()
				ex.badBody(err)
				return
			}
			ex.preOff += n
			ex.payload += int64(len(data))
			complete = done
		}
		// A chunked body held whole goes upstream with a Content-Length, as
		// nginx sends it: an HTTP/1.0 upstream (Python's wsgiref, say)
		// cannot read chunked framing.
		ex.dechunk = complete && int64(ex.preOff) <= ex.bufferLimit
		if !complete && int64(ex.preOff) > ex.bufferLimit {
			complete = true // too large to hold: it streams, as a long body does
		}
	}
	if !complete {
		if cc.state != stateBufferingBody {
			cc.setState(stateBufferingBody)
			if ex.expectContinue {
				// The client waits for a 100 before sending the body, and
				// no upstream is asked yet: answer it here, as nginx does.
				ex.expectContinue = false
				ex.continueSent = true
				if !cc.write(continueLine) {
					return
				}
			}
		}
		l.wheel.Arm(&cc.timer, time.Duration(l.srv.cfg.Timeouts.Idle))
		return
	}
	req := &l.req
	if cc.state == stateBufferingBody {
		// The head's views died with the callback that parsed it: parse
		// it again from the same, still unread, bytes.
		cc.timer.Stop()
		req.Reset()
		if _, err := codec.ParseRequest(buf[:ex.headLen], req, &l.limits); err != nil {
			panic("engine: a parsed head failed to parse again: " + err.Error())
		}
	}
	ex.dispatch(req)
}
