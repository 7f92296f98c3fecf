// subCall: the async client behind filters.SubRequester (external auth).

package engine

import (
	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/upstream"
)

var _ filters.SubRequester = (*exchange)(nil)

// subCall is an exchange's one sub-request at a time. It runs on the same
// upstream.Call machinery as the proxied request, on the same loop.
type subCall struct {
	ex      *exchange
	call    upstream.Call
	active  bool
	done    func(*filters.SubResponse)
	status  int
	headers codec.Headers // copies in arena, valid until the next sub-request
	arena   []byte
}

var _ upstream.Receiver = (*subCall)(nil)

// Do sends r to a node of its upstream group. done runs once, on the loop,
// after the whole response arrived or the call failed.
func (ex *exchange) Do(x *filters.Exchange, r *filters.SubRequest, done func(*filters.SubResponse)) {
	s := &ex.sub
	s.active, s.done, s.status = true, done, 0
	p := ex.loop.up.Group(r.Group).Pick()
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
	s.call.Start(p, head, upstream.Options{
		ConnectTimeout:  r.Timeout,
		ResponseTimeout: r.Timeout,
		HEAD:            r.Method == "HEAD",
		Retryable:       r.Method == "GET" || r.Method == "HEAD",
	})
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

func (s *subCall) complete(resp *filters.SubResponse) {
	if !s.active {
		return
	}
	s.active = false
	done := s.done
	s.done = nil
	done(resp)
}

// abort cancels a sub-request whose exchange is going away.
func (s *subCall) abort() {
	if s.active {
		s.active = false
		s.done = nil
		s.call.Abort()
	}
}
