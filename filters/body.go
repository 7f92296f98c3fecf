// BodyFilter: the optional interface of a filter that rewrites response
// bodies, and the plan it gives the engine for one response.

package filters

import "github.com/loopgate/loopgate/codec"

// BodyFilter is implemented by a filter that rewrites whole response
// bodies (response_body). A chain runs at most one (the first in order);
// the engine asks it about each upstream response that has a body or an
// empty one (Content-Length: 0, for a Replace), after the response phases,
// from the head alone, before any body byte is read. A response it does
// not hold streams as on any route; one it holds and leaves unchanged goes
// out with every header as the upstream sent it (the framing aside).
type BodyFilter interface {
	Filter
	// HoldBody decides from the upstream's head what the engine does with
	// the body. It may queue response header edits (x.RespEdits): the
	// client head is built after it. h is valid only during the call.
	HoldBody(x *Exchange, h *codec.Response) BodyPlan
	// RewriteBody runs once the whole body is held (at most the plan's
	// Hold bytes): it appends the body to send to dst and returns it,
	// with ok true; ok false sends body as it came. body is valid only
	// during the call. A rewritten body goes out without the upstream's
	// ETag, which names other bytes; a Replace plan removes it itself
	// (x.RespEdits).
	RewriteBody(x *Exchange, body, dst []byte) (out []byte, ok bool)
	// BodyStreamed says that a held body streamed untouched after all:
	// it outgrew the plan's Hold, or the process's buffer budget.
	BodyStreamed(x *Exchange, why StreamReason)
}

// BodyPlan is what a BodyFilter wants done with one response body.
type BodyPlan struct {
	// Hold, when above 0, holds the body up to this many bytes for
	// RewriteBody. 0 streams it untouched.
	Hold int
	// Replace, when not nil, is sent instead of the body, which is read
	// and dropped. It must stay valid until the exchange ends (config
	// bytes). Hold is then ignored.
	Replace []byte
}

// StreamReason is why a held body streamed untouched after all.
type StreamReason uint8

const (
	StreamOverLimit StreamReason = iota // the body outgrew BodyPlan.Hold
	StreamBudget                        // the process's max_buffered_bytes was reached
)

// Body returns the chain's BodyFilter, or nil.
func (c *Chain) Body() BodyFilter { return c.body }

// HoldBody asks the chain's BodyFilter for its plan (see BodyFilter). A
// panic in it is logged and the body streams untouched, as when the filter
// holds nothing.
func (c *Chain) HoldBody(x *Exchange, h *codec.Response) (plan BodyPlan) {
	defer func() {
		if p := recover(); p != nil {
			logPanic(c.body.Name(), "hold_body", p)
			plan = BodyPlan{}
		}
	}()
	return c.body.HoldBody(x, h)
}

// RewriteBody runs the chain's BodyFilter on a held body. A panic in it is
// logged and the body goes out as it came.
func (c *Chain) RewriteBody(x *Exchange, body, dst []byte) (out []byte, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			logPanic(c.body.Name(), "rewrite_body", p)
			out, ok = nil, false
		}
	}()
	return c.body.RewriteBody(x, body, dst)
}

// BodyStreamed tells the chain's BodyFilter that a held body streamed
// after all. A panic in it is logged.
func (c *Chain) BodyStreamed(x *Exchange, why StreamReason) {
	defer func() {
		if p := recover(); p != nil {
			logPanic(c.body.Name(), "body_streamed", p)
		}
	}()
	c.body.BodyStreamed(x, why)
}
