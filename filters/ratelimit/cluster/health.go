// The Redis health breaker: when to stop calling Redis, and when to try
// again.

package cluster

import (
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/pool/alert"
)

// Health is whether this node is calling Redis.
//
//	Up   --FailureThreshold consecutive failed calls-->                  Down
//	Up   --as many, the last a timeout, and a confirming heartbeat
//	       finds no call started after it answered-->                   Down
//	Down --a probe succeeds-->                                           Up (ramping)
//
// rueidis dials again on every call while Redis is unreachable and has no
// backoff of its own; Down is what stops that. While Down no worker calls
// Redis; only the controller probes it, with a backoff that doubles from
// ProbeMin to ProbeMax.
//
// Only Redis's failures count. A call whose failure Redis has already
// contradicted, because a call started after it got an answer, is not
// counted. A timeout is not proof on its own: when this process is short
// of CPU (a saturating load), replies Redis sent in time are read after
// the deadline. So a run of failures that ends in a timeout does not trip
// the breaker at once: the controller sends a heartbeat, and trips it only
// if neither that nor any other call started after the timed-out one got
// an answer. A Redis that stopped answering (a blackhole) costs one more
// deadline and a tick before the trip; a refused or reset connection trips
// at once.
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
	redis     string        // the addresses, the subject of its alerts
	state     atomic.Uint32 // Health; changed only by set
	failures  atomic.Int32  // consecutive failed calls
	trips     atomic.Uint64 // Up -> Down transitions
	recovered atomic.Uint64 // Down -> Up transitions
	confirmed atomic.Uint64 // runs of timeouts the confirming heartbeat found Redis answering through

	// lastOK is the start (nanotime) of the latest-started call that got
	// an answer; confirmFrom, when not 0, the start of the timed-out call
	// that reached the threshold, waiting for the controller's verdict.
	lastOK      atomic.Int64
	confirmFrom atomic.Int64

	// Owned by the controller goroutine.
	backoff time.Duration
	probeAt int64 // clock when the next probe is due
	seen    Health
}

func (b *breaker) health() Health { return Health(b.state.Load()) }

// failed records a call started at start (nanotime) that failed, timeout
// saying whether it ran out of time. A failure a later-started call's
// answer has contradicted is not counted. The one that reaches the
// threshold marks Redis down, or, when it is a timeout, asks the
// controller to confirm (see Health). Safe for concurrent use.
func (b *breaker) failed(start int64, timeout bool) {
	if b.lastOK.Load() > start || b.failures.Add(1) < b.threshold {
		return
	}
	if timeout {
		b.confirmFrom.CompareAndSwap(0, start)
		return
	}
	b.set(Up, Down)
}

// succeeded records that a call started at start got an answer. Safe for
// concurrent use.
func (b *breaker) succeeded(start int64) {
	for {
		last := b.lastOK.Load()
		if start <= last || b.lastOK.CompareAndSwap(last, start) {
			break
		}
	}
	b.failures.Store(0)
}

// confirmDue returns the start of the timeout awaiting confirmation, or 0.
func (b *breaker) confirmDue() int64 { return b.confirmFrom.Load() }

// confirm gives the controller's verdict on the timeout that started at
// from, after its confirming heartbeat: Redis is down unless some call
// started after from got an answer. Owned by the controller.
func (b *breaker) confirm(from int64) {
	if !b.confirmFrom.CompareAndSwap(from, 0) {
		return
	}
	if b.lastOK.Load() > from {
		b.failures.Store(0)
		b.confirmed.Add(1)
		return
	}
	b.set(Up, Down)
}

// set moves the state from one value to another and reports whether it did:
// the one place the state changes.
func (b *breaker) set(from, to Health) bool {
	if !b.state.CompareAndSwap(uint32(from), uint32(to)) {
		return false
	}
	b.confirmFrom.Store(0)
	if to == Down {
		b.trips.Add(1)
		alert.Raise(alert.Event{Kind: alert.RedisLost, Subject: b.redis,
			Message: "redis " + b.redis + " lost: the rate limits use their failure mode (shadow quota)"})
	} else {
		b.failures.Store(0)
		b.recovered.Add(1)
		alert.Raise(alert.Event{Kind: alert.RedisLost, Subject: b.redis, Resolved: true,
			Message: "redis " + b.redis + " answers again"})
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
