package upstream

import (
	"testing"

	"github.com/loopgate/loopgate/pool/pooltest"
)

func TestMain(m *testing.M) { pooltest.Main(m) }

func TestRoundRobinCycles(t *testing.T) {
	rr := NewRoundRobin(3)
	var got []int
	for i := 0; i < 7; i++ {
		got = append(got, rr.Pick(NodeSet{}))
	}
	want := []int{0, 1, 2, 0, 1, 2, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("picks %v, want %v", got, want)
		}
	}
}

// nginx's smooth weighted round robin for weights {5,1,1} yields
// a a b a c a a: interleaved, never five a's in a row.
func TestSmoothWeightedMatchesNginx(t *testing.T) {
	s := NewSmoothWeighted([]int{5, 1, 1})
	want := []int{0, 0, 1, 0, 2, 0, 0}
	for round := 0; round < 3; round++ {
		for i, w := range want {
			if got := s.Pick(NodeSet{}); got != w {
				t.Fatalf("round %d pick %d = %d, want %d", round, i, got, w)
			}
		}
	}
}

func TestSmoothWeightedShares(t *testing.T) {
	weights := []int{3, 2, 1}
	s := NewSmoothWeighted(weights)
	counts := make([]int, len(weights))
	for i := 0; i < 600; i++ {
		counts[s.Pick(NodeSet{})]++
	}
	for i, w := range weights {
		if counts[i] != w*100 {
			t.Fatalf("counts %v, want %v x100", counts, weights)
		}
	}
}

func TestStateNames(t *testing.T) {
	for s, name := range map[State]string{Init: "INIT", Sending: "SENDING", Sent: "SENT", Received: "RECEIVED", Done: "DONE", Failed: "FAILED", Timeout: "TIMEOUT", State(99): "UNKNOWN"} {
		if s.String() != name {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), name)
		}
	}
	if !Failed.Terminal() || Received.Terminal() {
		t.Error("Terminal is wrong")
	}
}

func BenchmarkSmoothWeighted(b *testing.B) {
	s := NewSmoothWeighted([]int{5, 3, 2, 1})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		s.Pick(NodeSet{})
	}
}

func TestHashRingIsStableAndSpreads(t *testing.T) {
	nodes := nodes("10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80")
	r := newHashRing(nodes)
	counts := make([]int, 3)
	owner := map[string]int{}
	for i := 0; i < 3000; i++ {
		k := []byte("user-" + string(rune('a'+i%26)) + string(rune('0'+i%10)) + string(rune(i)))
		n := r.lookup(k, NodeSet{})
		counts[n]++
		owner[string(k)] = n
	}
	for i, c := range counts {
		if c < 600 || c > 1400 {
			t.Fatalf("node %d got %d of 3000 keys: %v", i, c, counts)
		}
	}
	// Removing a node moves only that node's keys.
	r2 := newHashRing(nodes[:2])
	for k, n := range owner {
		if n < 2 && r2.lookup([]byte(k), NodeSet{}) != n {
			t.Fatalf("key %q moved from node %d though its node stayed", k, n)
		}
	}
}

func BenchmarkHashRingLookup(b *testing.B) {
	r := newHashRing(nodes("a:1", "b:1", "c:1"))
	key := []byte("user-12345")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		r.lookup(key, NodeSet{})
	}
}
