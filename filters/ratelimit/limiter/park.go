// Cluster limits on the request path: a request served from the node's
// lease goes on at once; one that needs Redis parks until a worker brings
// the answer, and gives its tokens back if it never runs.

package limiter

import (
	"sync/atomic"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/ratelimit/cluster"
)

// call is one request's pass through the cluster limits. It belongs to
// that request from Request until the last cluster limit decided, and is
// then reused (the loop's spare, or the pool). Its two functions are bound
// once, when it is made, so parking allocates nothing.
//
// Who owns what: the loop writes idx, taken and ticket; a worker writes
// answer. The state hands them over: each side writes its fields before
// its compare-and-swap on state, and reads the other's only after seeing
// the state the other set.
//
//	idle --Take--> asking --Take answered Pending, ticket taken--> parked
//	asking --worker answers first--> answered      (the loop decides at once)
//	parked --worker answers--> answered            (the ticket resumes the request)
//	parked --Done: the request ended first--> abandoned
//	answered --resumed, or decided at once--> idle
//	abandoned --worker answers--> freed            (the worker gives the tokens back)
//	answered --Done: the resume was dropped--> idle (Done gives the tokens back)
type call struct {
	f      *rateFilter
	state  atomic.Uint32
	idx    int                                     // the cluster limit asked
	taken  [maxLimits]cluster.Decision             // what the limits before idx allowed
	answer cluster.Decision                        // the worker's answer for idx
	ticket filters.Ticket                          // the park's, while parked
	onTake func(cluster.Decision)                  // c.answered, for Limit.Take
	then   func(*filters.Exchange) filters.Verdict // c.resumed, for Ticket.Resume
}

// The states of a call.
const (
	idle uint32 = iota
	asking
	parked
	answered
	abandoned
)

func newCall(f *rateFilter) *call {
	c := &call{f: f}
	c.onTake = c.answered
	c.then = c.resumed
	return c
}

// getCall takes a call for a request on loop: the loop's spare, else one
// from the pool. On the loop.
func (f *rateFilter) getCall(loop int) *call {
	ls := &f.loops[loop]
	if c := ls.spare; c != nil {
		ls.spare = nil
		return c
	}
	return f.calls.Get().(*call)
}

// putCall gives an idle call back, on the loop.
func (f *rateFilter) putCall(loop int, c *call) {
	c.ticket = filters.Ticket{}
	ls := &f.loops[loop]
	if ls.spare == nil {
		ls.spare = c
		return
	}
	f.calls.Put(c)
}

// takeRemote decides the cluster limits from, in order, for x: each one
// answers at once (a leased token, a known empty bucket, the failure mode)
// or parks the request until Redis answers. On x's loop.
func (f *rateFilter) takeRemote(x *filters.Exchange, c *call, from int, now int64) filters.Verdict {
	for i := from; i < len(f.remote); i++ {
		r := &f.remote[i]
		c.idx = i
		c.state.Store(asking)
		d := r.take(x, now, c.onTake)
		if d.Verdict == cluster.Pending {
			c.ticket = x.Park()
			if c.state.CompareAndSwap(asking, parked) {
				f.loops[x.Loop].parked[x] = c
				return filters.Suspend
			}
			// The worker answered before the park: decide now. Not
			// returning Suspend voids the ticket.
			d = c.answer
		}
		c.state.Store(idle)
		if d.Verdict != cluster.Allow {
			return f.refuse(x, c, d)
		}
		c.taken[i] = d
	}
	f.putCall(x.Loop, c)
	return filters.Continue
}

// refuse answers a cluster limit's Deny or Unavailable, giving back what
// the limits before it took: the request will not run.
func (f *rateFilter) refuse(x *filters.Exchange, c *call, d cluster.Decision) filters.Verdict {
	r := &f.remote[c.idx]
	f.giveBack(c, false)
	f.putCall(x.Loop, c)
	if d.Verdict == cluster.Unavailable {
		return unavailable(x, r.rate, d.RetryAfterSeconds())
	}
	return reject(x, r.rate, d.Remaining, d.RetryAfterSeconds(), d.ResetSeconds())
}

// giveBack returns the tokens the cluster limits before c.idx took, and
// with answer the ones c.answer took, for a request that will not run.
func (f *rateFilter) giveBack(c *call, answer bool) {
	for j := range c.idx {
		f.remote[j].giveBack(c.taken[j])
	}
	if answer {
		f.remote[c.idx].giveBack(c.answer)
	}
}

// answered is Limit.Take's done, on a worker goroutine: it hands Redis's
// answer to the request, however far the request got meanwhile.
func (c *call) answered(d cluster.Decision) {
	c.answer = d
	for {
		switch c.state.Load() {
		case asking:
			if c.state.CompareAndSwap(asking, answered) {
				return // the loop has not parked yet; it decides itself
			}
		case parked:
			// Read before the swap: once it succeeds, the loop may end
			// the request and reuse c.
			t := c.ticket
			if c.state.CompareAndSwap(parked, answered) {
				t.Resume(c.then)
				return
			}
		case abandoned:
			// The request ended while it waited: it never runs.
			c.f.giveBack(c, true)
			c.state.Store(idle)
			c.f.calls.Put(c)
			return
		default:
			panic("limiter: a cluster answer for a call that asked nothing")
		}
	}
}

// resumed carries the parked request on with the answer, on its loop.
func (c *call) resumed(x *filters.Exchange) filters.Verdict {
	f := c.f
	delete(f.loops[x.Loop].parked, x)
	c.state.Store(idle)
	if c.answer.Verdict != cluster.Allow {
		return f.refuse(x, c, c.answer)
	}
	c.taken[c.idx] = c.answer
	return f.takeRemote(x, c, c.idx+1, x.Now())
}

// Done gives back the tokens of a request that parked on a cluster limit
// and never ran: its client left, or it timed out, while Redis answered.
func (f *rateFilter) Done(x *filters.Exchange) {
	if len(f.remote) == 0 {
		return
	}
	ls := &f.loops[x.Loop]
	c, ok := ls.parked[x]
	if !ok {
		return
	}
	delete(ls.parked, x)
	if c.state.CompareAndSwap(parked, abandoned) {
		return // the worker gives back when Redis answers
	}
	// Answered, and the resume dropped since the park had ended.
	f.giveBack(c, true)
	c.state.Store(idle)
	f.putCall(x.Loop, c)
}
