// Bucket placement and merging of the per-loop histograms.

package loopstat

import (
	"testing"

	"github.com/loopgate/loopgate/pool/pooltest"
)

// TestObserveBuckets: a value lands in the first bucket whose bound it does
// not exceed (Prometheus' le), negatives in the first, and values past
// every bound in +Inf; Sum merges shards and counts them all.
func TestObserveBuckets(t *testing.T) {
	var a, b Histogram
	a.Observe(-5)         // bucket 0
	a.Observe(1000)       // exactly 1µs: bucket 0
	a.Observe(1001)       // bucket 1 (2.5µs)
	b.Observe(60e9)       // exactly 60s: the last finite bucket
	b.Observe(60e9 + 1)   // +Inf
	b.Observe(int64(7e9)) // 10s bucket
	var s Sum
	s.Add(&a)
	s.Add(&b)
	want := map[int]uint64{0: 2, 1: 1, len(Bounds) - 1: 1, len(Bounds): 1, 21: 1}
	for i, c := range s.Counts {
		if c != want[i] {
			t.Errorf("bucket %d (le %d ns): %d, want %d", i, boundOr(i), c, want[i])
		}
	}
	if s.Count() != 6 {
		t.Errorf("count %d, want 6", s.Count())
	}
	if wantSum := uint64(0 + 1000 + 1001 + 60e9 + 60e9 + 1 + 7e9); s.SumNs != wantSum {
		t.Errorf("sum %d, want %d", s.SumNs, wantSum)
	}
}

func boundOr(i int) int64 {
	if i < len(Bounds) {
		return Bounds[i]
	}
	return -1
}

func TestObserveAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	var h Histogram
	if n := testing.AllocsPerRun(100, func() { h.Observe(12345) }); n != 0 {
		t.Fatalf("Observe allocates %v times", n)
	}
}

// Observe's bucket is the first bound at or above the value, as a scan
// from the first bound finds it: at every bound, one either side of it,
// and at every power of two.
func TestObserveBucketMatchesScan(t *testing.T) {
	scan := func(ns int64) int {
		i := 0
		for i < len(Bounds) && ns > Bounds[i] {
			i++
		}
		return i
	}
	var values []int64
	for _, b := range Bounds {
		values = append(values, b-1, b, b+1)
	}
	for k := 0; k < 63; k++ {
		values = append(values, 1<<k-1, 1<<k, 1<<k+1)
	}
	values = append(values, 0, 1<<63-1)
	for _, v := range values {
		var h Histogram
		h.Observe(v)
		var s Sum
		s.Add(&h)
		if want := scan(v); s.Counts[want] != 1 {
			t.Fatalf("Observe(%d) missed bucket %d: %v", v, want, s.Counts)
		}
	}
}
