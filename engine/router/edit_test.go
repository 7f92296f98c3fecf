// Tests for Table.With: it must build what Compile builds, or say it
// cannot.

package router

import (
	"fmt"
	"math/rand/v2"
	"reflect"
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
		"to a pattern":        {{Index: 0, Old: &specs[0], New: Spec{Path: "/a/*"}}},
		"from a pattern":      {{Index: 1, Old: &specs[1], New: Spec{Path: "/b"}}},
		"from a prefix":       {{Index: 2, Old: &specs[2], New: Spec{Path: "/c"}}},
		"a duplicate":         {{Index: 0, Old: &specs[0], New: Spec{Path: "/D", Host: "X.test"}}},
		"invalid":             {{Index: 0, Old: &specs[0], New: Spec{Path: "a"}}},
		"wrong old":           {{Index: 0, Old: &specs[3], New: Spec{Path: "/e"}}},
		"out of range":        {{Index: 7, Old: &specs[0], New: Spec{Path: "/e"}}},
		"append with a gap":   {{Index: 5, New: Spec{Path: "/e"}}},
		"remove not the last": {{Index: 0, Old: &specs[0], Remove: true}},
		"remove out of order": {{Index: 2, Old: &specs[2], Remove: true}, {Index: 3, Old: &specs[3], Remove: true}},
		"remove with no old":  {{Index: 3, Remove: true}},
		"remove a prefix":     {{Index: 3, Old: &specs[3], Remove: true}, {Index: 2, Old: &specs[2], Remove: true}},
		"replace a removed":   {{Index: 3, Old: &specs[3], Remove: true}, {Index: 3, Old: &specs[3], New: Spec{Path: "/e"}}},
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
