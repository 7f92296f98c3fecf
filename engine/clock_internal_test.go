package engine

import (
	"testing"

	"github.com/loopgate/loopgate/engine/loopstat"
)

// The request path's timestamps come from one clock reading per callback:
// the same within a callback, fresh in the next one and outside any.
func TestLoopClockOncePerCallback(t *testing.T) {
	l := &loop{}
	l.enter()
	first := l.now()
	for loopstat.Now() == first {
	}
	if again := l.now(); again != first {
		t.Fatalf("second reading in one callback %d, want the first, %d", again, first)
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
