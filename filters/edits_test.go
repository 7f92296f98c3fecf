package filters

import (
	"fmt"
	"testing"
)

// TestHeaderEditsRemoves checks Removes against its names filter: every
// name queued for removal or replacement matches in any case, others do
// not, a list built by hand is searched in full, and reset forgets all.
func TestHeaderEditsRemoves(t *testing.T) {
	var e HeaderEdits
	e.AddRemove("tracestate")
	e.AddSet("X-Forwarded-For", []byte("10.0.0.1"))
	e.AddAppend("X-Tag", []byte("a")) // appended, not replacing
	for _, c := range []struct {
		name string
		want bool
	}{
		{"tracestate", true}, {"TraceState", true}, {"x-forwarded-for", true}, {"X-FORWARDED-FOR", true},
		{"X-Tag", false}, {"User-Agent", false}, {"tracestatE", true}, {"tracestat", false}, {"", false},
		{"X-Forwarded-Fox", false}, // same length and first byte: the filter may let it through, the search must not match
	} {
		if got := e.Removes([]byte(c.name)); got != c.want {
			t.Errorf("Removes(%q) = %v, want %v", c.name, got, c.want)
		}
	}

	// Fields put in the lists by hand, past the Add methods, still match.
	e.Remove = append(e.Remove, "Cookie")
	e.Set = append(e.Set, Header{Name: "X-Env", Value: []byte("prod")})
	for _, name := range []string{"cookie", "x-env", "tracestate"} {
		if !e.Removes([]byte(name)) {
			t.Errorf("Removes(%q) = false for a field added by hand", name)
		}
	}
	hand := HeaderEdits{Remove: []string{"Server"}}
	if !hand.Removes([]byte("server")) {
		t.Error("a HeaderEdits literal's removal does not match")
	}

	e.reset()
	for _, name := range []string{"tracestate", "X-Forwarded-For", "Cookie"} {
		if e.Removes([]byte(name)) {
			t.Errorf("Removes(%q) = true after reset", name)
		}
	}
}

// AddSets queues a prebuilt set as the Add methods would have queued its
// edits one by one: the same lists, found by Removes through the names
// filter, and nothing at all when a list would pass its bound.
func TestHeaderEditsAddSets(t *testing.T) {
	var set EditSet
	set.Set("X-User-Id", []byte("alice"))
	set.Remove("X-User-Tenant")
	set.Set("X-Auth-Kind", []byte("jwt"))

	var byOne, bySet HeaderEdits
	byOne.AddSet("X-Other", []byte("1"))
	bySet.AddSet("X-Other", []byte("1"))
	byOne.AddSet("X-User-Id", []byte("alice"))
	byOne.AddRemove("X-User-Tenant")
	byOne.AddSet("X-Auth-Kind", []byte("jwt"))
	if !bySet.AddSets(&set) {
		t.Fatal("AddSets refused a set within bounds")
	}
	if fmt.Sprint(bySet.Set, bySet.Remove) != fmt.Sprint(byOne.Set, byOne.Remove) ||
		bySet.names != byOne.names || bySet.counted != byOne.counted {
		t.Fatalf("AddSets queued %+v, one by one %+v", bySet, byOne)
	}
	for _, name := range []string{"x-user-id", "X-USER-TENANT", "x-auth-kind", "x-other"} {
		if !bySet.Removes([]byte(name)) {
			t.Errorf("Removes(%q) = false after AddSets", name)
		}
	}
	if bySet.Removes([]byte("X-User-Roles")) {
		t.Error("Removes matches a name the set does not hold")
	}

	var full HeaderEdits
	for range maxEdits - 1 {
		full.AddSet("X-Fill", nil)
	}
	if full.AddSets(&set) || len(full.Set) != maxEdits-1 || len(full.Remove) != 0 {
		t.Fatalf("AddSets past the bound: %d sets, %d removes queued", len(full.Set), len(full.Remove))
	}
}
