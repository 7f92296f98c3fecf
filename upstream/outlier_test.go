package upstream

import (
	"testing"
	"time"

	"github.com/loopgate/loopgate/pool/loopstat"
)

func newOutlierNodes(n int, cfg *OutlierConfig) (*Outliers, []*Node) {
	o := &Outliers{}
	nodes := make([]*Node, n)
	for i := range nodes {
		nodes[i] = NewNode("u", "10.0.0."+string(rune('1'+i))+":80", 1)
	}
	o.Configure(cfg, nodes)
	return o, nodes
}

func fail(n *Node, times int) {
	for range times {
		n.report(n.Stats(0), &Outcome{Err: ErrConnect})
	}
}

// N failures in a row eject a node; a success in between resets the run;
// ejections double up to the cap; at most the share of nodes is out.
func TestOutlierEjection(t *testing.T) {
	cfg := &OutlierConfig{Consecutive: 3, BaseEjection: time.Second, MaxEjection: 3 * time.Second, MaxEjectedPct: 50, ForgetAfterClean: time.Hour}
	o, nodes := newOutlierNodes(4, cfg)
	n := nodes[0]
	fail(n, 2)
	n.report(n.Stats(0), &Outcome{Status: 200})
	fail(n, 2)
	if n.EjectedFor(loopstat.Now()) != 0 {
		t.Fatal("ejected without 3 failures in a row")
	}
	fail(n, 1)
	left := n.EjectedFor(loopstat.Now())
	if left <= 0 || left > time.Second || o.Ejected() != 1 {
		t.Fatalf("after 3 failures: ejected for %v, %d out; want up to 1s, 1", left, o.Ejected())
	}
	// Its time up, it comes back; one more failure ejects it for 2s.
	n.unEject(n.outlier.until.Load(), loopstat.Now())
	fail(n, 1)
	if left := n.EjectedFor(loopstat.Now()); left <= time.Second || left > 2*time.Second {
		t.Fatalf("second ejection %v, want 2s", left)
	}
	n.unEject(n.outlier.until.Load(), loopstat.Now())
	fail(n, 1)
	n.unEject(n.outlier.until.Load(), loopstat.Now())
	fail(n, 1)
	if left := n.EjectedFor(loopstat.Now()); left <= 2*time.Second || left > 3*time.Second {
		t.Fatalf("fourth ejection %v, want the 3s cap", left)
	}
	// 50 % of 4: a second node may go, a third may not.
	fail(nodes[1], 3)
	fail(nodes[2], 3)
	if o.Ejected() != 2 || nodes[2].EjectedFor(loopstat.Now()) != 0 {
		t.Fatalf("%d nodes out, third ejected for %v; want 2 and none", o.Ejected(), nodes[2].EjectedFor(loopstat.Now()))
	}
	g := &Group{pools: []*Pool{{node: nodes[0]}, {node: nodes[1]}, {node: nodes[2]}, {node: nodes[3]}}}
	if got := g.Unavailable(); !got.Has(0) || !got.Has(1) || got.Has(2) || got.Has(3) {
		t.Fatalf("unavailable %v %v %v %v, want nodes 0 and 1", got.Has(0), got.Has(1), got.Has(2), got.Has(3))
	}
	// A reload that drops an ejected node stops counting it.
	o.Configure(cfg, nodes[1:])
	if o.Ejected() != 1 {
		t.Fatalf("%d out after node 0 left the upstream, want 1", o.Ejected())
	}
	nodes[0].unEject(nodes[0].outlier.until.Load(), loopstat.Now())
	if o.Ejected() != 1 {
		t.Fatalf("%d out after a removed node's return, want still 1", o.Ejected())
	}
}

// A node that stayed in rotation ForgetAfterClean since it came back starts
// its back-off over: its next ejection is a first one again.
func TestOutlierForgetsAfterClean(t *testing.T) {
	cfg := &OutlierConfig{Consecutive: 1, BaseEjection: time.Second, MaxEjection: time.Hour, MaxEjectedPct: 100, ForgetAfterClean: time.Minute}
	o, nodes := newOutlierNodes(1, cfg)
	n := nodes[0]
	ejectionAt := func(at int64) time.Duration {
		t.Helper()
		n.eject(o, cfg, at)
		until := n.outlier.until.Load()
		if until == 0 {
			t.Fatal("not ejected")
		}
		n.unEject(until, at) // back at once
		return time.Duration(until - at)
	}
	now := loopstat.Now()
	if first, second := ejectionAt(now), ejectionAt(now); first != time.Second || second != 2*time.Second {
		t.Fatalf("ejections back to back: %v then %v, want 1s then 2s", first, second)
	}
	if d := ejectionAt(now + int64(time.Minute) + 1); d != time.Second {
		t.Fatalf("ejection a clean minute later: %v, want 1s again", d)
	}
}
