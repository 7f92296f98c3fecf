// Ring: the single-producer, single-consumer queue of records between one
// event loop and the writer.

package accesslog

import "sync/atomic"

// Ring is a bounded queue of Records with one producer (an event loop) and
// one consumer (the writer goroutine). Neither side ever waits: a full ring
// refuses the record and counts the drop.
//
// head and tail only grow; slot i is slots[i&mask]. The producer writes a
// slot's fields and then publishes it by storing head; the consumer reads
// it after loading head and hands it back by storing tail. Go's atomics
// order the plain slot accesses on either side.
type Ring struct {
	_       [64]byte
	head    atomic.Uint64 // slots published; stored by the producer only
	_       [56]byte
	tail    atomic.Uint64 // slots released; stored by the consumer only
	_       [56]byte
	dropped atomic.Uint64 // records refused because the ring was full
	slots   []Record
	mask    uint64
	wake    *wake // the writer's, when it sleeps while every ring is empty; nil for a ring of its own
}

// wake lets an idle writer sleep instead of polling empty rings: it sets
// sleeping, checks the rings once more and waits on ch; a producer that
// finds sleeping set after publishing clears it and sends, without
// blocking. Both sides' atomics are sequentially consistent, so either
// the producer sees sleeping or the writer sees the record.
type wake struct {
	sleeping atomic.Bool
	ch       chan struct{} // capacity 1: a wake-up already pending covers the next
}

// ring wakes the writer if it sleeps. Never blocks.
func (w *wake) ring() {
	if w.sleeping.Load() && w.sleeping.CompareAndSwap(true, false) {
		select {
		case w.ch <- struct{}{}:
		default:
		}
	}
}

// NewRing makes a ring of at least size slots (a power of two, at least 2).
func NewRing(size int) *Ring {
	n := 2
	for n < size {
		n <<= 1
	}
	return &Ring{slots: make([]Record, n), mask: uint64(n - 1)}
}

// Len is the ring's capacity in records.
func (r *Ring) Len() int { return len(r.slots) }

// Reserve returns the next free slot for the producer to fill, or nil when
// the ring is full, in which case the drop is counted. The slot holds an
// old record: the producer sets every field it means (Record.Reset helps).
// Producer only; Commit publishes the slot.
func (r *Ring) Reserve() *Record {
	h := r.head.Load()
	if h-r.tail.Load() >= uint64(len(r.slots)) {
		r.dropped.Add(1)
		return nil
	}
	return &r.slots[h&r.mask]
}

// Commit publishes the slot the last Reserve returned, and wakes the
// writer if it sleeps. Producer only.
func (r *Ring) Commit() {
	r.head.Store(r.head.Load() + 1)
	if r.wake != nil {
		r.wake.ring()
	}
}

// Pending is how many published records wait for the consumer. Consumer
// only.
func (r *Ring) Pending() int { return int(r.head.Load() - r.tail.Load()) }

// At returns the i-th waiting record, 0 being the oldest; i < Pending. The
// records stay the consumer's until Release. Consumer only.
func (r *Ring) At(i int) *Record { return &r.slots[(r.tail.Load()+uint64(i))&r.mask] }

// Release hands the n oldest waiting records back to the producer.
// Consumer only.
func (r *Ring) Release(n int) { r.tail.Store(r.tail.Load() + uint64(n)) }

// Dropped is how many records the ring refused. Safe for concurrent use.
func (r *Ring) Dropped() uint64 { return r.dropped.Load() }
