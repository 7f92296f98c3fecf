// Tickets: how a parked exchange is resumed from any goroutine, through its
// loop's inbox, and how a resume that arrives too late is dropped.

package engine

import (
	"context"
	"sync/atomic"

	"github.com/loopgate/loopgate/filters"
	"github.com/panjf2000/gnet/v2"
)

// How a resume reaches a parked exchange:
//
//  1. A filter parks the request: x.Park (exchange.Park) arms the
//     exchange's resume node for its current generation and returns the
//     ticket (the node and the generation).
//  2. Any goroutine resumes: Ticket.Resume claims the node with one CAS,
//     armed to claimed, which succeeds only for the armed generation and
//     only once; a losing resume is counted stale and dropped there. The
//     winner stores its function in the node and pushes the node onto the
//     loop's inbox, a lock-free MPSC stack. The producer whose push finds
//     no doorbell pending (scheduled false → true) rings one: a single
//     EventLoop.Execute for everything queued until the loop answers it.
//  3. The loop answers the doorbell: it takes the whole stack with one
//     swap, reverses it (oldest first) and delivers each node, then clears
//     scheduled and looks again. Delivering checks the generation: a park
//     that ended meanwhile (suspend timeout, client gone, recycled, or
//     resumed) has moved the exchange's generation on, and the resume is
//     counted stale and dropped, never run. Otherwise the park ends and
//     the chain continues with the function's verdict (Chain.Resume, then
//     afterFilters).
//
// The engine's own completions on the loop (a sub-request's answer) take
// the same claim, queue and generation check, but ring no doorbell: the
// loop drains its inbox when the callback that posted returns (loop.leave).
//
// The bound: a node is claimed at most once per park, and a claimed node
// is never armed again until the loop has drained it; a park that begins
// while its exchange's last node is still queued gets a fresh node. So the
// inbox holds at most one entry per park, and the parks it holds are those
// of live exchanges (one per client connection, max_connections in all)
// plus those that ended in the moment between their claim and the drain.
// A resume beyond that (a second resume of a ticket, a resume for an ended
// park) never reaches the queue: it is the counted no-op above.
//
// Generation bumps: every park ends by exactly one of resume, suspend
// timeout, a verdict other than Suspend, or the exchange ending (client
// gone, answered, recycled), and each of them is endPark, which moves the
// generation on.

// A resume node's state: its generation shifted left by two, and one of
// these bits (neither: idle, nothing out).
const (
	nodeArmed   = 1 // a ticket for this generation may claim it
	nodeClaimed = 2 // claimed: queued, or about to be, until the loop drains it
)

// resumeNode is an exchange's entry in its loop's inbox. One is reused for
// the exchange's parks while the loop drains it between them.
type resumeNode struct {
	// next links the inbox: written by the claiming producer before its
	// push, read by the loop after its swap.
	next *resumeNode
	// fn is the resume function: written by the claiming producer, read
	// and cleared by the loop after its swap.
	fn    func(*filters.Exchange) filters.Verdict
	state atomic.Uint64 // gen<<2 | nodeArmed, nodeClaimed or neither
	ex    *exchange     // immutable
	in    *inbox        // immutable: ex's loop's inbox, for producers
}

var _ filters.Resumer = (*resumeNode)(nil)

// parking is an exchange's park state. It is not reset with the
// exchange's other groups: gen survives recycling, so a ticket of an
// earlier request never matches a later one's park. endPark is where a
// park ends; the parked phase itself, and its suspend deadline (the
// exchange's phase timer), are the exchange's phase.
type parking struct {
	node      *resumeNode // what this exchange's tickets post; nil until its first park
	gen       uint64      // the park generation; bumped whenever a park ends
	ticketOut bool        // Park issued a ticket and the park has not ended
}

// inbox is a loop's queue of resumes. Producers on any goroutine touch
// only the atomics; the rest is the loop's.
type inbox struct {
	_         cacheLine
	head      atomic.Pointer[resumeNode] // the Treiber stack, newest first
	scheduled atomic.Bool                // a doorbell is rung and not yet answered
	doorbells atomic.Uint64              // Execute calls rung, for tests
	stale     atomic.Uint64              // resumes dropped: their park had ended, or was resumed already
	_         cacheLine

	loop     *loop
	doorbell gnet.Runnable // answer, bound once
	local    bool          // a loop-side post waits for the end of the callback
}

func (in *inbox) init(l *loop) {
	in.loop = l
	in.doorbell = gnet.RunnableFunc(func(context.Context) error {
		l.enter()
		l.answerDoorbell()
		l.leave()
		return nil
	})
}

// Park arms a park of the exchange and returns its ticket: the
// filters.Parker the exchange's filters reach through Exchange.Park. Only a
// request phase may park (a response or Done phase gets the zero Ticket;
// respond and putExchange leave the filtering phase before they run), so
// once the phase returns, a ticket out means a parked request: either
// afterFilters parks it, or its verdict ends the park.
func (ex *exchange) Park() filters.Ticket {
	if ex.phase != phaseFiltering {
		return filters.Ticket{}
	}
	if !ex.park.ticketOut {
		n := ex.park.node
		if n == nil || n.state.Load()&nodeClaimed != 0 {
			// The first park, or the last park's resume is still queued:
			// that node is dropped when drained, and this park gets its own.
			n = &resumeNode{ex: ex, in: &ex.loop.inbox}
			ex.park.node = n
		}
		n.state.Store(ex.park.gen<<2 | nodeArmed)
		ex.park.ticketOut = true
	}
	return filters.NewTicket(ex.park.node, ex.park.gen)
}

