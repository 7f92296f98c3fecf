// Ticket: how a filter parks a request and resumes it, from any goroutine.

package filters

// Ticket names one park of one exchange: Exchange.Park returns it, and
// whoever produces the answer (a sub-request, a Redis reply on a worker
// goroutine) resumes the request with it. It is a small value: copy it,
// store it, send it over a channel.
type Ticket struct {
	r   Resumer
	gen uint64
}

// Resume continues the parked request. fn runs on the exchange's event
// loop, as part of the parked filter's request phase: it may read and edit
// the exchange, and its verdict is the filter's (Continue runs the next
// filter, Respond answers with x.Rejection, Suspend after a new x.Park waits
// again). A panic in fn is a 500 with code 50001, as in a request phase. A
// nil fn means Continue.
//
// Resume may be called from any goroutine, the loop's own included, and
// never blocks. A ticket resumes its park once: a second Resume is a no-op,
// counted as a stale resume. fn never runs, and the resume is dropped and
// counted, when the park ended first: the request timed out
// (timeouts.suspend), its client left, or the filter did not return
// Suspend. Give back what fn would have released in the filter's Done
// phase, which runs on every path.
//
// fn is kept until it runs: a function value made once (a method value
// bound when the filter or its per-request state is built) keeps Resume
// free of allocations. The zero Ticket resumes nothing.
func (t Ticket) Resume(fn func(*Exchange) Verdict) {
	if t.r != nil {
		t.r.Resume(t.gen, fn)
	}
}

// Parker is the engine's side of Exchange.Park: it parks the exchange and
// issues the ticket that resumes it. Calling Park again before the park
// ends returns the same ticket.
type Parker interface {
	Park() Ticket
}

// Resumer carries a ticket's resume to its exchange's event loop. gen is
// the park the ticket names; a Resumer must drop a resume for any park but
// the current one, and every resume after the first. Safe for concurrent
// use.
type Resumer interface {
	Resume(gen uint64, fn func(*Exchange) Verdict)
}

// NewTicket is the ticket for park gen of the exchange r resumes, for
// engines and tests; filters get theirs from Exchange.Park.
func NewTicket(r Resumer, gen uint64) Ticket { return Ticket{r: r, gen: gen} }
