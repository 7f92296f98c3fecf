// Chain: a route's compiled filters, run with timings and panic recovery.

package filters

import (
	"cmp"
	"fmt"
	"log"
	"runtime/debug"
	"slices"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/loopgate/loopgate/pool/loopstat"
)

// Timing is one filter's cost in one exchange.
type Timing struct {
	Self  time.Duration // the filter's own request and response phase work
	Total time.Duration // from its request phase start to its response phase end
	start int64         // nanotime at its request phase start
}

// Chain is a route's filters in order. It is immutable and safe for
// concurrent use.
type Chain struct {
	filters []Filter
	names   []string   // each filter's Name, for the exchange's StatSet
	loops   int        // the event loops the chain runs on
	stats   []*Stats   // per filter, cumulative (NewChain); nil when each exchange brings its route's StatSet (NewSharedChain)
	body    BodyFilter // the first filter that rewrites bodies; nil when none
	hooked  uint16     // bit i: filter i has a response hook (HasResponseHook), so its response phase is timed
}

// NewChain orders filters and rejects duplicate orders or names. Each
// filter gets fresh stats, which Stats returns.
func NewChain(fs []Filter, loops int) (*Chain, error) {
	c, err := NewSharedChain(fs, loops)
	if err != nil {
		return nil, err
	}
	c.stats = make([]*Stats, len(c.filters))
	for i := range c.stats {
		c.stats[i] = NewStats(loops)
	}
	return c, nil
}

// NewSharedChain is NewChain for a chain that records no stats of its
// own: each exchange records into the StatSet it was given (SetStats),
// its route's. One chain can then serve every route that runs the same
// filter instances, and the stats outlive the chain: the engine keeps a
// route's StatSet by route id across reloads.
func NewSharedChain(fs []Filter, loops int) (*Chain, error) {
	if len(fs) > MaxChain {
		return nil, fmt.Errorf("filters: %d filters in one chain, at most %d", len(fs), MaxChain)
	}
	// At most MaxChain filters: sorted and checked in place, with no map
	// (a gateway of 30,000 routes makes a chain for each).
	sorted := slices.Clone(fs)
	slices.SortStableFunc(sorted, func(a, b Filter) int { return cmp.Compare(a.Order(), b.Order()) })
	for i := 1; i < len(sorted); i++ {
		if sorted[i].Order() == sorted[i-1].Order() {
			return nil, fmt.Errorf("filters: %s and %s share order %d", sorted[i-1].Name(), sorted[i].Name(), sorted[i].Order())
		}
	}
	for i, f := range sorted {
		for _, g := range sorted[:i] {
			if g.Name() == f.Name() {
				return nil, fmt.Errorf("filters: %s appears twice in one chain", f.Name())
			}
		}
	}
	c := &Chain{filters: sorted, names: make([]string, len(sorted)), loops: loops}
	for i, f := range sorted {
		if b, ok := f.(BodyFilter); ok && c.body == nil {
			c.body = b
		}
		c.names[i] = f.Name()
		if f.HasResponseHook() {
			c.hooked |= 1 << i // MaxChain is 16
		}
	}
	return c, nil
}

// Len is the number of filters.
func (c *Chain) Len() int { return len(c.filters) }

// Filter returns the i-th filter in run order.
func (c *Chain) Filter(i int) Filter { return c.filters[i] }

// Name is the i-th filter's name.
func (c *Chain) Name(i int) string { return c.names[i] }

// Stats returns the cumulative stats of the i-th filter of a chain made
// by NewChain; nil for a shared chain (NewSharedChain).
func (c *Chain) Stats(i int) *Stats {
	if c.stats == nil {
		return nil
	}
	return c.stats[i]
}

// table is the exchange's StatSet's table laid out for c, for
// RunResponseFrom to record into; nil when c records into its own stats
// (NewChain), the exchange names no set, or no filter ran (nothing to
// record, so nothing is made).
func (c *Chain) table(x *Exchange) *statTable {
	if c.stats != nil || x.stats == nil || x.next == 0 {
		return nil
	}
	return x.stats.table(c)
}

// RunRequest runs request phases from the start, or from where a suspended
// chain stopped. Continue means the request may be forwarded; Respond means
// x.Rejection is the answer; Suspend means a filter parked the exchange
// (x.Park) and its ticket will resume it (Resume).
// A panicking filter is turned into a 500 rejection.
func (c *Chain) RunRequest(x *Exchange) (v Verdict) {
	defer func() {
		x.now = 0 // Now reads the clock again outside the phases
		if p := recover(); p != nil {
			logPanic(c.filters[x.next].Name(), "request", p)
			v = x.Reject(500, 50001, "internal error in filter "+c.filters[x.next].Name())
			x.next++ // the panicking filter's response phase runs too
			x.began = max(x.began, x.next)
		}
	}()
	// One clock reading per boundary: a filter's end is the next one's start.
	now := nanotime()
	for x.next < len(c.filters) {
		i := x.next
		t := &x.Timings[i]
		t.start, x.now = now, now
		x.began = max(x.began, i+1)
		v = c.filters[i].Request(x)
		now = nanotime()
		t.Self = time.Duration(now - t.start)
		x.next = i + 1
		if v != Continue {
			return v
		}
	}
	return Continue
}

