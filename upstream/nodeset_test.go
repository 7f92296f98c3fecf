package upstream

import (
	"fmt"
	"testing"
	"time"
)

// manyNodes returns a group of n nodes under one Outliers with cfg, its
// balancer of kind and its hash ring, as Loop.Update would build them.
func manyNodes(n int, kind BalancerKind, cfg *OutlierConfig) (*Group, *Outliers) {
	gc := &GroupConfig{Name: "u", Kind: kind}
	pools := make([]*Pool, n)
	weights := make([]int, n)
	nodes := make([]*Node, n)
	for i := range pools {
		nodes[i] = NewNode("u", fmt.Sprintf("10.0.%d.%d:80", i/250, 1+i%250), 1)
		pools[i] = &Pool{node: nodes[i]}
		weights[i] = 1
		gc.Nodes = append(gc.Nodes, NodeConfig{Node: nodes[i], Weight: 1})
	}
	gc.Prepare()
	o := &Outliers{}
	o.Configure(cfg, nodes)
	return &Group{Name: "u", pools: pools, balancer: newBalancer(gc, pools, weights), ring: gc.ring}, o
}

var balancerKinds = map[string]BalancerKind{
	"round robin": BalanceRoundRobin, "weighted": BalanceWeighted,
	"random": BalanceRandom, "least request": BalanceLeastRequest,
}

// picks counts the picks of each node over rounds picks avoiding s().
func picks(g *Group, rounds int, s func() NodeSet) map[int]int {
	c := map[int]int{}
	for range rounds {
		p := g.Pick(s())
		for i, q := range g.pools {
			if q == p {
				c[i]++
			}
		}
	}
	return c
}

// A tried node past the 64th is passed over like any other: a retry on
// an upstream of 100 nodes does not go back to node 80.
func TestNodeSetTriedPastThe64th(t *testing.T) {
	var s NodeSet
	s = s.With(3).With(80).With(99)
	for i := range 100 {
		if want := i == 3 || i == 80 || i == 99; s.Has(i) != want {
			t.Fatalf("node %d in the set: %v, want %v", i, s.Has(i), want)
		}
	}
	for name, kind := range balancerKinds {
		g, _ := manyNodes(100, kind, nil)
		tried := g.Exclude(NodeSet{}, g.pools[80])
		if c := picks(g, 1000, func() NodeSet { return tried }); c[80] != 0 {
			t.Fatalf("%s: tried node 80 picked %d times of 1000", name, c[80])
		}
	}
	// Every node of 75 tried but node 70 (ten past the 64th, as many as
	// a request can try): the pick is node 70.
	g, _ := manyNodes(75, BalanceRoundRobin, nil)
	var all NodeSet
	for i := range 75 {
		if i != 70 {
			all = all.With(i)
		}
	}
	if c := picks(g, 10, func() NodeSet { return all }); c[70] != 10 {
		t.Fatalf("with only node 70 untried: picks %v", c)
	}
}

// Ejected or down, nodes 80 and 90 of 100 get no pick from any balancer.
func TestUnavailablePastThe64th(t *testing.T) {
	cfg := &OutlierConfig{Consecutive: 1, BaseEjection: time.Hour, MaxEjection: time.Hour, MaxEjectedPct: 10, ForgetAfterClean: time.Hour}
	hc := &HealthCheckConfig{Healthy: 1, Unhealthy: 1, PanicPercent: 50}
	for name, kind := range balancerKinds {
		g, o := manyNodes(100, kind, cfg)
		o.SetHealthCheck(hc)
		fail(g.pools[80].node, 1)
		if o.Ejected() != 1 {
			t.Fatalf("%d nodes ejected, want node 80", o.Ejected())
		}
		g.pools[90].node.checked(hc, false)
		if !g.pools[90].node.Down() {
			t.Fatal("node 90 not down")
		}
		c := picks(g, 1000, g.Unavailable)
		if c[80] != 0 || c[90] != 0 {
			t.Fatalf("%s: ejected node 80 picked %d times, down node 90 %d times, of 1000", name, c[80], c[90])
		}
	}
}

