package engine

import (
	"testing"

	"github.com/loopgate/loopgate/pool/loopstat"
)

// The request path's start timestamps come from one clock reading per
// callback: the same within a callback, fresh in the next one and outside
// any; an end (fresh) is a new reading.
func TestLoopClockOncePerCallback(t *testing.T) {
	l := &loop{}
	l.enter()
	first := l.now()
	for loopstat.Now() == first {
	}
	if again := l.now(); again != first {
		t.Fatalf("second reading in one callback %d, want the first, %d", again, first)
	}
	// An end is read fresh, and what follows in the callback starts there.
	end := l.fresh()
	if end <= first {
		t.Fatalf("fresh reading %d, not after the callback's %d", end, first)
	}
	if after := l.now(); after != end {
		t.Fatalf("reading after fresh %d, want %d", after, end)
	}
	l.leave()
	if outside := l.now(); outside <= first {
		t.Fatalf("reading outside a callback %d, not after %d", outside, first)
	}
	l.enter()
	if next := l.now(); next <= first {
		t.Fatalf("reading in the next callback %d, not after %d", next, first)
	}
	l.leave()
}