// Resume continues a chain that the filter before x's position suspended:
// fn, the function its ticket was resumed with, finishes that filter's
// request phase, and when it says Continue the request phases after it run
// (RunRequest). fn's time counts in the filter's self time, and a panic in
// it is a 500 rejection, as in RunRequest. A nil fn is Continue. The engine
// calls it on the exchange's loop.
func (c *Chain) Resume(x *Exchange, fn func(*Exchange) Verdict) Verdict {
	v := Continue
	if i := x.next - 1; fn != nil && i >= 0 {
		start := nanotime()
		x.now = start
		v = c.runResumed(x, i, fn)
		x.now = 0
		x.Timings[i].Self += time.Duration(nanotime() - start)
	}
	if v == Continue {
		return c.RunRequest(x)
	}
	return v
}

// runResumed runs filter i's resume function with RunRequest's recovery.
func (c *Chain) runResumed(x *Exchange, i int, fn func(*Exchange) Verdict) (v Verdict) {
	defer func() {
		if p := recover(); p != nil {
			logPanic(c.filters[i].Name(), "resume", p)
			v = x.Reject(500, 50001, "internal error in filter "+c.filters[i].Name())
		}
	}()
	return fn(x)
}

// RunResponse runs the response phases of every filter whose request phase
// ran, last first, and records timings. x.Status must be set.
func (c *Chain) RunResponse(x *Exchange) { c.RunResponseFrom(x, nanotime()) }

// RunResponseFrom is RunResponse for a caller that read the clock (the
// runtime's monotonic nanoseconds, loopstat.Now) moments before, after
// every request phase ended: that reading starts the first response
// phase, which saves a clock read per response. The engine passes the
// reading it took at the upstream response's first byte, so the few
// instructions between that byte's parse and the response phases count in
// the last filter's self time. Every reading later than the request
// phases serves; one earlier would make timings negative.
//
// The clock is read again only after a filter with a response hook
// (HasResponseHook): the others did no work to time, so their total time
// ends on the reading before them, and a chain with no response hook at
// all reads no clock here.
func (c *Chain) RunResponseFrom(x *Exchange, now int64) {
	defer func() {
		x.now = 0
		if p := recover(); p != nil {
			// The head is already decided; a broken response phase loses
			// only its own edits. Continue with the filters before it.
			logPanic(c.filters[x.next-1].Name(), "response", p)
			x.next--
			c.RunResponse(x)
		}
	}()
	tab := c.table(x)
	for x.next > 0 {
		i := x.next - 1
		t := &x.Timings[i]
		start := now
		x.now = now
		c.filters[i].Response(x)
		if c.hooked&(1<<i) != 0 {
			now = nanotime()
			t.Self += time.Duration(now - start)
		}
		t.Total = time.Duration(now - t.start)
		if tab != nil { // the route's stats (NewSharedChain), else the chain's own
			tab.entries[i].stats.record(x.Loop, t)
		} else if c.stats != nil {
			c.stats[i].record(x.Loop, t)
		}
		x.next = i
	}
}

// RunDone runs the Done phase of every filter whose request phase began,
// last first, once: a second call does nothing. A panicking Done is logged
// and the filters before it still run.
func (c *Chain) RunDone(x *Exchange) {
	defer func() {
		if p := recover(); p != nil {
			logPanic(c.filters[x.began].Name(), "done", p)
			c.RunDone(x)
		}
	}()
	for x.began > 0 {
		x.began--
		c.filters[x.began].Done(x)
	}
}

// logPanic records a recovered filter panic with the stack that raised it:
// the request survives as a 500, so the log is the only trace of the bug.
// The stack is taken inside the deferred recover, so it still holds the
// panicking frames.
func logPanic(filter, phase string, p any) {
	log.Printf("filters: panic in %s's %s phase: %v\n%s", filter, phase, p, debug.Stack())
}

// Stats are one filter's cumulative timings: a histogram of its self time
// and one of its total time, sharded per loop so that each loop writes only
// its own counters (no contended atomics on the hot path). A filter is
// counted when its response phase ends.
type Stats struct {
	// shards[i] is loop i's, made by loop i on its first record: a gateway
	// of 30,000 routes has a Stats per route and filter, and the shards of
	// those no request ran cost nothing (two histograms a loop would be
	// about 2.8 KB a route).
	shards []atomic.Pointer[statShard]
}

// NewStats makes stats for a filter that runs on loops event loops.
func NewStats(loops int) *Stats {
	s := &Stats{}
	s.Init(loops)
	return s
}

// Init makes s, a zero Stats in a structure of the caller's, the stats of
// a filter that runs on loops event loops, as NewStats does: one
// allocation fewer for each route and filter of a large config.
func (s *Stats) Init(loops int) { s.shards = make([]atomic.Pointer[statShard], loops) }

type statShard struct {
	self, total loopstat.Histogram
	_           [64]byte // keep shards on separate cache lines
}

// record adds one exchange's timing. Only loop `loop` writes its shard.
func (s *Stats) record(loop int, t *Timing) {
	sh := s.shards[loop].Load()
	if sh == nil { // once per loop, on the filter's first exchange there
		sh = new(statShard)
		s.shards[loop].Store(sh)
	}
	sh.self.Observe(int64(t.Self))
	sh.total.Observe(int64(t.Total))
}

// Histograms merges the shards into self and total. Safe for concurrent
// use.
func (s *Stats) Histograms(self, total *loopstat.Sum) {
	for i := range s.shards {
		if sh := s.shards[i].Load(); sh != nil {
			self.Add(&sh.self)
			total.Add(&sh.total)
		}
	}
}

// Totals sums the shards. Safe for concurrent use.
func (s *Stats) Totals() (calls int64, self, total time.Duration) {
	var sh, tot loopstat.Sum
	s.Histograms(&sh, &tot)
	return int64(sh.Count()), time.Duration(sh.SumNs), time.Duration(tot.SumNs)
}

// nanotime is the runtime's monotonic clock: the cheapest timestamp Go has.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64
