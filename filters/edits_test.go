package filters

import "testing"

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