// endPark ends the exchange's park, however it ended: resumed, timed out,
// decided without it, or the exchange ending. The generation moves on, so a
// resume for it, queued or still to come, is dropped. Cheap when nothing is
// parked: the hot path calls it for every request. The phase is the
// caller's to change (resume, respond, putExchange).
func (ex *exchange) endPark() {
	if ex.park.ticketOut {
		ex.park.ticketOut = false
		// An armed node goes idle; a claimed one stays claimed until the
		// loop drains it (see Park).
		ex.park.node.state.CompareAndSwap(ex.park.gen<<2|nodeArmed, ex.park.gen<<2)
		ex.park.gen++
	}
}

// Resume claims the node for park gen and queues fn for the loop, ringing
// its doorbell unless one is pending: Ticket.Resume, from any goroutine.
func (n *resumeNode) Resume(gen uint64, fn func(*filters.Exchange) filters.Verdict) {
	if n.claim(gen, fn) {
		n.in.push(n)
		n.in.ring()
	}
}

// claim takes the node for park gen, once, and stores fn in it. A resume
// that finds the park ended, or claimed already, is counted and dropped.
func (n *resumeNode) claim(gen uint64, fn func(*filters.Exchange) filters.Verdict) bool {
	if !n.state.CompareAndSwap(gen<<2|nodeArmed, gen<<2|nodeClaimed) {
		n.in.stale.Add(1)
		return false
	}
	n.fn = fn
	return true
}

// post queues fn for the exchange's park gen from its own loop (a
// sub-request's answer), with the same claim and generation check as
// Ticket.Resume but no doorbell: the loop drains its inbox when the
// callback that posted returns.
func (ex *exchange) post(gen uint64, fn func(*filters.Exchange) filters.Verdict) {
	if n := ex.park.node; n.claim(gen, fn) {
		in := &ex.loop.inbox
		in.push(n)
		in.local = true
	}
}

// push adds a claimed node to the stack.
func (in *inbox) push(n *resumeNode) {
	for {
		old := in.head.Load()
		n.next = old
		if in.head.CompareAndSwap(old, n) {
			return
		}
	}
}

// ring posts the doorbell unless one is pending. Execute fails only once
// the engine is stopping; then nothing drains again, and the parked
// requests end with their connections.
func (in *inbox) ring() {
	if !in.scheduled.CompareAndSwap(false, true) {
		return // the pending doorbell's answer finds this node
	}
	in.doorbells.Add(1)
	if el := in.loop.eventLoop(); el != nil {
		_ = el.Execute(context.Background(), in.doorbell)
	}
}

// answerDoorbell drains the inbox on the loop, then clears scheduled. A
// producer that pushed after the last swap but still saw scheduled set rang
// nothing, so the inbox is looked at again after clearing: anything there
// is drained in this same answer, unless a newer producer has rung again.
func (l *loop) answerDoorbell() {
	in := &l.inbox
	for {
		l.drainInbox()
		in.scheduled.Store(false)
		if in.head.Load() == nil || !in.scheduled.CompareAndSwap(false, true) {
			return
		}
	}
}

// drainInbox delivers every queued resume, oldest first. Each node's next
// is read before it is delivered: once delivered, it may be armed and
// pushed again.
func (l *loop) drainInbox() {
	n := l.inbox.head.Swap(nil)
	var oldest *resumeNode
	for n != nil {
		next := n.next
		n.next = oldest
		oldest = n
		n = next
	}
	for n = oldest; n != nil; {
		next := n.next
		n.next = nil
		n.deliver()
		n = next
	}
}

// deliver is the generation check: it runs the node's resume when it is for
// the park its exchange is in now, and drops and counts it otherwise. The
// drain never runs inside a request phase, so a current generation means a
// parked request (see Park).
func (n *resumeNode) deliver() {
	st := n.state.Load()
	fn := n.fn
	n.fn = nil
	n.state.Store(st &^ nodeClaimed) // drained: free to arm again
	ex := n.ex
	if st>>2 != ex.park.gen {
		n.in.stale.Add(1)
		return
	}
	ex.resume(fn)
}

// resume ends the park and continues the chain with fn's verdict; the
// driver carries on when the filters let the request through.
func (ex *exchange) resume(fn func(*filters.Exchange) filters.Verdict) {
	ex.endPark()
	ex.setPhase(phaseFiltering)
	if ex.afterFilters(ex.chain.Resume(&ex.fx, fn)) {
		ex.run()
	}
}

// StaleResumes returns how many ticket resumes were dropped, never run:
// a second resume of a ticket, or one whose park had already ended (the
// request timed out, its client left, or it was answered or recycled).
// Safe for concurrent use.
func (s *Server) StaleResumes() uint64 {
	n := uint64(0)
	for _, l := range s.loops {
		n += l.inbox.stale.Load()
	}
	return n
}
