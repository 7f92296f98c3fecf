// StatSet: one route's filter stats, by filter name, made by the route's
// first exchange rather than when its chain is compiled.

package filters

import "sync/atomic"

// StatSet holds one route's filter stats by filter name. A shared chain
// (NewSharedChain) records each exchange's timings into the set the
// exchange was given (Exchange.SetStats), so one chain serves many routes
// and each route still counts its own. The set is empty until the
// route's first exchange records, which makes the stats of every filter
// of its chain at once: a config of 30,000 routes most of which see no
// request carries one nil pointer a route, not 30,000 × filters Stats.
//
// The zero StatSet is empty and ready. Records come from the loops and
// never wait: a new table is published with a compare-and-swap, and a
// record that loses the race looks again. Each, Has and Keep are safe for
// concurrent use with records.
type StatSet struct {
	tab atomic.Pointer[statTable] // nil until the first record
}

// statTable is a StatSet's filters, immutable once published: a filter
// new to the set is added in a copy, and a chain that is not the table's
// (another version's) lays it out in its own order in a copy too. The
// copies share each filter's shards (Stats.shards), so no count is lost
// to a copy.
type statTable struct {
	chain   *Chain // entries[i] is chain's filter i, for each of its filters
	entries []namedStats
}

type namedStats struct {
	name  string
	stats Stats
}

// table is s's table laid out for chain c, its filter i at entries[i]:
// one load and one comparison once it is. On a loop.
func (s *StatSet) table(c *Chain) *statTable {
	if t := s.tab.Load(); t != nil && t.chain == c {
		return t
	}
	return s.layOut(c)
}

// layOut publishes s's table laid out for chain c, with the stats of c's
// filters s lacks made (all of them on the route's first exchange). It
// allocates once per route and chain: on the route's first exchange, and
// on its first exchange after a reload made its chain anew; while
// exchanges of two versions' chains alternate on a route, once per
// alternation. On a loop.
func (s *StatSet) layOut(c *Chain) *statTable {
	for {
		t := s.tab.Load()
		if t != nil && t.chain == c {
			return t
		}
		s.tab.CompareAndSwap(t, t.laidOutFor(c)) // won or lost, the next round looks again
	}
}

// laidOutFor is t (nil for none) laid out for chain c: c's filters first, in
// its order, those t lacks made for c's loops in one allocation, then
// t's others.
func (t *statTable) laidOutFor(c *Chain) *statTable {
	var have []namedStats
	if t != nil {
		have = t.entries
	}
	out := &statTable{chain: c, entries: make([]namedStats, len(c.names), len(c.names)+len(have))}
	missing := 0
	for k, n := range c.names {
		if j := indexOf(have, n); j >= 0 {
			out.entries[k] = have[j]
		} else {
			missing++
		}
	}
	shards := make([]atomic.Pointer[statShard], missing*c.loops)
	for k, n := range c.names {
		if out.entries[k].name == "" {
			out.entries[k] = namedStats{name: n, stats: Stats{shards: shards[:c.loops:c.loops]}}
			shards = shards[c.loops:]
		}
	}
	for _, e := range have {
		if !hasString(c.names, e.name) {
			out.entries = append(out.entries, e)
		}
	}
	return out
}

// indexOf is the place of name in entries, or -1.
func indexOf(entries []namedStats, name string) int {
	for j := range entries {
		if entries[j].name == name {
			return j
		}
	}
	return -1
}

// Each calls fn with every filter's name and stats in s, in the order
// they were made. Safe for concurrent use.
func (s *StatSet) Each(fn func(filter string, st *Stats)) {
	if t := s.tab.Load(); t != nil {
		for j := range t.entries {
			fn(t.entries[j].name, &t.entries[j].stats)
		}
	}
}

// Has reports whether s holds stats of a filter chain c does not run (c
// nil: of any filter). Safe for concurrent use.
func (s *StatSet) Has(c *Chain) bool {
	t := s.tab.Load()
	if t == nil {
		return false
	}
	if c == nil {
		return true
	}
	for j := range t.entries {
		if !hasString(c.names, t.entries[j].name) {
			return true
		}
	}
	return false
}

// Keep drops from s the stats of every filter chain c does not run (c
// nil: all of them). The caller makes sure no exchange of a chain that
// runs them can record any more: one that did would make them anew.
// Safe for concurrent use.
func (s *StatSet) Keep(c *Chain) {
	for {
		t := s.tab.Load()
		if t == nil {
			return
		}
		var next *statTable
		if c != nil {
			kept := make([]namedStats, 0, len(t.entries))
			for _, e := range t.entries {
				if hasString(c.names, e.name) {
					kept = append(kept, e)
				}
			}
			if len(kept) == len(t.entries) {
				return
			}
			if len(kept) > 0 {
				next = &statTable{entries: kept}
			}
		}
		if s.tab.CompareAndSwap(t, next) {
			return
		}
	}
}

func hasString(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
