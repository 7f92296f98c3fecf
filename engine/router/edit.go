// Edit: a table made from another by replacing, appending or removing the
// last exact-path specs, sharing everything the edit does not touch.

package router

import (
	"hash/maphash"
	"maps"
	"slices"
)

// exactShards is how many maps hold the exact paths. With edits one shard
// is copied per changed path: about 120 entries at 30,000 routes.
const exactShards = 256

// shardSeed is fixed for the process, so every table agrees on a path's
// shard.
var shardSeed = maphash.MakeSeed()

func shardOf(p string) int { return int(maphash.String(shardSeed, p) & (exactShards - 1)) }

func shardOfBytes(p []byte) int { return int(maphash.Bytes(shardSeed, p) & (exactShards - 1)) }

// Edit is one spec of a table changing, for With.
type Edit struct {
	// Index is the spec's index: below the table's Len to replace a spec,
	// or Len and up, in order, to append one.
	Index int
	// Old is the spec at Index the table was compiled from, when
	// replacing or removing; nil when appending.
	Old *Spec
	// New is the spec at Index from now on.
	New Spec
	// Remove drops the spec at Index (New is not read). Only the last
	// specs can go, from the last one down (Len-1, Len-2, ...), so that
	// no other spec's index moves: a route the API created, appended, and
	// deleted again.
	Remove bool
}

// With returns a table equal to what Compile would build from the table's
// specs with edits applied, sharing with t every structure the edits do
// not touch; t is unchanged. ok is false, and the table nil, when it
// cannot tell: an edit involves a spec that is not a plain exact path, a
// spec is invalid or duplicates another, an Old does not match the table,
// or appended indexes are not consecutive. The caller compiles the whole
// list then, for Compile's own answer and errors. Safe for concurrent
// use.
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
	// The specs left once the last ones are removed: replaced ones must be
	// among them, appended ones follow them.
	kept := t.n
	for _, e := range edits {
		if e.Remove {
			if e.Old == nil || e.Index != kept-1 {
				return nil, false
			}
			kept--
		}
	}
	nt.n = kept
	// Removals first, then additions: two routes trading paths is then
	// no duplicate.
	for _, e := range edits {
		if e.Old == nil {
			if e.Index != nt.n {
				return nil, false
			}
			nt.n++
			continue
		}
		if e.Index < 0 || e.Index >= t.n || (!e.Remove && e.Index >= kept) {
			return nil, false
		}
		c, err := compileSpec(e.Index, *e.Old)
		if err != nil || c.kind != kindExact {
			return nil, false
		}
		m := shard(c.pattern)
		set := m[c.pattern]
		at := slices.IndexFunc(set, func(cand candidate) bool { return cand.index == e.Index })
		if at < 0 || set[at].host != c.host || !slices.Equal(set[at].methods, c.methods) {
			return nil, false
		}
		if len(set) == 1 {
			delete(m, c.pattern)
			continue
		}
		rest := slices.Delete(slices.Clone(set), at, at+1)
		rest.finish()
		m[c.pattern] = rest
	}
	for _, e := range edits {
		if e.Remove {
			continue
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
		grown := append(slices.Clip(slices.Clone(set)), candidate{host: c.host, methods: c.methods, index: c.index})
		grown.finish()
		m[c.pattern] = grown
	}
	return &nt, true
}
