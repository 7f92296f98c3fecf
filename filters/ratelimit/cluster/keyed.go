// KeyedLimit: a cluster-wide limit per client key (ip, user, tenant, a
// header's value), with cold keys decided locally and a bounded set of hot
// keys leased through Redis.

package cluster

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit"
)

// DefaultHotKeys is a KeyedLimit's hot set capacity when KeyedSpec.HotKeys
// is 0: about half a MiB of lease state when full (a hot key's Limit is
// about 450 bytes with its strings), and 8 KiB of slots.
const DefaultHotKeys = 1024

// maxHotKeys bounds KeyedSpec.HotKeys: the controller walks the whole set
// every tick.
const maxHotKeys = 1 << 16

// hotGroup is the number of slots a hot key may live in, as in
// ratelimit.Keys: its hash picks the group.
const hotGroup = 8

// KeyedSpec describes a cluster-wide limit per client key. The embedded
// LimitSpec is each key's limit: every key gets Rate and Burst across the
// cluster.
type KeyedSpec struct {
	LimitSpec
	// MaxKeys bounds the table of cold keys' local buckets
	// (ratelimit.NewKeys). Default ratelimit.DefaultMaxKeys.
	MaxKeys int
	// HotKeys bounds the hot set: the keys leased through Redis at once.
	// Default DefaultHotKeys; rounded up to a power of two, at least 8.
	HotKeys int
	// Idle is how long a cold key's bucket must have been full before the
	// table's Sweep drops it. Default ratelimit.DefaultIdle.
	Idle time.Duration
}

func (s *KeyedSpec) validate() error {
	if err := s.LimitSpec.validate(); err != nil {
		return err
	}
	if s.HotKeys < 0 || s.HotKeys > maxHotKeys {
		return fmt.Errorf("cluster: limit %q: hot keys %d is not in [0, %d]", s.Name, s.HotKeys, maxHotKeys)
	}
	return nil
}

// KeyedLimit is one cluster-wide limit per client key, as this node
// applies it. Every key starts cold: it is decided on this node alone, in a
// local GCRA bucket at the cold share (Rate and Burst divided by the
// effective node count, the shadow quota), with no Redis call. A key whose
// cold bucket refuses it has more demand here than its share, and becomes
// hot: it gets a Limit of its own on a Redis bucket of its own
// (KeyPrefix + Name + ":" + a hash of the key), leased like any cluster
// limit, so it can have the whole cluster rate. The hot set is bounded;
// a hot key idle for a second hands its lease back and goes cold again.
//
// Every loop calls Take; nothing in it blocks, and a hot key served from
// its lease allocates nothing. Safe for concurrent use.
type KeyedLimit struct {
	c      *Cluster
	spec   KeyedSpec
	prefix string // KeyPrefix + Name + ":"

	cold   *ratelimit.Keys                 // cold keys' buckets, by key
	shadow atomic.Pointer[ratelimit.Limit] // the cold share; set by the controller

	hot    []atomic.Pointer[hotKey] // groups of hotGroup; nil is a free slot
	mask   uint64                   // groups - 1
	hotLen atomic.Int64

	promotions, demotions, hotFull atomic.Uint64
	coldGrants, coldRejections     atomic.Uint64
	openGrants, closedRefusals     atomic.Uint64 // cold keys while Redis is down, open and closed modes

	// retired sums the counters of hot keys that went cold, so Status
	// still counts their decisions. Written by the controller.
	retired limitCounters

	closed atomic.Bool
}

// hotKey is one hot key's cluster limit. Its hash never changes; the
// table key is the cold table's hash of the client key.
type hotKey struct {
	hash uint64
	Limit
}

// limitCounters are the counters Status sums over a KeyedLimit's hot keys.
type limitCounters struct {
	grants, rejections, unavailable, degraded, leases, leased, returned atomic.Uint64
}

