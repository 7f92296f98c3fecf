// Tests for Table.With: it must build what Compile builds, or say it
// cannot.

package router

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// TestWithMatchesCompile edits random tables of exact paths sharing
// some paths (by host and methods) and checks every edit gives the table
// Compile gives for the edited list, leaving the original untouched.
func TestWithMatchesCompile(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	spec := func() Spec {
		s := Spec{Path: fmt.Sprintf("/p%d", rng.IntN(40))}
		switch rng.IntN(4) {
		case 0:
			s.Host = fmt.Sprintf("h%d.test", rng.IntN(3))
		case 1:
			s.Methods = []string{[]string{"GET", "POST", "put"}[rng.IntN(3)]}
		}
		return s
	}
	edited, refused := 0, 0
	for round := 0; round < 400; round++ {
		var specs []Spec
		for len(specs) < 30 {
			specs = append(specs, spec())
			if _, err := Compile(specs); err != nil {
				specs = specs[:len(specs)-1]
			}
		}
		table := mustCompile(t, specs)
		before := mustCompile(t, specs)
		next := append([]Spec(nil), specs...)
		var edits []Edit
		for k := rng.IntN(3) + 1; k > 0; k-- {
			i := rng.IntN(len(specs))
			if rng.IntN(4) == 0 {
				i = len(next)
				next = append(next, spec())
				edits = append(edits, Edit{Index: i, New: next[i]})
				continue
			}
			if slicesHasIndex(edits, i) {
				continue
			}
			next[i] = spec()
			edits = append(edits, Edit{Index: i, Old: &specs[i], New: next[i]})
		}
		// The last specs removed, now and then, when no edit touched them.
		if rng.IntN(4) == 0 && len(next) == len(specs) {
			for k := rng.IntN(3) + 1; k > 0 && !slicesHasIndex(edits, len(next)-1); k-- {
				i := len(next) - 1
				edits = append(edits, Edit{Index: i, Old: &specs[i], Remove: true})
				next = next[:i]
			}
		}
		got, ok := table.With(edits)
		want, err := Compile(next)
		switch {
		case !ok:
			refused++
			if err == nil {
				// Only a trade of paths within one edit list may be
				// refused though valid; none is made here besides
				// duplicates the removals do not clear.
				t.Logf("round %d: With refused a valid edit", round)
			}
		case err != nil:
			t.Fatalf("round %d: With accepted edits Compile refuses: %v", round, err)
		default:
			edited++
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d: With built a table Compile does not", round)
			}
		}
		if !reflect.DeepEqual(table, before) {
			t.Fatalf("round %d: With changed the table it edited", round)
		}
	}
	if edited == 0 || refused == 0 {
		t.Fatalf("edited %d, refused %d: both kinds of outcome must be exercised", edited, refused)
	}
}

func slicesHasIndex(edits []Edit, i int) bool {
	for _, e := range edits {
		if e.Index == i {
			return true
		}
	}
	return false
}

