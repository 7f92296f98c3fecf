// Edit: a table made from another by replacing, appending or removing
// exact-path specs, sharing everything the edit does not touch.

package router

import (
	"hash/maphash"
	"maps"
	"slices"
)

// exactShards is how many maps hold the exact paths. With edits one shard
// is copied per changed path: about 120 entries at 30,000 routes.
const exactShards = 256

// maxGone bounds the removed slots a table carries (Table.gone): past it
// With declines, and the caller's Compile numbers the specs afresh. Match
// finds a spec's index among them by a binary search, 12 steps at most.
const maxGone = 4096

// shardSeed is fixed for the process, so every table agrees on a path's
// shard.
var shardSeed = maphash.MakeSeed()

func shardOf(p string) int { return int(maphash.String(shardSeed, p) & (exactShards - 1)) }

func shardOfBytes(p []byte) int { return int(maphash.Bytes(shardSeed, p) & (exactShards - 1)) }

// Edit is one spec of a table changing, for With.
type Edit struct {
	// Index is the spec's index in the table edited, to replace or
	// remove it. To append a spec it is its index in the table With
	// returns: the edited table's Len, less the specs removed, and up, in
	// order.
	Index int
	// Old is the spec at Index the table was compiled from, when
	// replacing or removing; nil when appending.
	Old *Spec
	// New is the spec at Index from now on.
	New Spec
	// Remove drops the spec at Index (New is not read). Every later spec's
	// index drops by one, as in the list the table is compiled from.
	Remove bool
}

// With returns a table equal, in every Match, to what Compile would build
// from the table's specs with edits applied (the removed ones taken out
// of the list, the others in their order, the appended ones after them),
// sharing with t every structure the edits do not touch; t is unchanged.
// ok is false, and the table nil, when it cannot tell: an edit involves a
// spec that is not a plain exact path, a spec is invalid or duplicates
// another, an Old does not match the table, an index is edited twice,
// appended indexes are not consecutive, or the table carries too many
// removed specs already (maxGone). The caller compiles the whole list
// then, for Compile's own answer and errors. Safe for concurrent use.
func (t *Table) With(edits []Edit) (out *Table, ok bool) {
	nt := *t
	var copied [exactShards]bool
	shard := func(p string) map[string]routeSet {
		i := shardOf(p)
		if !copied[i] {
			nt.exact[i] = maps.Clone(nt.exact[i])
			copied[i] = true
		}
		return nt.exact[i]
	}
	slots := t.n + len(t.gone) // the next slot to append at
	removed, appended := 0, 0
	touched := map[int]bool{}
	for _, e := range edits {
		switch {
		case e.Old == nil && !e.Remove:
			appended++
		case e.Old == nil:
			return nil, false
		case e.Index < 0 || e.Index >= t.n || touched[e.Index]:
			return nil, false
		default:
			touched[e.Index] = true
			if e.Remove {
				removed++
			}
		}
	}
	var gone []int
	// Removals and the old side of replacements first, then additions:
	// two routes trading paths is then no duplicate.
	for _, e := range edits {
		if e.Old == nil {
			continue
		}
		c, err := compileSpec(e.Index, *e.Old)
		if err != nil || c.kind != kindExact {
			return nil, false
		}
		slot := t.slot(e.Index)
		m := shard(c.pattern)
		set := m[c.pattern]
		at := slices.IndexFunc(set, func(cand candidate) bool { return cand.index == slot })
		if at < 0 || set[at].host != c.host || !slices.Equal(set[at].methods, c.methods) {
			return nil, false
		}
		if e.Remove {
			gone = append(gone, slot)
		}
		if len(set) == 1 {
			delete(m, c.pattern)
			continue
		}
		rest := slices.Delete(slices.Clone(set), at, at+1)
		rest.finish()
		m[c.pattern] = rest
	}
	nt.n = t.n - removed
	for _, e := range edits {
		if e.Remove {
			continue
		}
		slot := slots
		if e.Old == nil {
			if e.Index != nt.n {
				return nil, false
			}
			nt.n++
			slots++
		} else {
			slot = t.slot(e.Index)
		}
		c, err := compileSpec(e.Index, e.New)
		if err != nil || c.kind != kindExact {
			return nil, false
		}
		m := shard(c.pattern)
		set := m[c.pattern]
		for _, cand := range set {
			if cand.host == c.host && slices.Equal(cand.methods, c.methods) {
				return nil, false // a duplicate: Compile says of which
			}
		}
		grown := append(slices.Clip(slices.Clone(set)), candidate{host: c.host, methods: c.methods, index: slot})
		grown.finish()
		m[c.pattern] = grown
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		nt.gone = mergeSorted(t.gone, gone)
		// Slots at the top that went need no mapping: the next append
		// takes the first of them again.
		for n := len(nt.gone); n > 0 && nt.gone[n-1] == slots-1; n-- {
			nt.gone, slots = nt.gone[:n-1], slots-1
		}
		if len(nt.gone) == 0 {
			nt.gone = nil
		}
		if len(nt.gone) > maxGone {
			return nil, false
		}
	}
	return &nt, true
}

// slot is the slot of the spec at index i.
func (t *Table) slot(i int) int {
	for _, g := range t.gone { // ascending: each removed slot at or below i moves it up
		if g > i {
			break
		}
		i++
	}
	return i
}

// at is the index of the spec at slot, or slot when it is negative (no
// match). Small enough to inline into Match: a table with no removed
// slot pays one comparison.
func (t *Table) at(slot int) int {
	if len(t.gone) == 0 || slot < 0 {
		return slot
	}
	return t.index(slot)
}

// index is at's search, out of line.
//
//go:noinline
func (t *Table) index(slot int) int {
	below, _ := slices.BinarySearch(t.gone, slot)
	return slot - below
}

// mergeSorted is the ascending union of two ascending lists with no
// element in common, in a new slice.
func mergeSorted(a, b []int) []int {
	out := make([]int, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0] < b[0] {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}
