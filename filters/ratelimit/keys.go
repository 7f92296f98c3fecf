// Keys: a bounded, lock-free table of buckets by key, with eviction.

package ratelimit

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
	"time"
)

// DefaultMaxKeys is the capacity NewKeys uses for max <= 0: about 3 MiB
// when full (an 8-byte slot and a 16-byte entry per key).
const DefaultMaxKeys = 1 << 17

// DefaultIdle is how long a bucket must have been full before Sweep drops
// it, when NewKeys is given idle <= 0.
const DefaultIdle = time.Minute

// groupSize is the number of slots a key may live in: one cache line of
// pointers. A key's hash picks the group; within it the key takes any slot.
const groupSize = 8

// Keys is a table of GCRA buckets by key for one limit, shared by every
// loop. Its capacity is fixed at construction, so its memory is bounded
// whatever keys clients send. Every operation is lock-free: a loop may
// retry a compare-and-swap another loop won, and never waits for one.
//
// Keys are identified by a 64-bit hash under a per-table random seed, so
// clients cannot aim keys at one group; two keys whose hashes collide
// (about one chance in 10^7 among a million keys) share a bucket, which
// only ever limits them more.
//
// A Keys is safe for concurrent use.
type Keys struct {
	seed  maphash.Seed
	slots []atomic.Pointer[entry] // groups of groupSize; nil is a free slot
	mask  uint64                  // number of groups - 1
	idle  int64                   // nanoseconds a bucket must stay full before Sweep drops it

	live      atomic.Int64  // non-nil slots
	inserts   atomic.Uint64 // keys added
	evictions atomic.Uint64 // keys dropped to make room for another
	swept     atomic.Uint64 // idle keys dropped by Sweep
}

// entry is one key's bucket. Its hash never changes; once the bucket is
// dead the entry is out of use and is unlinked from its slot by whoever
// sees it first.
type entry struct {
	hash uint64
	Bucket
}

// KeysStats are a table's counters, for metrics and tests.
type KeysStats struct {
	Len       int    // keys held now
	Cap       int    // keys the table can hold
	Inserts   uint64 // keys added, ever
	Evictions uint64 // keys dropped to make room, ever
	Swept     uint64 // idle keys dropped by Sweep, ever
}

// NewKeys returns an empty table holding at most max keys (DefaultMaxKeys
// for max <= 0), rounded up to a power of two, at least 8. Sweep drops
// buckets that have been full for idle (DefaultIdle for idle <= 0). The
// slot array is allocated here, once: 8 bytes per key of capacity.
func NewKeys(max int, idle time.Duration) *Keys {
	if max <= 0 {
		max = DefaultMaxKeys
	}
	if idle <= 0 {
		idle = DefaultIdle
	}
	groups := uint64(1) << bits.Len(uint(max-1)/groupSize)
	return &Keys{
		seed:  maphash.MakeSeed(),
		slots: make([]atomic.Pointer[entry], groups*groupSize),
		mask:  groups - 1,
		idle:  int64(idle),
	}
}

// Allow is Bucket.Allow on key's bucket, adding the key (and evicting
// another if its group is full) when it is new. The key is only read.
// Lock-free; no allocation for a key already held, one 16-byte entry for a
// new one.
func (k *Keys) Allow(l Limit, key []byte, now, n int64) Decision {
	return k.allow(l, maphash.Bytes(k.seed, key), now, n)
}

// AllowString is Allow for a key held as a string.
func (k *Keys) AllowString(l Limit, key string, now, n int64) Decision {
	return k.allow(l, maphash.String(k.seed, key), now, n)
}

// Hash is the key's hash under the table's seed, for AllowHash: a caller
// that needs the hash for something else as well computes it once.
func (k *Keys) Hash(key []byte) uint64 { return maphash.Bytes(k.seed, key) }

// AllowHash is Allow for a key whose Hash the caller already has.
func (k *Keys) AllowHash(l Limit, h uint64, now, n int64) Decision { return k.allow(l, h, now, n) }

