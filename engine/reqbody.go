// The request body on its way to the upstream: streamed from the client's
// input as the call takes it (pumpBody), its failures, and the copy kept
// for a replay on another node.

package engine

import (
	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/wheel"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/upstream"
)

// CallReady streams the body once the upstream connection is attached.
func (ex *exchange) CallReady(*upstream.Call) bool {
	ex.retry.attached = true
	if !ex.body.done {
		ex.pumpBody()
	}
	return ex.cc != nil
}

// pumpBody moves request body bytes from the client's input to the upstream.
// Bytes stay in the client's gnet buffer until the call can take them.
func (ex *exchange) pumpBody() {
	cc, b := ex.cc, &ex.body
	high := ex.snap.maxConnBuffer
	for cc != nil && !b.done && ex.retry.attached {
		if ex.call.Backlog() > high {
			// gnet cannot pause the client, so the body waits in its input
			// buffer (bounded by max_body_bytes) until the upstream catches
			// up, for at most the response timeout.
			now := ex.loop.wheel.Now()
			if !b.stalled {
				b.stalledSince = now
			} else if now.Sub(b.stalledSince) > ex.route.responseTimeout {
				ex.stalledTooLong()
				return
			}
			b.stalled = true
			cc.arm(wheel.DefaultTick)
			return
		}
		b.stalled = false
		buf := cc.peek(-1)
		buf = buf[b.kept:] // a body kept for a replay stays in the input
		if len(buf) == 0 {
			return
		}
		var take int
		var chunk []byte
		last := false // this piece ends the body
		switch b.mode {
		case codec.BodyLength:
			take = len(buf)
			if int64(take) > b.remaining {
				take = int(b.remaining)
			}
			b.remaining -= int64(take)
			last = b.remaining == 0
		case codec.BodyChunked:
			n, data, done, err := ex.decode.body.Next(buf)
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
		// inside it) while done is still false, so the connection closes
		// and no body byte is ever parsed as a request; done is set only
		// once the last piece went out.
		// A chunked body is re-encoded: the upstream sees canonical size
		// lines, no extensions and no trailers, never the client's framing.
		sent, attempt := true, ex.retry.n
		switch {
		case b.mode != codec.BodyChunked:
			sent = ex.call.Send(buf[:take])
		case b.dechunk:
			if len(chunk) > 0 {
				sent = ex.call.Send(chunk)
			}
		case len(chunk) > 0:
			sent = ex.call.SendChunk(chunk)
		case last:
			sent = ex.call.Send(lastChunk)
		}
		chunk = nil
		if ex.retry.n != attempt {
			return // the send failed and a retry rewound the kept body: the next attempt sends it
		}
		if b.keep {
			b.kept += take
		} else {
			cc.discard(take)
		}
		ex.end.bytesIn += int64(take)
		if !sent {
			return
		}
		if b.done = last; last {
			ex.call.SendDone()
			if cc.state == stateReadingBody {
				cc.setState(stateWaitingUpstream)
				cc.stopTimer()
			}
		}
	}
}

// stalledTooLong: the upstream stopped taking the request body.
func (ex *exchange) stalledTooLong() {
	const msg = "upstream stopped reading the request body"
	ex.body.stalled = false
	ex.call.Abort()
	if ex.responding() {
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
	if ex.responding() {
		ex.cut(filters.EndBadRequestBody, e.Code, e.Message)
		return
	}
	ex.call.Abort()
	cc.closeAfter = true
	ex.respond(e.Status, e.Code, e.Message)
}

// rewindBody makes a kept body go out again from its start with the next
// attempt. A body that never left (a connect failure) is where it was.
func (ex *exchange) rewindBody() {
	b := &ex.body
	if b.mode == codec.BodyNone || !b.keep {
		return
	}
	ex.end.bytesIn -= int64(b.kept)
	b.kept = 0
	b.done = false
	switch b.mode {
	case codec.BodyLength:
		b.remaining = b.contentLength
	case codec.BodyChunked:
		ex.decode.body.Reset(b.chunkLimit)
	}
}

// dropKeptBody lets the client's input go of a body kept for a replay,
// once the attempt is final: its response has begun, or it failed for good.
// Small enough to inline: most requests keep nothing.
func (ex *exchange) dropKeptBody() {
	if ex.body.keep {
		ex.discardKept()
	}
}

func (ex *exchange) discardKept() {
	b := &ex.body
	b.keep = false
	ex.cc.discard(b.kept)
	b.kept = 0
}
