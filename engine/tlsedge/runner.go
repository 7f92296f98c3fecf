// Runner: the bound on handshakes, their timeout, and their counts.

package tlsedge

import (
	"crypto/tls"
	"errors"
	"sync/atomic"
	"time"
)

// Runner runs the handshakes of every Session given to it. At most Workers
// compute at once, so a flood of handshakes takes at most that many CPUs
// from the loops (and, at a lowered Priority, less of them); a handshake waiting for its peer's next flight gives its
// worker back, so peers that stall hold no worker. At most MaxPending are
// in progress (computing, waiting for a worker or for their peer: each a
// parked goroutine and its Session); past that, new connections are
// refused at once. Safe for concurrent use.
type Runner struct {
	*bounds   // shared with its twins
	histogram histogram

	ok, failed, timedOut, refused, resumed atomic.Uint64
	tls12, tls13                           atomic.Uint64
}

// bounds are a Runner's workers and its count of handshakes in progress.
type bounds struct {
	slots    chan struct{}
	priority Priority // RunnerOptions.Priority
	maxAdmit int64
	admitted atomic.Int64 // in progress
	active   atomic.Int64 // holding a worker
}

// Twin returns a Runner under the same bounds (workers and handshakes in
// progress are counted together) with counts of its own: the gateway's
// handshakes with clients and with upstream nodes share the CPUs it gives
// handshakes, and are reported apart.
func (r *Runner) Twin() *Runner { return &Runner{bounds: r.bounds} }

// RunnerOptions bound a Runner.
type RunnerOptions struct {
	Workers    int // handshakes computing at once; > 0
	MaxPending int // handshakes in progress; >= Workers
	// Priority is the kernel priority a handshake computes at (Linux;
	// the thread is locked to the handshake while it computes, and a
	// thread that cannot get its priority back is never reused). Where
	// the kernel refuses (PriorityAvailable), and off Linux, handshakes
	// compute at normal priority.
	Priority Priority
}

// NewRunner returns a Runner with o's bounds.
func NewRunner(o RunnerOptions) *Runner {
	return &Runner{bounds: &bounds{slots: make(chan struct{}, o.Workers), maxAdmit: int64(o.MaxPending), priority: o.Priority}}
}

func (r *Runner) admit() bool {
	if r.admitted.Add(1) > r.maxAdmit {
		r.admitted.Add(-1)
		r.refused.Add(1)
		return false
	}
	return true
}

func (r *Runner) leave() { r.admitted.Add(-1) }

// finished counts a handshake's end (on the loop, once per Session).
func (r *Runner) finished(s *Session, err error) {
	switch {
	case err == nil:
		r.ok.Add(1)
		if s.state.Version == tls.VersionTLS13 {
			r.tls13.Add(1)
		} else {
			r.tls12.Add(1)
		}
		if s.state.DidResume {
			r.resumed.Add(1)
		}
		r.histogram.observe(time.Since(s.started))
	case errors.Is(err, ErrHandshakeTimeout):
		r.timedOut.Add(1)
	default:
		r.failed.Add(1)
	}
}

// Stats is a snapshot of a Runner's counts.
type Stats struct {
	OK, Failed, TimedOut, Refused uint64 // handshakes by result
	TLS12, TLS13                  uint64 // successful handshakes by version
	Resumed                       uint64 // successful handshakes that resumed a session
	Active, Pending               int64  // handshakes computing, and in progress in all (twins together)
	Durations                     HistogramSnapshot
}

// Stats returns the Runner's counts.
func (r *Runner) Stats() Stats {
	active := r.active.Load()
	return Stats{
		OK: r.ok.Load(), Failed: r.failed.Load(), TimedOut: r.timedOut.Load(), Refused: r.refused.Load(),
		TLS12: r.tls12.Load(), TLS13: r.tls13.Load(), Resumed: r.resumed.Load(),
		Active: active, Pending: r.admitted.Load(),
		Durations: r.histogram.snapshot(),
	}
}

// HistogramBounds are the upper bounds, in seconds, of the handshake
// duration histogram's buckets (a last one, +Inf, takes the rest).
var HistogramBounds = [...]float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

type histogram struct {
	buckets [len(HistogramBounds) + 1]atomic.Uint64
	sumNs   atomic.Uint64
}

func (h *histogram) observe(d time.Duration) {
	sec := d.Seconds()
	i := 0
	for i < len(HistogramBounds) && sec > HistogramBounds[i] {
		i++
	}
	h.buckets[i].Add(1)
	h.sumNs.Add(uint64(max(d, 0)))
}

// HistogramSnapshot holds per-bucket (not cumulative) counts, parallel to
// HistogramBounds plus +Inf, and the sum of the durations.
type HistogramSnapshot struct {
	Counts [len(HistogramBounds) + 1]uint64
	Sum    time.Duration
}

func (h *histogram) snapshot() HistogramSnapshot {
	var s HistogramSnapshot
	for i := range h.buckets {
		s.Counts[i] = h.buckets[i].Load()
	}
	s.Sum = time.Duration(h.sumNs.Load())
	return s
}
