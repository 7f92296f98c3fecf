// The Redis health breaker: when to stop calling Redis, and when to try
// again.

package cluster

import (
	"sync/atomic"
	"time"
)

// Health is whether this node is calling Redis.
//
//	Up   --FailureThreshold consecutive failed calls-->  Down
//	Down --a probe succeeds-->                            Up (ramping)
//
// rueidis dials again on every call while Redis is unreachable and has no
// backoff of its own; Down is what stops that. While Down no worker calls
// Redis; only the controller probes it, with a backoff that doubles from
// ProbeMin to ProbeMax.
type Health uint32

const (
	Up   Health = iota // calls go to Redis
	Down               // no calls; limits use their failure mode; probing
)

var healthNames = [...]string{"up", "down"}

func (h Health) String() string {
	if int(h) < len(healthNames) {
		return healthNames[h]
	}
	return "unknown"
}

// MarshalText writes the state's name.
func (h Health) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// breaker counts consecutive failures and holds the health state. Workers
// and the controller report to it; loops only read the state.
type breaker struct {
	threshold int32
	state     atomic.Uint32 // Health; changed only by set
	failures  atomic.Int32  // consecutive failed calls
	trips     atomic.Uint64 // Up -> Down transitions
	recovered atomic.Uint64 // Down -> Up transitions

	// Owned by the controller goroutine.
	backoff time.Duration
	probeAt int64 // clock when the next probe is due
	seen    Health
}

func (b *breaker) health() Health { return Health(b.state.Load()) }

// failed records a failed call; the one that reaches the threshold marks
// Redis down. Safe for concurrent use.
func (b *breaker) failed() {
	if b.failures.Add(1) >= b.threshold {
		b.set(Up, Down)
	}
}

// succeeded records a call that got an answer. Safe for concurrent use.
func (b *breaker) succeeded() { b.failures.Store(0) }

// set moves the state from one value to another and reports whether it did:
// the one place the state changes.
func (b *breaker) set(from, to Health) bool {
	if !b.state.CompareAndSwap(uint32(from), uint32(to)) {
		return false
	}
	if to == Down {
		b.trips.Add(1)
	} else {
		b.failures.Store(0)
		b.recovered.Add(1)
	}
	return true
}

// probeDue reports, for the controller, whether a probe should run at now,
// starting the backoff when it first sees Redis down.
func (b *breaker) probeDue(now int64, min time.Duration) bool {
	if h := b.health(); h != b.seen {
		b.seen = h
		if h == Down {
			b.backoff = min
			b.probeAt = now + int64(min)
		}
	}
	return b.seen == Down && now >= b.probeAt
}

// probed records a probe's outcome for the controller: success brings Redis
// back up; failure doubles the wait before the next probe.
func (b *breaker) probed(now int64, ok bool, max time.Duration) {
	if ok {
		b.set(Down, Up)
		b.seen = Up
		return
	}
	b.backoff = min(2*b.backoff, max)
	b.probeAt = now + int64(b.backoff)
}
