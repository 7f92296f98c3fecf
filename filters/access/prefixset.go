// prefixSet: prefix lists compiled to sorted address ranges for binary search.

package access

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"

	"github.com/loopgate/loopgate/filters"
)

// prefixSet answers "is this address in any of these prefixes" in
// O(log n): each family's prefixes become [lo, hi] ranges, sorted and merged
// so they are disjoint. Lookups ignore zones and unmap 4in6 addresses, so
// no spelling of an address escapes a list. Immutable once built; safe for
// concurrent use.
type prefixSet struct {
	v4 []span[uint32]
	v6 []span[u128]
}

// span is an inclusive address range.
type span[T any] struct{ lo, hi T }

// u128 is an IPv6 address as a number.
type u128 struct{ hi, lo uint64 }

func (a u128) cmp(b u128) int {
	if c := cmp.Compare(a.hi, b.hi); c != 0 {
		return c
	}
	return cmp.Compare(a.lo, b.lo)
}

func (a u128) next() (u128, bool) { // a+1, and false on overflow
	if a.lo != ^uint64(0) {
		return u128{a.hi, a.lo + 1}, true
	}
	if a.hi != ^uint64(0) {
		return u128{a.hi + 1, 0}, true
	}
	return a, false
}

func addr6(a netip.Addr) u128 {
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

func addr4(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

// newPrefixSet compiles prefixes (invalid ones are skipped).
func newPrefixSet(prefixes []netip.Prefix) prefixSet {
	var s prefixSet
	for _, p := range prefixes {
		if !p.IsValid() {
			continue
		}
		p = filters.NormalizePrefix(p)
		a := p.Addr()
		if a.Is4() {
			lo := addr4(a)
			hostBits := 32 - p.Bits()
			hi := lo | uint32(uint64(1)<<hostBits-1)
			s.v4 = append(s.v4, span[uint32]{lo, hi})
			continue
		}
		lo := addr6(a)
		hi := lo
		if hostBits := 128 - p.Bits(); hostBits >= 64 {
			hi.lo = ^uint64(0)
			hi.hi |= uint64(1)<<(hostBits-64) - 1
		} else {
			hi.lo |= uint64(1)<<hostBits - 1
		}
		s.v6 = append(s.v6, span[u128]{lo, hi})
	}
	s.v4 = mergeSpans(s.v4, cmp.Compare[uint32], func(a uint32) (uint32, bool) { return a + 1, a != ^uint32(0) })
	s.v6 = mergeSpans(s.v6, u128.cmp, u128.next)
	return s
}

// mergeSpans sorts spans and joins overlapping and adjacent ones.
func mergeSpans[T any](spans []span[T], compare func(a, b T) int, next func(T) (T, bool)) []span[T] {
	slices.SortFunc(spans, func(a, b span[T]) int { return compare(a.lo, b.lo) })
	out := spans[:0]
	for _, sp := range spans {
		if n := len(out); n > 0 {
			last := &out[n-1]
			after, ok := next(last.hi)
			if !ok || compare(sp.lo, after) <= 0 { // overlaps or touches
				if compare(sp.hi, last.hi) > 0 {
					last.hi = sp.hi
				}
				continue
			}
		}
		out = append(out, sp)
	}
	return slices.Clip(out)
}

// empty reports whether the set holds no address.
func (s *prefixSet) empty() bool { return len(s.v4) == 0 && len(s.v6) == 0 }

// contains reports whether ip is in the set. It does not allocate.
func (s *prefixSet) contains(ip netip.Addr) bool {
	ip = ip.Unmap()
	switch {
	case ip.Is4():
		return spanHas4(s.v4, addr4(ip))
	case ip.Is6():
		return spanHas(s.v6, addr6(ip), u128.cmp)
	}
	return false
}

// spanHas4 is spanHas for IPv4, with the comparisons written out: every
// request on a route with an IP list asks it, and the generic search calls
// its compare function through a pointer at each step.
func spanHas4(spans []span[uint32], v uint32) bool {
	lo, hi := 0, len(spans) // find the first span with lo > v
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if spans[m].lo <= v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo > 0 && v <= spans[lo-1].hi
}

// spanHas binary-searches disjoint sorted spans for v.
func spanHas[T any](spans []span[T], v T, compare func(a, b T) int) bool {
	lo, hi := 0, len(spans) // find the first span with lo > v
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if compare(spans[m].lo, v) <= 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo > 0 && compare(v, spans[lo-1].hi) <= 0
}

// intersect returns the addresses in both a and b.
func intersect(a, b prefixSet) prefixSet {
	return prefixSet{
		v4: intersectSpans(a.v4, b.v4, cmp.Compare[uint32]),
		v6: intersectSpans(a.v6, b.v6, u128.cmp),
	}
}

// intersectSpans walks two disjoint sorted span lists together.
func intersectSpans[T any](a, b []span[T], compare func(x, y T) int) []span[T] {
	var out []span[T]
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := a[i].lo, a[i].hi
		if compare(b[j].lo, lo) > 0 {
			lo = b[j].lo
		}
		if compare(b[j].hi, hi) < 0 {
			hi = b[j].hi
		}
		if compare(lo, hi) <= 0 {
			out = append(out, span[T]{lo, hi})
		}
		if compare(a[i].hi, b[j].hi) < 0 {
			i++
		} else {
			j++
		}
	}
	return out
}