func (lc *limitCounters) add(l *Limit) {
	lc.grants.Add(l.grants.Load())
	lc.rejections.Add(l.rejections.Load())
	lc.unavailable.Add(l.unavailable.Load())
	lc.degraded.Add(l.degraded.Load())
	lc.leases.Add(l.leases.Load())
	lc.leased.Add(l.leased.Load())
	lc.returned.Add(l.returned.Load())
}

// NewKeyedLimit adds a per-key cluster limit to c. Call it off the loops.
func (c *Cluster) NewKeyedLimit(spec KeyedSpec) (*KeyedLimit, error) {
	spec.withDefaults()
	if spec.HotKeys == 0 {
		spec.HotKeys = DefaultHotKeys
	}
	if err := spec.validate(); err != nil {
		return nil, err
	}
	groups := uint64(1)
	for groups*hotGroup < uint64(spec.HotKeys) {
		groups <<= 1
	}
	k := &KeyedLimit{
		c:      c,
		spec:   spec,
		prefix: c.opt.KeyPrefix + spec.Name + ":",
		cold:   ratelimit.NewKeys(spec.MaxKeys, spec.Idle),
		hot:    make([]atomic.Pointer[hotKey], groups*hotGroup),
		mask:   groups - 1,
	}
	k.setShadow(c.effective.Load())

	c.limitsMu.Lock()
	defer c.limitsMu.Unlock()
	next := append(append([]*KeyedLimit{}, *c.keyed.Load()...), k)
	c.keyed.Store(&next)
	return k, nil
}

// Spec is the limit as NewKeyedLimit built it, defaults applied.
func (k *KeyedLimit) Spec() KeyedSpec { return k.spec }

// Keys is the cold keys' table, for the owner's sweep and status.
func (k *KeyedLimit) Keys() *ratelimit.Keys { return k.cold }

// Close removes the limit from its Cluster and hands every hot key's lease
// back to Redis. Take still works after Close: cold keys as before, hot
// keys by the failure mode. Call it off the loops.
func (k *KeyedLimit) Close() {
	if k.closed.Swap(true) {
		return
	}
	c := k.c
	c.limitsMu.Lock()
	var next []*KeyedLimit
	for _, o := range *c.keyed.Load() {
		if o != k {
			next = append(next, o)
		}
	}
	c.keyed.Store(&next)
	c.limitsMu.Unlock()
	for i := range k.hot {
		if e := k.hot[i].Load(); e != nil {
			e.Close()
		}
	}
}

// Take decides whether n tokens may be taken for key at now, like
// Limit.Take: it answers at once, or answers Pending and calls done once,
// on a worker, with the answer. key is only read. A hot key is its own
// Limit's Take. A cold key is decided at once: in its local bucket at the
// cold share; while Redis is down, by the failure mode (in shadow mode the
// same bucket, the same share). A cold key the bucket refuses becomes hot,
// while Redis is up and the hot set has room, and its Limit decides.
// Safe for concurrent use; never blocks.
func (k *KeyedLimit) Take(now int64, key []byte, n int64, done func(Decision)) Decision {
	h := k.cold.Hash(key)
	if e := k.findHot(h); e != nil {
		return e.Take(now, n, done)
	}
	up := k.c.br.health() == Up && !k.closed.Load()
	if !up {
		switch k.spec.OnFailure {
		case FailOpen:
			k.openGrants.Add(1)
			return Decision{Verdict: Allow}
		case FailClosed:
			k.closedRefusals.Add(1)
			return Decision{Verdict: Unavailable, RetryAfter: k.c.opt.ProbeMin}
		}
	}
	d := k.cold.AllowHash(*k.shadow.Load(), h, now, n)
	if d.Allowed {
		k.coldGrants.Add(1)
		return Decision{Verdict: Allow, Remaining: d.Remaining, Reset: d.Reset}
	}
	if up {
		if e := k.promote(h, key); e != nil {
			return e.Take(now, n, done)
		}
	}
	k.coldRejections.Add(1)
	return Decision{Verdict: Deny, Remaining: d.Remaining, Reset: d.Reset, RetryAfter: d.RetryAfter}
}