func (k *Keys) allow(l Limit, h uint64, now, n int64) Decision {
	for {
		if d, ok := k.find(h).allow(l, now, n); ok {
			return d
		}
		// Evicted between finding and deciding: find it again.
	}
}

// find returns the live entry for h, adding one if there is none. When the
// group is full it evicts the entry with the smallest TAT: the fullest
// bucket, whose loss gives its key the fewest tokens back.
func (k *Keys) find(h uint64) *entry {
	base := (h & k.mask) * groupSize
	group := k.slots[base : base+groupSize : base+groupSize]
	var fresh *entry
	for {
		free := -1
		for i := range group {
			e := group[i].Load()
			switch {
			case e == nil:
			case e.hash != h:
				continue
			case e.tat.Load() != dead:
				return e
			default:
				k.unlink(&group[i], e)
			}
			if free < 0 {
				free = i
			}
		}
		if fresh == nil {
			fresh = &entry{hash: h}
		}
		if free >= 0 {
			if group[free].CompareAndSwap(nil, fresh) {
				k.live.Add(1)
				k.inserts.Add(1)
				return fresh
			}
			continue
		}
		if k.evict(group, fresh) {
			return fresh
		}
	}
}

// evict replaces the entry with the smallest TAT in a full group with
// fresh. It reports false, having changed nothing or only unlinked a dead
// entry, when another loop changed the group first; the caller looks again.
func (k *Keys) evict(group []atomic.Pointer[entry], fresh *entry) bool {
	victim := -1
	var victimTAT int64
	var victimEntry *entry
	for i := range group {
		e := group[i].Load()
		if e == nil {
			return false
		}
		tat := e.tat.Load()
		if tat == dead {
			k.unlink(&group[i], e)
			return false
		}
		if victim < 0 || tat < victimTAT {
			victim, victimTAT, victimEntry = i, tat, e
		}
	}
	// Kill the victim first, so that no loop still holding it can take
	// tokens from a bucket that is about to be replaced.
	if !victimEntry.tat.CompareAndSwap(victimTAT, dead) {
		return false
	}
	if !group[victim].CompareAndSwap(victimEntry, fresh) {
		return false // another loop unlinked the dead victim first
	}
	k.evictions.Add(1)
	k.inserts.Add(1)
	return true
}

// unlink empties slot if it still holds the dead entry e.
func (k *Keys) unlink(slot *atomic.Pointer[entry], e *entry) {
	if slot.CompareAndSwap(e, nil) {
		k.live.Add(-1)
	}
}

// Sweep drops every bucket that has been full for the table's idle time at
// now, and returns how many it dropped. It walks the whole table (a few
// milliseconds per million slots), so the owner runs it off the loops, on
// a timer; loops carry on deciding meanwhile. Safe for concurrent use.
func (k *Keys) Sweep(now int64) int {
	dropped := 0
	for i := range k.slots {
		slot := &k.slots[i]
		e := slot.Load()
		if e == nil {
			continue
		}
		tat := e.tat.Load()
		if tat != dead && now-tat < k.idle {
			continue
		}
		if tat == dead || e.tat.CompareAndSwap(tat, dead) {
			if slot.CompareAndSwap(e, nil) {
				k.live.Add(-1)
				if tat != dead {
					dropped++
				}
			}
		}
	}
	k.swept.Add(uint64(dropped))
	return dropped
}

// Len is the number of keys held. Safe for concurrent use.
func (k *Keys) Len() int { return int(k.live.Load()) }

// Cap is the number of keys the table can hold.
func (k *Keys) Cap() int { return len(k.slots) }

// Stats reads the table's counters. Safe for concurrent use.
func (k *Keys) Stats() KeysStats {
	return KeysStats{
		Len:       k.Len(),
		Cap:       k.Cap(),
		Inserts:   k.inserts.Load(),
		Evictions: k.evictions.Load(),
		Swept:     k.swept.Load(),
	}
}
