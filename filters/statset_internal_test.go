package filters

import (
	"net/netip"
	"sync"
	"testing"
)

// sharedChain is a shared chain of pass filters named names, on loops
// loops.
func sharedChain(t *testing.T, loops int, names ...string) *Chain {
	t.Helper()
	fs := make([]Filter, len(names))
	for i, n := range names {
		fs[i] = passFilter{Base{FilterName: n, FilterOrder: i + 1}}
	}
	c, err := NewSharedChain(fs, loops)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// run runs one exchange through c on loop, recording into set.
func run(c *Chain, set *StatSet, loop int) {
	var x Exchange
	runOn(&x, c, set, loop)
}

// runOn is run with the exchange x.
func runOn(x *Exchange, c *Chain, set *StatSet, loop int) {
	x.Reset(nil, nil, netip.Addr{}, loop, nil)
	x.SetStats(set)
	c.RunRequest(x)
	x.Status = 200
	c.RunResponse(x)
}

// calls is how many exchanges set counts for filter.
func setCalls(set *StatSet, filter string) int64 {
	n := int64(-1)
	set.Each(func(name string, st *Stats) {
		if name == filter {
			n, _, _ = st.Totals()
		}
	})
	return n
}

// A shared chain records into each exchange's own set: one chain serves
// two routes that count apart. A set is empty (a nil pointer) until its
// first exchange, which makes every filter's stats at once; later
// exchanges allocate nothing. A chain records into no set when the
// exchange names none.
func TestStatSetMadeByFirstRecord(t *testing.T) {
	c := sharedChain(t, 2, "a", "b", "c")
	if c.Stats(0) != nil {
		t.Fatal("a shared chain has stats of its own")
	}
	var r1, r2 StatSet
	if r1.tab.Load() != nil || r1.Has(nil) {
		t.Fatal("the zero set holds stats")
	}
	run(c, &r1, 1)
	run(c, &r1, 0)
	run(c, &r2, 1)
	run(c, nil, 1)
	for _, f := range []string{"a", "b", "c"} {
		if n := setCalls(&r1, f); n != 2 {
			t.Errorf("route 1's %s counted %d exchanges, want 2", f, n)
		}
		if n := setCalls(&r2, f); n != 1 {
			t.Errorf("route 2's %s counted %d exchanges, want 1", f, n)
		}
	}
	var x Exchange
	if n := testing.AllocsPerRun(100, func() { runOn(&x, c, &r1, 1) }); n != 0 {
		t.Fatalf("an exchange into a made set allocates %v times", n)
	}
}

// A chain of another version with a filter the set lacks adds it and
// keeps the counts of the others; Has names what a chain does not run,
// and Keep drops it.
func TestStatSetFollowsTheChain(t *testing.T) {
	abc, ab, abd := sharedChain(t, 1, "a", "b", "c"), sharedChain(t, 1, "a", "b"), sharedChain(t, 1, "a", "b", "d")
	var set StatSet
	run(abc, &set, 0)
	run(abd, &set, 0)
	if setCalls(&set, "a") != 2 || setCalls(&set, "c") != 1 || setCalls(&set, "d") != 1 {
		t.Fatalf("a %d, c %d, d %d", setCalls(&set, "a"), setCalls(&set, "c"), setCalls(&set, "d"))
	}
	if !set.Has(ab) || !set.Has(abd) || set.Has(sharedChain(t, 1, "a", "b", "c", "d")) {
		t.Fatal("Has does not name the filters a chain lacks")
	}
	set.Keep(abd)
	if setCalls(&set, "c") != -1 || setCalls(&set, "a") != 2 || setCalls(&set, "d") != 1 {
		t.Fatalf("after Keep: c %d, a %d, d %d", setCalls(&set, "c"), setCalls(&set, "a"), setCalls(&set, "d"))
	}
	set.Keep(nil)
	if set.Has(nil) {
		t.Fatal("Keep(nil) left stats")
	}
}

// Loops making one set's stats at once all count into the same stats.
func TestStatSetConcurrentFirstRecords(t *testing.T) {
	const loops, each = 4, 200
	c := sharedChain(t, loops, "a", "b")
	other := sharedChain(t, loops, "b", "z")
	var set StatSet
	var wg sync.WaitGroup
	for l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if i%2 == l%2 {
					run(c, &set, l)
				} else {
					run(other, &set, l)
				}
			}
		}()
	}
	wg.Wait()
	if a, b, z := setCalls(&set, "a"), setCalls(&set, "b"), setCalls(&set, "z"); a+z != loops*each || b != loops*each {
		t.Fatalf("a %d + z %d, b %d: want %d each", a, z, b, loops*each)
	}
}
