package filters

import (
	"runtime"
	"testing"
	"time"
)

// Stats no exchange recorded into hold no histograms: a gateway of 30,000
// routes has one per route and filter. A loop's first record makes its
// shard, and the totals count it.
func TestStatsUntouchedCostNothing(t *testing.T) {
	const n, loops = 10000, 4
	keep := make([]*Stats, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range keep {
		keep[i] = NewStats(loops)
	}
	runtime.ReadMemStats(&after)
	if per := (after.HeapAlloc - before.HeapAlloc) / n; per > 128 {
		t.Fatalf("%d bytes per untouched Stats of %d loops, want at most 128", per, loops)
	}
	keep[0].record(2, &Timing{Self: time.Millisecond, Total: 2 * time.Millisecond})
	keep[0].record(2, &Timing{Self: time.Millisecond, Total: 2 * time.Millisecond})
	if calls, self, total := keep[0].Totals(); calls != 2 || self != 2*time.Millisecond || total != 4*time.Millisecond {
		t.Fatalf("totals %d %v %v, want 2 2ms 4ms", calls, self, total)
	}
	if calls, _, _ := keep[1].Totals(); calls != 0 {
		t.Fatalf("untouched stats count %d calls", calls)
	}
}