// A key the hash ring gives to node 80 of 100 walks on past it while it is
// ejected, past the next node too while that one is down, and past the
// node a retry of the key tried.
func TestHashRingWalksPastThe64th(t *testing.T) {
	cfg := &OutlierConfig{Consecutive: 1, BaseEjection: time.Hour, MaxEjection: time.Hour, MaxEjectedPct: 10, ForgetAfterClean: time.Hour}
	hc := &HealthCheckConfig{Healthy: 1, Unhealthy: 1, PanicPercent: 50}
	g, o := manyNodes(100, BalanceRoundRobin, cfg)
	o.SetHealthCheck(hc)
	var key []byte
	for i := 0; key == nil; i++ {
		if k := []byte(fmt.Sprintf("user-%d", i)); g.PickHash(k, NodeSet{}) == g.pools[80] {
			key = k
		}
	}
	fail(g.pools[80].node, 1)
	next := g.PickHash(key, g.Unavailable())
	if next == g.pools[80] {
		t.Fatalf("key %s still goes to ejected node 80", key)
	}
	next.node.checked(hc, false) // the next node goes down too: the walk goes on
	if p := g.PickHash(key, g.Unavailable()); p == g.pools[80] || p == next {
		t.Fatalf("key %s went to %s, out of rotation", key, p.Addr)
	}
	// A retry of the key after the node it went to: tried and unavailable
	// nodes together.
	third := g.PickHash(key, g.Unavailable())
	tried := g.Exclude(NodeSet{}, third)
	if p := g.PickHash(key, tried.Union(g.Unavailable())); p == third || p == next || p == g.pools[80] {
		t.Fatalf("retry of key %s went to %s: tried or out of rotation", key, p.Addr)
	}
}

// Below the panic threshold the down nodes past the 64th take traffic
// again, like the others.
func TestUnavailablePanicPastThe64th(t *testing.T) {
	hc := &HealthCheckConfig{Healthy: 1, Unhealthy: 1, PanicPercent: 50}
	g, o := manyNodes(100, BalanceRoundRobin, nil)
	o.SetHealthCheck(hc)
	for i := 30; i < 90; i++ { // 60 of 100 down: 40 % healthy, below 50 %
		g.pools[i].node.checked(hc, false)
	}
	if u := g.Unavailable(); u.Has(80) || !u.Empty() {
		t.Fatal("in panic the down nodes are still passed over")
	}
	g.pools[30].node.checked(hc, true)
	for i := 31; i < 40; i++ {
		g.pools[i].node.checked(hc, true)
	}
	if u := g.Unavailable(); !u.Has(80) || u.Has(30) || u.Has(95) {
		t.Fatal("out of panic: want node 80 passed over, nodes 30 and 95 not")
	}
}

// A NodeSet keeps at most maxFarTried tried nodes past the 64th; a request
// never tries more, and past that the set stays as it was.
func TestNodeSetFarLimit(t *testing.T) {
	var s NodeSet
	for i := range maxFarTried + 2 {
		s = s.With(100 + i)
		s = s.With(100 + i) // twice: held once
	}
	if int(s.nfar) != maxFarTried || !s.Has(100) || !s.Has(100+maxFarTried-1) || s.Has(100+maxFarTried) {
		t.Fatalf("far tried %v (%d)", s.far, s.nfar)
	}
}

func BenchmarkPickUnavailable(b *testing.B) {
	cfg := &OutlierConfig{Consecutive: 1, BaseEjection: time.Hour, MaxEjection: time.Hour, MaxEjectedPct: 50, ForgetAfterClean: time.Hour}
	for _, n := range []int{3, 100} {
		for _, kind := range []BalancerKind{BalanceRoundRobin, BalanceWeighted} {
			b.Run(fmt.Sprintf("nodes=%d/kind=%d", n, kind), func(b *testing.B) {
				g, _ := manyNodes(n, kind, cfg)
				fail(g.pools[n-1].node, 1)
				b.ReportAllocs()
				for range b.N {
					g.Pick(g.Unavailable())
				}
			})
		}
	}
}