// TestWithRefuses lists what With leaves to Compile.
func TestWithRefuses(t *testing.T) {
	specs := []Spec{{Path: "/a"}, {Path: "/b/*"}, {Prefix: "/c/"}, {Path: "/d", Host: "x.test"}}
	table := mustCompile(t, specs)
	for name, edits := range map[string][]Edit{
		"to a pattern":       {{Index: 0, Old: &specs[0], New: Spec{Path: "/a/*"}}},
		"from a pattern":     {{Index: 1, Old: &specs[1], New: Spec{Path: "/b"}}},
		"from a prefix":      {{Index: 2, Old: &specs[2], New: Spec{Path: "/c"}}},
		"a duplicate":        {{Index: 0, Old: &specs[0], New: Spec{Path: "/D", Host: "X.test"}}},
		"invalid":            {{Index: 0, Old: &specs[0], New: Spec{Path: "a"}}},
		"wrong old":          {{Index: 0, Old: &specs[3], New: Spec{Path: "/e"}}},
		"out of range":       {{Index: 7, Old: &specs[0], New: Spec{Path: "/e"}}},
		"append with a gap":  {{Index: 5, New: Spec{Path: "/e"}}},
		"remove twice":       {{Index: 0, Old: &specs[0], Remove: true}, {Index: 0, Old: &specs[0], Remove: true}},
		"remove a pattern":   {{Index: 1, Old: &specs[1], Remove: true}},
		"remove with no old": {{Index: 3, Remove: true}},
		"remove a prefix":    {{Index: 3, Old: &specs[3], Remove: true}, {Index: 2, Old: &specs[2], Remove: true}},
		"replace a removed":  {{Index: 3, Old: &specs[3], Remove: true}, {Index: 3, Old: &specs[3], New: Spec{Path: "/e"}}},
	} {
		if got, ok := table.With(edits); ok || got != nil {
			t.Errorf("%s: With = %v, %v; want nil, false", name, got, ok)
		}
	}
	// Two routes trading paths is no duplicate.
	swapped, ok := table.With([]Edit{
		{Index: 0, Old: &specs[0], New: Spec{Path: "/d", Host: "x.test"}},
		{Index: 3, Old: &specs[3], New: Spec{Path: "/a"}},
	})
	if !ok {
		t.Fatal("With refused two routes trading paths")
	}
	if got := matchIndex(swapped, request{"x.test", "GET", "/d"}); got != 0 {
		t.Errorf("x.test /d = %d; want 0", got)
	}
	if got := matchIndex(swapped, request{"", "GET", "/a"}); got != 3 {
		t.Errorf("/a = %d; want 3", got)
	}
}

// TestWithSequencesMatchCompile applies long random sequences of edits
// (specs replaced, appended, and removed anywhere in the list) to one
// table after another, each edit to the table the last one made, and
// checks after every edit that the table answers every probe request as
// a table compiled from the edited list does: the same index, found,
// Allow and Matched. Wildcard and prefix specs sit among the exact ones;
// With declines to edit them, and the sequence goes on from Compile's
// table then.
func TestWithSequencesMatchCompile(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 7))
	others := []Spec{{Prefix: "/p1"}, {Prefix: "/"}, {Path: "/p2/*"}, {Path: "/p3/**", Methods: []string{"POST"}},
		{Prefix: "/p4", Host: "h1.test"}, {Path: "/*"}}
	spec := func() Spec {
		if rng.IntN(12) == 0 {
			return others[rng.IntN(len(others))]
		}
		s := Spec{Path: fmt.Sprintf("/p%d", rng.IntN(12))}
		if rng.IntN(3) == 0 {
			s.Path += fmt.Sprintf("/%c", 'a'+rng.IntN(3))
		}
		switch rng.IntN(4) {
		case 0:
			s.Host = fmt.Sprintf("h%d.test", rng.IntN(3))
		case 1:
			s.Methods = []string{[]string{"GET", "POST", "put"}[rng.IntN(3)]}
		case 2:
			s.Methods = []string{"DELETE", "GET"}
		}
		return s
	}
	var probes []request
	for _, host := range []string{"", "h0.test", "H1.TEST:80", "h2.test.", "other"} {
		for _, method := range []string{"GET", "HEAD", "POST", "PUT", "DELETE"} {
			for p := 0; p < 13; p++ {
				for _, tail := range []string{"", "/", "/a", "/B", "/c/d", "/x"} {
					probes = append(probes, request{host, method, fmt.Sprintf("/p%d%s", p, tail)})
				}
				probes = append(probes, request{host, method, fmt.Sprintf("/P%d;v=1/a", p)})
			}
			probes = append(probes, request{host, method, "/"}, request{host, method, "/q"})
		}
	}
	scratch := make([]byte, 0, 64)
	edited, declined, sawGone := 0, 0, 0
	for round := 0; round < 60; round++ {
		var specs []Spec
		for len(specs) < 40 {
			specs = append(specs, spec())
			if _, err := Compile(specs); err != nil {
				specs = specs[:len(specs)-1]
			}
		}
		table := mustCompile(t, specs)
		for step := 0; step < 40; step++ {
			var edits []Edit
			replaced := map[int]Spec{}
			removed := map[int]bool{}
			for k := rng.IntN(4) + 1; k > 0 && len(specs) > 1; k-- {
				i := rng.IntN(len(specs))
				if _, r := replaced[i]; r || removed[i] {
					continue
				}
				if rng.IntN(2) == 0 {
					removed[i] = true
					edits = append(edits, Edit{Index: i, Old: &specs[i], Remove: true})
				} else {
					replaced[i] = spec()
					edits = append(edits, Edit{Index: i, Old: &specs[i], New: replaced[i]})
				}
			}
			var next []Spec
			for i, s := range specs {
				switch r, ok := replaced[i]; {
				case removed[i]:
				case ok:
					next = append(next, r)
				default:
					next = append(next, s)
				}
			}
			for k := rng.IntN(3); k > 0; k-- {
				edits = append(edits, Edit{Index: len(next), New: spec()})
				next = append(next, edits[len(edits)-1].New)
			}
			got, ok := table.With(edits)
			want, err := Compile(next)
			switch {
			case err != nil:
				if ok {
					t.Fatalf("round %d step %d: With accepted edits Compile refuses: %v", round, step, err)
				}
				continue // the list stays as it was
			case !ok:
				declined++
				table = want
			default:
				edited++
				if len(got.gone) > 0 {
					sawGone++
				}
				if got.Len() != want.Len() {
					t.Fatalf("round %d step %d: Len %d, Compile's %d", round, step, got.Len(), want.Len())
				}
				for _, p := range probes {
					g := got.MatchIndex([]byte(p.host), []byte(p.method), []byte(p.path), scratch)
					w := want.Match([]byte(p.host), []byte(p.method), []byte(p.path), scratch)
					if g != w {
						t.Fatalf("round %d step %d: %s %s host %q: edited %+v, compiled %+v", round, step, p.method, p.path, p.host, g, w)
					}
				}
				table = got
			}
			specs = next
		}
	}
	t.Logf("edited %d, declined %d, with removed slots %d", edited, declined, sawGone)
	if edited < 1000 || declined == 0 || sawGone < 500 {
		t.Fatalf("edited %d, declined %d, with removed slots %d: every outcome must be exercised", edited, declined, sawGone)
	}
}

