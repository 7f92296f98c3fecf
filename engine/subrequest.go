// subCall: the async client behind filters.SubRequester (external auth),
// with its whole-call deadline and the recovery of its callback's panics.

package engine

import (
	"log"
	"runtime/debug"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/wheel"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/upstream"
)

var _ filters.SubRequester = (*exchange)(nil)

// subCall is an exchange's one sub-request at a time. It runs on the same
// upstream.Call machinery as the proxied request, on the same loop. Owned
// by the loop.
//
// A call is active from Do until complete (or abort). complete is the one
// place it stops being active: it runs for the response's last byte, a
// failed call, or the deadline, whichever comes first, and the others then
// find it inactive.
type subCall struct {
	ex      *exchange
	call    upstream.Call
	active  bool
	done    func(*filters.SubResponse)
	status  int
	headers codec.Headers // copies in arena, valid until the next sub-request
	arena   []byte

	// deadline is the whole-call timeout (SubRequest.Timeout), armed at Do.
	// The call's own timeouts restart at every read, so a service that
	// drips its answer would otherwise hold the request for as long as it
	// likes.
	deadline      wheel.Timer
	deadlineReady bool // deadline.Init has run (the exchange is recycled, so once)
}

var _ upstream.Receiver = (*subCall)(nil)

// subTimeout is the failure of a sub-request that overran its whole-call
// deadline. Timeout() marks it as a deadline, as net.Error does.
type subTimeout struct{}

func (subTimeout) Error() string   { return "sub-request deadline exceeded" }
func (subTimeout) Timeout() bool   { return true }
func (subTimeout) Temporary() bool { return true }

// Do sends r to a node of its upstream group. When it returns nil, done
// runs once, on the loop, after the whole response arrived, the call
// failed, or r.Timeout passed since Do, whichever is first; it may run
// before Do returns. A second Do while one is active returns
// filters.ErrSubRequestActive and touches nothing: the active call, its
// callback and the pool are left as they were.
func (ex *exchange) Do(x *filters.Exchange, r *filters.SubRequest, done func(*filters.SubResponse)) error {
	s := &ex.sub
	if s.active {
		return filters.ErrSubRequestActive
	}
	if !s.deadlineReady {
		s.deadline.Init(s.expire)
		s.deadlineReady = true
	}
	s.active, s.done, s.status = true, done, 0
	p := ex.snap.upstreams[r.Group].on(ex.loop).Pick(0)
	head := pool.Get(256)
	b := append(head.B, r.Method...)
	b = append(b, ' ')
	b = append(b, r.Path...)
	b = append(b, " HTTP/1.1\r\n"...)
	b = appendHeader(b, "Host", p.Addr)
	for _, h := range r.Headers {
		b = appendHeader(b, h.Name, h.Value)
	}
	head.B = append(b, "\r\n"...)
	// Armed before Start, which may complete the call at once; complete
	// stops it.
	if r.Timeout > 0 {
		ex.loop.wheel.Arm(&s.deadline, r.Timeout)
	}
	s.call.Start(p, head, upstream.Options{
		ConnectTimeout:  r.Timeout,
		ResponseTimeout: r.Timeout,
		HEAD:            r.Method == "HEAD",
		Retryable:       r.Method == "GET" || r.Method == "HEAD",
	})
	return nil
}

func (s *subCall) CallReady(*upstream.Call) bool { return true }

// ResponseHead keeps a copy of the final head: the callback runs only once
// the body is drained, so the connection can go back to the pool first.
func (s *subCall) ResponseHead(_ *upstream.Call, r *codec.Response) bool {
	if r.Status < 200 {
		return true
	}
	s.status = r.Status
	s.arena = s.arena[:0]
	s.headers = s.headers[:0]
	for _, h := range r.Headers {
		start := len(s.arena)
		s.arena = append(s.arena, h.Name...)
		mid := len(s.arena)
		s.arena = append(s.arena, h.Value...)
		s.headers = append(s.headers, codec.Header{Name: s.arena[start:mid:mid], Value: s.arena[mid:]})
	}
	// Appends may have moved the arena: re-point the copies.
	off := 0
	for i := range s.headers {
		n, v := len(s.headers[i].Name), len(s.headers[i].Value)
		s.headers[i] = codec.Header{Name: s.arena[off : off+n : off+n], Value: s.arena[off+n : off+n+v : off+n+v]}
		off += n + v
	}
	return true
}

func (s *subCall) ResponseBody(_ *upstream.Call, _, _ []byte, done bool) bool {
	if done {
		s.complete(&filters.SubResponse{Status: s.status, Headers: s.headers})
	}
	return true
}

func (s *subCall) CallFailed(_ *upstream.Call, err *upstream.Error) {
	s.complete(&filters.SubResponse{Err: err})
}

// expire is the deadline: the call is cut wherever it is (waiting for a
// connection, connecting, or reading a dripped answer) and fails as a
// timeout.
func (s *subCall) expire() {
	if !s.active {
		return
	}
	s.call.Abort() // reports nothing back: complete below is the only answer
	s.complete(&filters.SubResponse{Err: subTimeout{}})
}

// complete ends the active call and runs its callback.
//
// The callback is the filter's continuation (external auth resumes the
// chain from it), running outside the chain's panic recovery. When it runs
// inside a filter's request phase (a call that failed at once, from Do),
// the chain's recovery is on the stack and answers for it; otherwise a
// panic is recovered here, so it costs one request a 500, not the process.
func (s *subCall) complete(resp *filters.SubResponse) {
	if !s.active {
		return
	}
	s.active = false
	s.deadline.Stop()
	done := s.done
	s.done = nil
	ex := s.ex
	if ex.filtering {
		done(resp)
		return
	}
	// The request's ID tells whether the exchange still serves this
	// request when the panic arrives: inside done it may finish and be
	// reused for the connection's next one.
	id := ex.id
	defer func() {
		if p := recover(); p != nil {
			ex.callbackPanicked(p, id)
		}
	}()
	done(resp)
}

// callbackPanicked answers the request whose sub-request callback panicked
// with 500/50001, unless it is already answered (then its connection is
// cut if the answer is partial). The stack is logged, since the client
// gets only the code.
func (ex *exchange) callbackPanicked(p any, id [24]byte) {
	log.Printf("engine: panic in a sub-request callback: %v\n%s", p, debug.Stack())
	cc := ex.cc
	if cc == nil || ex.id != id {
		return // that request already ended; the exchange may serve another
	}
	// Whatever the callback got to, the request is no longer waiting on it.
	ex.parked, ex.resumed, ex.filtering = false, false, false
	ex.sub.abort()
	ex.call.Abort() // if the callback got as far as forwarding
	if ex.respStarted {
		cc.close()
		return
	}
	ex.discardHead()
	if !ex.reqDone {
		cc.closeAfter = true // the body was not read, so the framing is lost
	}
	ex.respond(500, 50001, "internal error in a filter callback")
}

// abort cancels a sub-request whose exchange is going away.
func (s *subCall) abort() {
	s.deadline.Stop()
	if s.active {
		s.active = false
		s.done = nil
		s.call.Abort()
	}
}
