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
// new to the set is added in a copy. The copies share each filter's
// shards (Stats.shards), so no count is lost to a copy.
type statTable struct {
	entries []namedStats
}

type namedStats struct {
	name  string
	stats Stats
}

// of returns the stats of chain c's i-th filter in s, making them (with
// those of c's other filters s lacks) the first time. The table is built
// in c's order, so the filter is found at i unless another chain (an
// older or newer version's) added names first. On a loop.
func (s *StatSet) of(c *Chain, i int) *Stats {
	name := c.names[i]
	for {
		t := s.tab.Load()
		if t != nil {
			if i < len(t.entries) && t.entries[i].name == name {
				return &t.entries[i].stats
			}
			for j := range t.entries {
				if t.entries[j].name == name {
					return &t.entries[j].stats
				}
			}
		}
		s.tab.CompareAndSwap(t, t.with(c)) // won or lost, the next round finds it
	}
}

// with is t (nil for none) with chain c's filters it lacks added, their
// stats made for c's loops in one allocation.
func (t *statTable) with(c *Chain) *statTable {
	var have []namedStats
	if t != nil {
		have = t.entries
	}
	var add []string
	for _, n := range c.names {
		if !hasName(have, n) {
			add = append(add, n)
		}
	}
	out := &statTable{entries: make([]namedStats, len(have), len(have)+len(add))}
	copy(out.entries, have)
	shards := make([]atomic.Pointer[statShard], len(add)*c.loops)
	for k, n := range add {
		out.entries = append(out.entries, namedStats{name: n, stats: Stats{shards: shards[k*c.loops : (k+1)*c.loops : (k+1)*c.loops]}})
	}
	return out
}

func hasName(entries []namedStats, name string) bool {
	for j := range entries {
		if entries[j].name == name {
			return true
		}
	}
	return false
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
