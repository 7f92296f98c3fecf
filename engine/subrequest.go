// subCall: the async client behind filters.SubRequester (external auth),
// with its whole-call deadline; its answers go through the park's ticket.

package engine

import (
	"errors"

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
// find it inactive. Its answer reaches the filter through the park's
// ticket: complete posts deliver to the inbox, and the loop runs it after
// the generation check (see inbox.go).
type subCall struct {
	ex      *exchange
	call    upstream.Call
	active  bool
	gen     uint64 // the park whose ticket Do was given
	then    func(*filters.Exchange, *filters.SubResponse) filters.Verdict
	resp    filters.SubResponse // the outcome, from complete until deliver
	status  int
	headers codec.Headers // copies in arena, valid until the next sub-request
	arena   []byte

	// deadline is the whole-call timeout (SubRequest.Timeout), armed at Do.
	// The call's own timeouts restart at every read, so a service that
	// drips its answer would otherwise hold the request for as long as it
	// likes.
	deadline  wheel.Timer
	deliverFn func(*filters.Exchange) filters.Verdict // deliver, bound once
	ready     bool                                    // deadline and deliverFn are set up (the exchange is recycled, so once)
}

var _ upstream.Receiver = (*subCall)(nil)

// subTimeout is the failure of a sub-request that overran its whole-call
// deadline. Timeout() marks it as a deadline, as net.Error does.
type subTimeout struct{}

func (subTimeout) Error() string   { return "sub-request deadline exceeded" }
func (subTimeout) Timeout() bool   { return true }
func (subTimeout) Temporary() bool { return true }

// errForeignTicket is Do's refusal of a ticket that is not the exchange's
// current park: the answer would have nowhere to go.
var errForeignTicket = errors.New("engine: a sub-request needs the ticket of its exchange's current park")

// Do sends r to a node of its upstream group for the exchange parked on t
// (filters.SubRequester). The outcome reaches then through t once the whole
// response arrived, the call failed, or r.Timeout passed since Do,
// whichever is first; a call that fails at once is delivered after the
// callback that started it, like any other. A second Do while one is
// active returns filters.ErrSubRequestActive and touches nothing: the
// active call, its continuation and the pool are left as they were.
func (ex *exchange) Do(t filters.Ticket, r *filters.SubRequest, then func(*filters.Exchange, *filters.SubResponse) filters.Verdict) error {
	s := &ex.sub
	if s.active {
		return filters.ErrSubRequestActive
	}
	if !ex.park.ticketOut || t != filters.NewTicket(ex.park.node, ex.park.gen) {
		return errForeignTicket
	}
	if !s.ready {
		s.deadline.Init(s.expire)
		s.deliverFn = s.deliver
		s.ready = true
	}
	s.active, s.gen, s.then, s.status = true, ex.park.gen, then, 0
	// As the proxy picks (pickNode): past nodes ejected or held down.
	g := ex.snap.upstreams[r.Group].on(ex.loop)
	p := g.Pick(g.Unavailable())
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
		s.complete(filters.SubResponse{Status: s.status, Headers: s.headers})
	}
	return true
}

func (s *subCall) CallFailed(_ *upstream.Call, err *upstream.Error) {
	s.complete(filters.SubResponse{Err: err})
}

// expire is the deadline: the call is cut wherever it is (waiting for a
// connection, connecting, or reading a dripped answer) and fails as a
// timeout.
func (s *subCall) expire() {
	if !s.active {
		return
	}
	s.call.Abort() // reports nothing back: complete below is the only answer
	s.complete(filters.SubResponse{Err: subTimeout{}})
}

// complete ends the active call and posts its outcome to the park's ticket.
func (s *subCall) complete(resp filters.SubResponse) {
	if !s.active {
		return
	}
	s.active = false
	s.deadline.Stop()
	s.resp = resp
	s.ex.post(s.gen, s.deliverFn)
}

// deliver hands the outcome to the filter's continuation: the function the
// ticket is resumed with, run by the loop once the park is known current.
// A panic in it is the chain's to recover (Chain.Resume).
func (s *subCall) deliver(x *filters.Exchange) filters.Verdict {
	then := s.then
	s.then = nil
	return then(x, &s.resp)
}

// abort cancels a sub-request whose park ended (the exchange timed out or
// is going away). An outcome already posted is dropped by the generation
// check, so its continuation is let go too.
func (s *subCall) abort() {
	s.deadline.Stop()
	s.then = nil
	if s.active {
		s.active = false
		s.call.Abort()
	}
}
