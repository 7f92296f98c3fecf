// respbody: the engine's side of a filter that rewrites whole response
// bodies (filters.BodyFilter): holding the body, sending the rewritten one
// with a Content-Length, and streaming what outgrows the hold after all.
//
// Only a route whose chain has a BodyFilter comes here, and only for a
// response that has a body: ResponseHead asks the filter from the head
// alone, and a response it does not hold streams as on any other route.
// A held response is in framing frameHold: ResponseBody collects its
// payload instead of writing it, so no byte reaches the client before the
// body is whole (or has outgrown the hold).

package engine

import (
	"bytes"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/upstream"
)

// respHold is a response held for the route's BodyFilter. The zero value
// holds nothing; endHold gives back what it took and zeroes it, on every
// path (sent, streamed after all, failed, client gone: putExchange).
type respHold struct {
	on       bool         // a response is held
	head     *pool.Buffer // the client head up to its framing fields
	body     *pool.Buffer // the payload held so far; nil until the first byte
	limit    int          // bytes the plan holds at most
	replace  []byte       // sent instead of the body; the upstream's is dropped
	fallback respFraming  // how the body streams if it outgrows the hold
	length   int64        // the upstream's Content-Length; -1 when none
	counted  int64        // bytes this hold added to Server.buffered
}

// holdResponse asks the route's BodyFilter about the response whose head r
// is, after the response phases, and reports whether the body is held
// (framing frameHold from now on). The client head is built now, without
// its framing fields, since r's views die with the callback.
func (ex *exchange) holdResponse(r *codec.Response) bool {
	empty := r.BodyMode(ex.head.isHEAD) == codec.BodyNone
	if empty && (ex.head.isHEAD || r.Status < 200 || r.Status == 204 || r.Status == 304) {
		return false // no body may follow this head: nothing to rewrite or replace
	}
	plan := ex.chain.HoldBody(&ex.fx, r)
	if plan.Replace == nil {
		if empty || plan.Hold <= 0 || r.ContentLength > int64(plan.Hold) {
			return false
		}
		if ex.overBudget(0) {
			ex.chain.BodyStreamed(&ex.fx, filters.StreamBudget)
			return false
		}
	}
	h := &ex.hold
	h.on, h.limit, h.replace, h.fallback, h.length = true, plan.Hold, plan.Replace, ex.resp.framing, r.ContentLength
	h.head = pool.Get(r.HeadLen + 128)
	dst := appendStatusLine(h.head.B, r)
	dst = appendEndToEnd(dst, r.Headers, r.ConnectionNames, false, &ex.fx.RespEdits, nil)
	h.head.B = append(dst, ex.cc.hsts...)
	ex.resp.framing = frameHold
	return true
}

// overBudget reports whether holding n more bytes would pass the process's
// max_buffered_bytes, which response bodies held share with the request
// bodies and slow clients' buffers it already bounds.
func (ex *exchange) overBudget(n int) bool {
	return ex.loop.srv.buffered.Load()+int64(n) > ex.snap.maxBuffered
}

// holdPiece takes one ResponseBody call of a held response: it keeps the
// payload (a replaced body's is dropped), and at the end sends the
// response whole. A body that outgrows the hold or the budget streams
// untouched from here on, the bytes held first.
func (ex *exchange) holdPiece(c *upstream.Call, raw, data []byte, done bool) bool {
	h := &ex.hold
	if h.replace == nil && len(data) > 0 {
		held := 0
		if h.body != nil {
			held = len(h.body.B)
		}
		switch {
		case held+len(data) > h.limit:
			return ex.streamHeld(c, raw, data, done, filters.StreamOverLimit)
		case ex.overBudget(len(data)):
			return ex.streamHeld(c, raw, data, done, filters.StreamBudget)
		}
		if h.body == nil {
			size := len(data)
			if h.length > 0 {
				size = int(h.length) // the declared body, reserved at once
			}
			if ex.overBudget(size) {
				return ex.streamHeld(c, raw, data, done, filters.StreamBudget)
			}
			h.body = pool.Get(size)
		}
		h.body.Grow(len(data))
		h.body.B = append(h.body.B, data...)
		// The budget is charged what the hold has reserved, not what it
		// has appended: a slow upstream declaring a large Content-Length
		// would otherwise hold max_bytes while counting a few bytes.
		if c := int64(cap(h.body.B)); c > h.counted {
			ex.loop.srv.buffered.Add(c - h.counted)
			h.counted = c
		}
	}
	if !done {
		return true
	}
	return ex.sendHeld()
}

