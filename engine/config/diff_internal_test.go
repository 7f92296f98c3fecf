package config

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
)

// compareByName walks the unchanged head and tail by place; it must say
// what matching every name through maps says, in the same order.
func TestCompareByNameAgreesWithMaps(t *testing.T) {
	type item struct{ name, v string }
	name := func(x *item) string { return x.name }
	byMaps := func(old, next []item) Changes {
		var c Changes
		before := map[string]*item{}
		for i := range old {
			before[old[i].name] = &old[i]
		}
		after := map[string]bool{}
		for i := range next {
			after[next[i].name] = true
			switch o, ok := before[next[i].name]; {
			case !ok:
				c.Added = append(c.Added, next[i].name)
			case *o != next[i]:
				c.Changed = append(c.Changed, next[i].name)
			}
		}
		for i := range old {
			if !after[old[i].name] {
				c.Removed = append(c.Removed, old[i].name)
			}
		}
		return c
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 5000 {
		var old []item
		for i := range rng.IntN(12) {
			old = append(old, item{fmt.Sprint("n", i), fmt.Sprint(rng.IntN(2))})
		}
		next := append([]item(nil), old...)
		for k := rng.IntN(4); k > 0; k-- {
			switch op := rng.IntN(4); {
			case op == 0 && len(next) > 0:
				i := rng.IntN(len(next))
				next = append(next[:i:i], next[i+1:]...)
			case op == 1:
				i := rng.IntN(len(next) + 1)
				next = append(next[:i:i], append([]item{{fmt.Sprint("x", round, k), "0"}}, next[i:]...)...)
			case op == 2 && len(next) > 1:
				i, j := rng.IntN(len(next)), rng.IntN(len(next))
				next[i], next[j] = next[j], next[i]
			case len(next) > 0:
				next[rng.IntN(len(next))].v = "changed"
			}
		}
		got := compareByName(old, next, name, nil, nil)
		if want := byMaps(old, next); !reflect.DeepEqual(got, want) {
			t.Fatalf("round %d: %v -> %v: %+v; want %+v", round, old, next, got, want)
		}
	}
}