// Return gives back the tokens an Allow took from a hot key's lease, as
// Limit.Return. A cold key's bucket has no refund, as a local limit's.
func (k *KeyedLimit) Return(d Decision) {
	if d.lim != nil {
		d.lim.Return(d)
	}
}

// group is the slots of h's group.
func (k *KeyedLimit) group(h uint64) []atomic.Pointer[hotKey] {
	base := (h & k.mask) * hotGroup
	return k.hot[base : base+hotGroup : base+hotGroup]
}

// findHot returns h's hot key, or nil when h is cold.
func (k *KeyedLimit) findHot(h uint64) *hotKey {
	g := k.group(h)
	for i := range g {
		if e := g[i].Load(); e != nil && e.hash == h {
			return e
		}
	}
	return nil
}

// promote makes h hot and returns its hot key, or nil when its group of
// the hot set is full: the key then stays cold, decided at the cold share,
// until a hot key of its group goes idle. It allocates the key's Limit
// (once per promotion, never for a key already hot). Two loops promoting
// the same key at once may both insert it; the one in the lower slot
// stays, and the other is dropped before it is used for long (any tokens
// it was granted are handed back). Lock-free.
func (k *KeyedLimit) promote(h uint64, key []byte) *hotKey {
	g := k.group(h)
	var fresh *hotKey
	for {
		free := -1
		for i := range g {
			e := g[i].Load()
			if e == nil {
				if free < 0 {
					free = i
				}
				continue
			}
			if e.hash == h {
				return e
			}
		}
		if free < 0 {
			k.hotFull.Add(1)
			return nil
		}
		if fresh == nil {
			fresh = &hotKey{hash: h}
			k.c.initLimit(&fresh.Limit, k.spec.LimitSpec, k.prefix+redisKey(key))
			// The cold bucket just refused: this node spent the key's
			// cold burst. Its first Redis take pays for it, so the key
			// does not get that burst twice.
			fresh.debt.Store(k.shadow.Load().Burst())
		}
		if !g[free].CompareAndSwap(nil, fresh) {
			continue
		}
		k.hotLen.Add(1)
		for i := range free {
			if e := g[i].Load(); e != nil && e.hash == h {
				// A twin won the lower slot: use it, drop ours.
				k.drop(&g[free], fresh)
				return e
			}
		}
		k.promotions.Add(1)
		return fresh
	}
}

// drop takes e out of slot if it is still there and hands its lease back.
// A loop that still holds e may take from it meanwhile: tokens Redis
// granted it count as spent either way, and a lease it receives after
// this (at most one) is never handed back, so the key may get up to that
// many fewer tokens until its Redis bucket refills; never more.
func (k *KeyedLimit) drop(slot *atomic.Pointer[hotKey], e *hotKey) bool {
	if !slot.CompareAndSwap(e, nil) {
		return false
	}
	k.hotLen.Add(-1)
	if h := e.held.Swap(0); h > 0 && !k.c.submit(job{kind: jobGiveBack, lim: &e.Limit, n: h}) {
		e.held.Add(h)
	}
	return true
}

// redisKey is the suffix of a key's Redis bucket: 128 bits of SHA-256 of
// the key, so a long header value costs no more than a short one, every
// node names the same key alike, and a client cannot aim its key at
// another's bucket.
func redisKey(key []byte) string {
	sum := sha256.Sum256(key)
	return base64.RawURLEncoding.EncodeToString(sum[:16])
}

// setShadow sets the cold share for eff nodes, as Limit.setShadow.
func (k *KeyedLimit) setShadow(eff int64) {
	want, err := ratelimit.NewLimit(k.spec.Rate/float64(eff), max(1, k.spec.Burst/eff))
	if err != nil {
		return
	}
	if cur := k.shadow.Load(); cur == nil || *cur != want {
		k.shadow.Store(&want)
	}
}

