// Pool shares: each tenant's (route's) calls in one pool, so that no route
// can hold every connection of a node on a loop and starve the others.

package upstream

import "sync/atomic"

// Tenant is whom a call counts against in a pool's share cap: the engine
// gives each route one, kept across reloads, so that calls started under
// an older configuration count with the newer ones.
type Tenant struct{ id uint32 }

var tenantIDs atomic.Uint32

// NewTenant returns a tenant with an id of its own.
func NewTenant() *Tenant { return &Tenant{id: tenantIDs.Add(1)} }

// shareCap is how many calls a tenant with share percent of max may have
// in the pool at once: at least one, so a small pool still serves it.
func shareCap(maxConns, percent int) int32 { return int32(max(1, maxConns*percent/100)) }

// shares counts each tenant's calls in one pool: waiting for a connection,
// dialing, or attached to one. An open-addressing table with linear
// probing, deleted entries shifted back (no tombstones), so a steady load
// inserts and deletes without allocating; it grows only when more tenants
// have calls in the pool at once than ever before. A tenant alone in the
// pool, the common case (one route per upstream), is counted in one beside
// the table, without a hash or a probe. Owned by the loop.
type shares struct {
	one   shareSlot   // the tenant that entered an empty pool, while it has calls; never also in slots
	slots []shareSlot // power-of-two length, at most half full
	used  int         // tenants counted, in one and in slots
}

type shareSlot struct {
	t *Tenant
	n int32
}

func (s *shares) home(t *Tenant) int { return int(t.id*0x9e3779b1) & (len(s.slots) - 1) }

// find returns t's slot, or the empty slot where it would go.
func (s *shares) find(t *Tenant) int {
	i := s.home(t)
	for s.slots[i].t != nil && s.slots[i].t != t {
		i = (i + 1) & (len(s.slots) - 1)
	}
	return i
}

// enter counts a call of t unless t has cap calls in the pool already.
func (s *shares) enter(t *Tenant, cap int32) bool {
	if s.one.t == t {
		if s.one.n >= cap {
			return false
		}
		s.one.n++
		return true
	}
	if s.used == 0 { // no tenant anywhere: t goes beside the table
		s.one = shareSlot{t: t, n: 1}
		s.used = 1
		return true
	}
	if 2*(s.used+1) > len(s.slots) {
		s.grow()
	}
	i := s.find(t)
	sl := &s.slots[i]
	if sl.t == nil {
		sl.t = t
		s.used++
	} else if sl.n >= cap {
		return false
	}
	sl.n++
	return true
}

// leave uncounts a call of t; a tenant with no call left frees its slot.
func (s *shares) leave(t *Tenant) {
	if s.one.t == t {
		if s.one.n--; s.one.n == 0 {
			s.one = shareSlot{}
			s.used--
		}
		return
	}
	i := s.find(t)
	if s.slots[i].t == nil {
		return // cannot happen: leave follows a successful enter
	}
	if s.slots[i].n--; s.slots[i].n > 0 {
		return
	}
	s.used--
	// Backward-shift deletion: move later entries of the probe run into
	// the hole when their home allows it, so lookups never need markers.
	mask := len(s.slots) - 1
	for j := (i + 1) & mask; s.slots[j].t != nil; j = (j + 1) & mask {
		if h := s.home(s.slots[j].t); (j-h)&mask >= (j-i)&mask {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = shareSlot{}
}

func (s *shares) grow() {
	old := s.slots
	s.slots = make([]shareSlot, max(8, 2*len(old)))
	for _, sl := range old {
		if sl.t != nil {
			s.slots[s.find(sl.t)] = sl
		}
	}
}
