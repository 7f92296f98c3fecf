// The per-loop ring: a bounded single-producer (the loop), single-consumer
// (the sender) queue of spans.

package otlp

import "sync/atomic"

// ring is one event loop's queue. Slots are written by the loop between
// loading head and storing tail, and read by the sender between loading
// tail and storing head, so each slot has one owner at a time.
type ring struct {
	slots []Span
	mask  uint64
	tail  atomic.Uint64           // next slot to write; stored by the loop only
	_     [56]byte                // keep the loop's and the sender's counters on separate cache lines
	head  atomic.Uint64           // next slot to read; stored by the sender only
	opts  atomic.Pointer[Options] // the options of the span last recorded; read by the sender

	dropped atomic.Uint64 // spans refused because the ring was full
}

// newRing makes a ring of at least size slots (a power of two).
func newRing(size int) *ring {
	n := 1
	for n < size {
		n <<= 1
	}
	return &ring{slots: make([]Span, n), mask: uint64(n - 1)}
}

// push copies s into the ring and returns how many spans it holds, or 0
// when it was full (s dropped and counted). Called by the ring's loop only.
func (r *ring) push(s *Span) uint64 {
	t := r.tail.Load()
	if t-r.head.Load() > r.mask {
		r.dropped.Add(1)
		return 0
	}
	r.slots[t&r.mask] = *s
	r.tail.Store(t + 1)
	return t + 1 - r.head.Load()
}

// pop hands up to max spans to f in order and frees their slots. Called by
// the sender only.
func (r *ring) pop(max int, f func(*Span)) int {
	h, t := r.head.Load(), r.tail.Load()
	n := 0
	for ; h != t && n < max; n++ {
		f(&r.slots[h&r.mask])
		r.slots[h&r.mask] = Span{} // drop the strings it holds for the collector
		h++
	}
	r.head.Store(h)
	return n
}

// len is how many spans the ring holds.
func (r *ring) len() uint64 { return r.tail.Load() - r.head.Load() }