// A table With edited numbers its specs by slot for Match: a removed
// spec's slot stays empty, every other spec keeps its slot, SlotOf maps
// an index to it, and MatchIndex's index is the slot less the removed
// ones below.
func TestMatchKeepsSlots(t *testing.T) {
	var specs []Spec
	for i := 0; i < 10; i++ {
		specs = append(specs, Spec{Path: fmt.Sprintf("/r%d", i)})
	}
	table, err := Compile(specs)
	if err != nil {
		t.Fatal(err)
	}
	edited, ok := table.With([]Edit{{Index: 3, Old: &specs[3], Remove: true}, {Index: 6, Old: &specs[6], Remove: true},
		{Index: 8, New: Spec{Path: "/new"}}})
	if !ok {
		t.Fatal("With declined")
	}
	if edited.Len() != 9 || edited.Slots() != 11 || !slices.Equal(edited.Gone(), []int{3, 6}) {
		t.Fatalf("Len %d, Slots %d, Gone %v; want 9, 11, [3 6]", edited.Len(), edited.Slots(), edited.Gone())
	}
	scratch := make([]byte, 0, 64)
	for i, want := range []int{0, 1, 2, 4, 5, 7, 8, 9, 10} { // index i's slot
		path := fmt.Sprintf("/r%d", want)
		if want == 10 {
			path = "/new"
		}
		if got := edited.SlotOf(i); got != want {
			t.Errorf("SlotOf(%d) = %d, want %d", i, got, want)
		}
		if r := edited.Match(nil, []byte("GET"), []byte(path), scratch); r.Index != want {
			t.Errorf("Match %s = %d, want slot %d", path, r.Index, want)
		}
		if r := edited.MatchIndex(nil, []byte("GET"), []byte(path), scratch); r.Index != i {
			t.Errorf("MatchIndex %s = %d, want index %d", path, r.Index, i)
		}
	}
}
