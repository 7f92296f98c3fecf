package upstream

import (
	"testing"
	"time"
)

func testPools(n int) []*Pool {
	pools := make([]*Pool, n)
	for i := range pools {
		pools[i] = &Pool{node: NewNode("u", "10.0.0."+string(rune('1'+i))+":80", 2)}
	}
	return pools
}

func counts(b Balancer, n, picks int, exclude NodeSet) []int {
	c := make([]int, n)
	for range picks {
		c[b.Pick(exclude)]++
	}
	return c
}

// Random picks in proportion to weight and never an excluded node.
func TestRandomBalancer(t *testing.T) {
	pools := testPools(3)
	b := newBalancer(&GroupConfig{Kind: BalanceRandom}, pools, []int{1, 3, 1})
	c := counts(b, 3, 10000, NodeSet{})
	if c[1] < 5000 || c[1] > 7000 || c[0] < 1500 || c[2] < 1500 {
		t.Fatalf("picks %v for weights 1, 3, 1", c)
	}
	if c := counts(b, 3, 1000, NodeSet{}.With(1)); c[1] != 0 {
		t.Fatalf("excluded node picked %d times", c[1])
	}
}

// Least request takes the node with fewer calls in flight on every loop.
func TestLeastRequestBalancer(t *testing.T) {
	pools := testPools(2)
	pools[0].node.Stats(0).active.Store(3)
	pools[0].node.Stats(1).active.Store(4)
	pools[1].node.Stats(1).active.Store(1)
	b := newBalancer(&GroupConfig{Kind: BalanceLeastRequest}, pools, []int{1, 1})
	if c := counts(b, 2, 1000, NodeSet{}); c[0] != 0 {
		t.Fatalf("picks %v: the busier node (7 in flight across loops, against 1) was picked", c)
	}
	if c := counts(b, 2, 100, NodeSet{}.With(1)); c[0] != 100 {
		t.Fatalf("picks %v with the idle node excluded", c)
	}
}

// Slow start: a node added by a reload takes about 10 % of its share at
// first; round robin turns weighted while it ramps.
func TestSlowStart(t *testing.T) {
	pools := testPools(2)
	o := &Outliers{}
	o.Configure(nil, []*Node{pools[0].node})
	o.Configure(nil, []*Node{pools[0].node, pools[1].node}) // node 1 added
	b := newBalancer(&GroupConfig{SlowStart: time.Minute}, pools, []int{1, 1})
	c := counts(b, 2, 1100, NodeSet{})
	if c[1] < 80 || c[1] > 130 {
		t.Fatalf("picks %v: the new node should get about 1 in 11", c)
	}
	pools[1].node.upSince.Store(1) // long ago
	o.lastUp.Store(1)
	if c := counts(b, 2, 1000, NodeSet{}); c[0] != 500 {
		t.Fatalf("picks %v after the ramp, want plain round robin", c)
	}
}