// adjust is the controller's tick: the cold share follows the node count,
// each hot key's lease is adjusted as a Limit's, and a hot key idle for a
// second whose lease has gone back to Redis goes cold (its slot freed for
// another). Owned by the controller goroutine.
func (k *KeyedLimit) adjust(now int64) {
	k.setShadow(k.c.effective.Load())
	for i := range k.hot {
		e := k.hot[i].Load()
		if e == nil {
			continue
		}
		e.adjust(now)
		if now-e.lastActiveAt >= int64(idleAfter) && e.held.Load() == 0 && e.reserved.Load() == 0 &&
			!e.refilling.Load() && k.drop(&k.hot[i], e) {
			k.demotions.Add(1)
			k.retired.add(&e.Limit)
		}
	}
}

// giveBackHeld hands every hot key's lease back, at Cluster.Close.
func (k *KeyedLimit) giveBackHeld(cl *redisClient) {
	for i := range k.hot {
		if e := k.hot[i].Load(); e != nil {
			e.giveBackHeld(cl)
		}
	}
}

// KeyedStatus is a KeyedLimit's state on this node.
type KeyedStatus struct {
	LimitStatus // each key's limit; the counters sum every key, hot and cold

	ColdRate       float64             `json:"cold_rate"` // a cold key's local share, tokens a second
	Hot            int                 `json:"hot"`       // hot keys now
	HotCap         int                 `json:"hot_cap"`   // hot keys the set can hold
	Promotions     uint64              `json:"promotions"`
	Demotions      uint64              `json:"demotions"`
	HotFull        uint64              `json:"hot_full"`        // promotions refused: the key's group was full; it stayed cold
	ColdGrants     uint64              `json:"cold_grants"`     // requests allowed by a cold key's local bucket
	ColdRejections uint64              `json:"cold_rejections"` // requests a cold key's bucket refused and that could not go hot
	Cold           ratelimit.KeysStats `json:"cold"`
}

// Status reads the limit's state. Safe for concurrent use; off the loops.
func (k *KeyedLimit) Status() KeyedStatus {
	shadow := k.shadow.Load().PerSecond()
	s := KeyedStatus{
		LimitStatus: LimitStatus{
			Name: k.spec.Name, Rate: k.spec.Rate, Burst: k.spec.Burst, OnFailure: k.spec.OnFailure,
			Quota: k.spec.Rate, ShadowRate: shadow,
			Grants:      k.retired.grants.Load() + k.coldGrants.Load() + k.openGrants.Load(),
			Rejections:  k.retired.rejections.Load() + k.coldRejections.Load(),
			Unavailable: k.retired.unavailable.Load() + k.closedRefusals.Load(),
			Degraded:    k.retired.degraded.Load() + k.openGrants.Load() + k.closedRefusals.Load(),
			Leases:      k.retired.leases.Load(),
			Leased:      k.retired.leased.Load(),
			Returned:    k.retired.returned.Load(),
		},
		ColdRate:       shadow,
		Hot:            int(k.hotLen.Load()),
		HotCap:         len(k.hot),
		Promotions:     k.promotions.Load(),
		Demotions:      k.demotions.Load(),
		HotFull:        k.hotFull.Load(),
		ColdGrants:     k.coldGrants.Load(),
		ColdRejections: k.coldRejections.Load(),
		Cold:           k.cold.Stats(),
	}
	for i := range k.hot {
		e := k.hot[i].Load()
		if e == nil {
			continue
		}
		s.Grants += e.grants.Load()
		s.Rejections += e.rejections.Load()
		s.Unavailable += e.unavailable.Load()
		s.Degraded += e.degraded.Load()
		s.Leases += e.leases.Load()
		s.Leased += e.leased.Load()
		s.Returned += e.returned.Load()
		s.Held += e.held.Load()
		s.LeaseSize += e.size.Load()
	}
	if k.c.br.health() != Up {
		switch k.spec.OnFailure {
		case FailOpen:
			s.Quota, s.Unlimited = 0, true
		case FailClosed:
			s.Quota = 0
		default:
			s.Quota = shadow
		}
	}
	return s
}