// sendHeld sends a held response whole: the rewritten body (or the
// replacement, or the body as it came when the filter leaves it) with a
// Content-Length, whatever the upstream's framing was. A body sent as it
// came keeps every header the upstream sent, its ETag included.
func (ex *exchange) sendHeld() bool {
	cc, l, h := ex.cc, ex.loop, &ex.hold
	var body []byte
	if h.body != nil {
		body = h.body.B
	}
	var rewritten *pool.Buffer
	out, changed := body, false
	if h.replace != nil {
		out = h.replace
	} else {
		rewritten = pool.Get(len(body) + len(body)/4 + 256)
		if b, ok := ex.chain.RewriteBody(&ex.fx, body, rewritten.B[:0]); ok {
			rewritten.B, out, changed = b, b, true
		}
	}
	head := h.head.B
	if changed {
		head = dropField(head, etagField) // it names the upstream's bytes, not these
	}
	dst := append(l.takeOut(), head...)
	dst = appendContentLength(dst, int64(len(out)))
	dst = appendConnection(dst, cc.closeAfter, ex.head.minor)
	var ok bool
	if len(out) <= maxCoalesce {
		l.out = append(dst, out...)
		ok = cc.write(l.out)
	} else {
		l.out = dst
		ok = cc.write(l.out) && cc.writeBody(out)
	}
	rewritten.SafeRelease()
	ex.endHold()
	ex.resp.framing = frameAsIs
	if !ok {
		return false
	}
	if cc.spool.Pending() {
		ex.setPhase(phaseSpooled) // pumpSpools finishes it
		return true
	}
	cc.finish()
	return true
}

// streamHeld gives up holding: the head goes out in the framing the body
// would have streamed in from the start, then the bytes held, then this
// piece, in order, and ResponseBody streams the rest as on any route.
func (ex *exchange) streamHeld(c *upstream.Call, raw, data []byte, done bool, why filters.StreamReason) bool {
	cc, l, h := ex.cc, ex.loop, &ex.hold
	ex.chain.BodyStreamed(&ex.fx, why)
	ex.resp.framing = h.fallback
	dst := append(l.takeOut(), h.head.B...)
	switch h.fallback {
	case frameRechunk, frameEncode:
		dst = append(dst, "Transfer-Encoding: chunked\r\n"...)
	case frameAsIs:
		if h.length >= 0 {
			dst = appendContentLength(dst, h.length)
		}
	}
	l.out = appendConnection(dst, cc.closeAfter, ex.head.minor)
	cc.headPending = true // the first body bytes leave with it
	l.pendingHead = cc
	ok := true
	if h.body != nil && len(h.body.B) > 0 {
		// Payload held so far: the upstream's wire bytes for a body that
		// is not chunked, so raw and data are the same.
		ok = ex.ResponseBody(c, h.body.B, h.body.B, false)
	}
	ex.endHold()
	return ok && ex.ResponseBody(c, raw, data, done)
}

var etagField = []byte("ETag")

// dropField removes every field name from head, a status line and field
// lines each ending in CRLF, in place. Only a rewritten body's head pays
// for the walk.
func dropField(head, name []byte) []byte {
	w := 0
	for r := 0; r < len(head); {
		end := len(head)
		if i := bytes.IndexByte(head[r:], '\n'); i >= 0 {
			end = r + i + 1
		}
		line := head[r:end]
		if r == 0 || len(line) <= len(name) || line[len(name)] != ':' || !codec.EqualFold(line[:len(name)], name) {
			w += copy(head[w:], line)
		}
		r = end
	}
	return head[:w]
}

// appendConnection ends a client head as appendClientHead does.
func appendConnection(dst []byte, closing bool, clientMinor int) []byte {
	switch {
	case closing:
		dst = append(dst, "Connection: close\r\n"...)
	case clientMinor == 0:
		dst = append(dst, "Connection: keep-alive\r\n"...)
	}
	return append(dst, "\r\n"...)
}

// endHold gives back what the hold took: its buffers and its share of the
// buffer budget. Safe to call when nothing is held.
func (ex *exchange) endHold() {
	h := &ex.hold
	if !h.on {
		return
	}
	if h.counted != 0 {
		ex.loop.srv.buffered.Add(-h.counted)
	}
	h.head.SafeRelease()
	h.body.SafeRelease()
	*h = respHold{}
}
