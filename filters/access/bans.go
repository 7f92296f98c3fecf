// Bans: runtime IP bans with a TTL, read lock-free by every loop.

package access

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/filters"
)

// DefaultMaxBans is the ban capacity NewBans uses for max <= 0.
const DefaultMaxBans = 100_000

// ErrTooManyBans is returned by Ban when the set is full of unexpired bans.
var ErrTooManyBans = errors.New("access: too many bans")

// Bans is a set of banned prefixes, each with an expiry. Loops read it
// without locks or waiting: every change builds a new immutable snapshot and
// publishes it atomically. Writers (the admin API, automatic banning) are
// serialised by a mutex among themselves and pay O(bans) per change, which
// also prunes expired bans. A Bans is safe for concurrent use.
type Bans struct {
	max   int
	clock func() time.Time // time.Now; tests replace it

	mu   sync.Mutex                  // held by writers while they build the next snapshot
	snap atomic.Pointer[banSnapshot] // current snapshot; never nil, never modified once stored
}

// banSnapshot is one immutable state of the set. A lookup masks the address
// to each prefix length present and probes the map, so it costs one map
// probe per distinct length (at most 33 for IPv4, 129 for IPv6), however
// many bans there are.
type banSnapshot struct {
	until map[netip.Prefix]int64 // masked prefix -> expiry, Unix nanoseconds
	bits4 []int                  // distinct IPv4 prefix lengths, longest first
	bits6 []int                  // distinct IPv6 prefix lengths, longest first
}

// Ban is one entry as List reports it.
type Ban struct {
	Prefix netip.Prefix
	Until  time.Time
}

// NewBans returns an empty set holding at most max bans (DefaultMaxBans for
// max <= 0).
func NewBans(max int) *Bans {
	if max <= 0 {
		max = DefaultMaxBans
	}
	b := &Bans{max: max, clock: time.Now}
	b.snap.Store(&banSnapshot{})
	return b
}

// Ban bans p (a CIDR or a single-address prefix) for ttl from now; banning
// an already banned prefix sets its new expiry. It fails on an invalid
// prefix, a ttl <= 0, or ErrTooManyBans. Safe for concurrent use; it may
// wait for other writers, never for readers.
func (b *Bans) Ban(p netip.Prefix, ttl time.Duration) error {
	if !p.IsValid() || p.Addr().Zone() != "" {
		return fmt.Errorf("access: cannot ban invalid prefix %v", p)
	}
	if ttl <= 0 {
		return fmt.Errorf("access: ban of %v needs a positive TTL, not %v", p, ttl)
	}
	p = filters.NormalizePrefix(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock()
	next := b.live(now)
	if _, present := next[p]; !present && len(next) >= b.max {
		return fmt.Errorf("%w: %d unexpired bans", ErrTooManyBans, len(next))
	}
	next[p] = now.Add(ttl).UnixNano()
	b.snap.Store(newBanSnapshot(next))
	return nil
}

// Unban lifts the ban on exactly p (not on prefixes inside or around it)
// and reports whether p was banned. Safe for concurrent use.
func (b *Bans) Unban(p netip.Prefix) bool {
	if !p.IsValid() {
		return false
	}
	p = filters.NormalizePrefix(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	next := b.live(b.clock())
	_, present := next[p]
	delete(next, p)
	b.snap.Store(newBanSnapshot(next))
	return present
}

// Replace makes set (prefix -> the unix nanoseconds its ban lapses) the
// bans in force, dropping every other: a cluster's, read whole from
// Redis, or those the admin state kept across a restart. Past the set's
// capacity the rest are dropped. Safe for concurrent use.
func (b *Bans) Replace(set map[netip.Prefix]int64) {
	next := make(map[netip.Prefix]int64, min(len(set), b.max))
	for p, until := range set {
		if !p.IsValid() || p.Addr().Zone() != "" {
			continue
		}
		if len(next) == b.max {
			break
		}
		next[filters.NormalizePrefix(p)] = until
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.snap.Store(newBanSnapshot(next))
}

// Snapshot returns the bans unexpired now, each prefix with the unix
// nanoseconds it lapses: a copy, the caller's to keep. Safe for concurrent
// use.
func (b *Bans) Snapshot() map[netip.Prefix]int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live(b.clock())
}

// Banned reports whether ip is inside a ban that has not expired at now.
// It never blocks or allocates; safe for concurrent use.
func (b *Bans) Banned(ip netip.Addr, now time.Time) bool {
	s := b.snap.Load()
	if len(s.until) == 0 {
		return false
	}
	return s.banned(ip, now.UnixNano())
}

// bannedNow is Banned at the clock's time, read only when there are bans:
// the common empty set costs one atomic load.
func (b *Bans) bannedNow(ip netip.Addr) bool {
	s := b.snap.Load()
	if len(s.until) == 0 {
		return false
	}
	return s.banned(ip, b.clock().UnixNano())
}

// List returns the bans unexpired at now, most specific first. Safe for
// concurrent use.
func (b *Bans) List(now time.Time) []Ban {
	s := b.snap.Load()
	out := make([]Ban, 0, len(s.until))
	for p, until := range s.until {
		if until > now.UnixNano() {
			out = append(out, Ban{Prefix: p, Until: time.Unix(0, until)})
		}
	}
	slices.SortFunc(out, func(x, y Ban) int {
		if c := cmp.Compare(y.Prefix.Bits(), x.Prefix.Bits()); c != 0 {
			return c
		}
		return x.Prefix.Addr().Compare(y.Prefix.Addr())
	})
	return out
}

// live copies the current bans minus those expired at now. b.mu must be held.
func (b *Bans) live(now time.Time) map[netip.Prefix]int64 {
	cur := b.snap.Load().until
	next := make(map[netip.Prefix]int64, len(cur)+1)
	for p, until := range cur {
		if until > now.UnixNano() {
			next[p] = until
		}
	}
	return next
}

func newBanSnapshot(until map[netip.Prefix]int64) *banSnapshot {
	var seen4 [33]bool
	var seen6 [129]bool
	for p := range until {
		if p.Addr().Is4() {
			seen4[p.Bits()] = true
		} else {
			seen6[p.Bits()] = true
		}
	}
	s := &banSnapshot{until: until}
	for bits := 128; bits >= 0; bits-- {
		if bits <= 32 && seen4[bits] {
			s.bits4 = append(s.bits4, bits)
		}
		if seen6[bits] {
			s.bits6 = append(s.bits6, bits)
		}
	}
	return s
}

func (s *banSnapshot) banned(ip netip.Addr, now int64) bool {
	ip = ip.Unmap().WithZone("")
	lens := s.bits6
	if ip.Is4() {
		lens = s.bits4
	} else if !ip.Is6() {
		return false
	}
	for _, bits := range lens {
		p, _ := ip.Prefix(bits)
		if until, ok := s.until[p]; ok && until > now {
			return true
		}
	}
	return false
}
