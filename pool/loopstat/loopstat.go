// Package loopstat holds the latency histograms an event loop writes and
// the metrics endpoint reads: fixed buckets of atomic counters, so an
// observation takes no lock and allocates nothing.
//
// A Histogram is one loop's shard. Only its loop writes it; any goroutine
// may read it, and a reader merges every loop's shard into a Sum. Keep
// shards of different loops on different cache lines (the owner pads them),
// so loops never contend for one.
package loopstat

import (
	"math/bits"
	"sync/atomic"
	_ "unsafe" // for go:linkname
)

// Bounds are the upper bounds, in nanoseconds, of every latency histogram
// in Loopgate: 1, 2.5 and 5 per decade from 1 µs to 5 s, then 10, 30 and
// 60 s. One layout for all of them keeps a filter's self time (often under
// a microsecond) and a route's latency (up to the response timeout) on the
// same scale.
var Bounds = [...]int64{
	1e3, 2.5e3, 5e3,
	1e4, 2.5e4, 5e4,
	1e5, 2.5e5, 5e5,
	1e6, 2.5e6, 5e6,
	1e7, 2.5e7, 5e7,
	1e8, 2.5e8, 5e8,
	1e9, 2.5e9, 5e9,
	10e9, 30e9, 60e9,
}

// firstBound[k] is the first bound at or above the least value of k bits:
// where Observe's search for a value of k bits starts. Consecutive bounds
// are at least twice apart, so it ends within one step instead of
// scanning from 1 µs (up to 24) on every observation.
var firstBound = func() (t [65]uint8) {
	for k := 1; k < len(t); k++ {
		least := uint64(1) << (k - 1)
		i := 0
		for i < len(Bounds) && uint64(Bounds[i]) < least {
			i++
		}
		t[k] = uint8(i)
	}
	return t
}()

// Buckets is the number of counters in a histogram: one per bound, and the
// last for what is above every bound (le="+Inf").
const Buckets = len(Bounds) + 1

// Histogram is one loop's latency histogram. The zero value is ready.
type Histogram struct {
	counts [Buckets]atomic.Uint64 // not cumulative: counts[i] holds Bounds[i-1] < v <= Bounds[i]
	sumNs  atomic.Uint64
}

// Observe records a duration of ns nanoseconds (negative counts as 0).
// Call it only from the histogram's loop.
func (h *Histogram) Observe(ns int64) {
	if ns < 0 {
		ns = 0
	}
	i := int(firstBound[bits.Len64(uint64(ns))])
	for i < len(Bounds) && ns > Bounds[i] { // one step at most: bounds at least double
		i++
	}
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(ns))
}

// Sum is histograms merged for writing out. The zero value is empty.
type Sum struct {
	Counts [Buckets]uint64 // not cumulative, as in Histogram
	SumNs  uint64
}

// Add merges h into s. Safe for concurrent use with Observe: each counter
// is loaded atomically, so a sum taken while loops record may be a few
// observations behind in some buckets, never torn.
func (s *Sum) Add(h *Histogram) {
	for i := range h.counts {
		s.Counts[i] += h.counts[i].Load()
	}
	s.SumNs += h.sumNs.Load()
}

// Count is the number of observations: the +Inf bucket's cumulative count.
func (s *Sum) Count() uint64 {
	n := uint64(0)
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// Now is the runtime's monotonic clock in nanoseconds: the cheapest
// timestamp Go has, for measuring durations on the hot path.
func Now() int64 { return nanotime() }

//go:linkname nanotime runtime.nanotime
func nanotime() int64
