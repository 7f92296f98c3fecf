// More balancers: random, least request (power of two choices on in-flight
// calls across loops), and slow start for nodes that come back.

package upstream

import (
	"math/rand/v2"
	"time"

	"github.com/loopgate/loopgate/pool/loopstat"
)

// BalancerKind names a group's balancer.
type BalancerKind uint8

const (
	BalanceRoundRobin   BalancerKind = iota
	BalanceWeighted                  // smooth weighted round robin
	BalanceRandom                    // weighted random
	BalanceLeastRequest              // power of two choices on in-flight calls, by weight
)

var (
	_ Balancer = (*Random)(nil)
	_ Balancer = (*LeastRequest)(nil)
)

// newBalancer makes the balancer gc asks for over pools.
func newBalancer(gc *GroupConfig, pools []*Pool, weights []int) Balancer {
	kind := gc.Kind
	if gc.Weighted && kind == BalanceRoundRobin {
		kind = BalanceWeighted
	}
	ramp := slowStart{window: gc.SlowStart, pools: pools}
	switch kind {
	case BalanceRoundRobin:
		if ramp.window > 0 { // round robin is smooth weighted round robin with equal weights
			sw := NewSmoothWeighted(weights)
			sw.ramp = ramp
			return &rampedRoundRobin{rr: NewRoundRobin(len(pools)), sw: sw}
		}
	case BalanceWeighted:
		sw := NewSmoothWeighted(weights)
		sw.ramp = ramp
		return sw
	case BalanceRandom:
		return &Random{weights: weights, ramp: ramp}
	case BalanceLeastRequest:
		return &LeastRequest{weights: weights, pools: pools, ramp: ramp}
	}
	return NewRoundRobin(len(pools))
}

// slowStart ramps a node that came back (from an ejection or a failed
// health check) or was added from 10 % of its weight to all of it over
// window, as nginx Plus and Envoy do. A zero window turns it off.
type slowStart struct {
	window time.Duration
	pools  []*Pool
}

// cameUp reports whether a node of the group has come into rotation since
// the group was built: before that no ramp can be active.
func (s *slowStart) cameUp() bool {
	if s.window <= 0 || len(s.pools) == 0 {
		return false
	}
	o := s.pools[0].node.outlier.group.Load()
	return o != nil && o.lastUp.Load() != 0
}

// active reports whether a node of the group is on its ramp at now: the
// latest came into rotation less than a window ago.
func (s *slowStart) active(now int64) bool {
	if s.window <= 0 || len(s.pools) == 0 {
		return false
	}
	o := s.pools[0].node.outlier.group.Load()
	return o != nil && now-o.lastUp.Load() < int64(s.window)
}

// weight returns node i's weight w as the ramp has it at now, in
// hundredths (w×10 to w×100).
func (s *slowStart) weight(i, w int, now int64) int {
	if s.window <= 0 {
		return w * 100
	}
	since := now - s.pools[i].node.upSince.Load()
	if since >= int64(s.window) || since < 0 {
		return w * 100
	}
	return w * (10 + int(90*since/int64(s.window)))
}

// Random picks a node at random in proportion to its weight.
type Random struct {
	weights []int
	ramp    slowStart
}

func (r *Random) Pick(exclude NodeSet) int {
	now := loopstat.Now()
	total := 0
	for i, w := range r.weights {
		if !exclude.Has(i) {
			total += r.ramp.weight(i, w, now)
		}
	}
	if total == 0 {
		return rand.IntN(len(r.weights)) // every node is excluded
	}
	x := rand.IntN(total)
	for i, w := range r.weights {
		if exclude.Has(i) {
			continue
		}
		if x -= r.ramp.weight(i, w, now); x < 0 {
			return i
		}
	}
	return len(r.weights) - 1
}

// LeastRequest draws two nodes at random and takes the one with fewer
// calls in flight for its weight, counted across every loop (Envoy's
// LEAST_REQUEST with two choices).
type LeastRequest struct {
	weights []int
	pools   []*Pool
	ramp    slowStart
}

func (l *LeastRequest) Pick(exclude NodeSet) int {
	n := len(l.pools)
	a := l.draw(exclude)
	if n == 1 {
		return a
	}
	b := l.draw(exclude.With(a))
	if b == a || exclude.Has(b) && !exclude.Has(a) {
		return a
	}
	now := loopstat.Now()
	// Compare load per unit of weight, as cross products: no division.
	la, lb := l.pools[a].node.InFlight()+1, l.pools[b].node.InFlight()+1
	if la*int64(l.ramp.weight(b, l.weights[b], now)) <= lb*int64(l.ramp.weight(a, l.weights[a], now)) {
		return a
	}
	return b
}

// draw returns a random node outside exclude, or any when there is none.
func (l *LeastRequest) draw(exclude NodeSet) int {
	n := len(l.pools)
	start := rand.IntN(n)
	for k := range n {
		if i := (start + k) % n; !exclude.Has(i) {
			return i
		}
	}
	return start
}

// InFlight returns the node's connections carrying a call now, on every
// loop: its calls in flight.
func (n *Node) InFlight() int64 {
	var t int64
	for i := range n.shards {
		t += n.shards[i].Active()
	}
	return t
}

// markUp starts n's slow-start ramp: it just came (back) into rotation.
func (n *Node) markUp() {
	now := loopstat.Now()
	n.upSince.Store(now)
	if o := n.outlier.group.Load(); o != nil {
		o.lastUp.Store(now)
	}
}

// rampedRoundRobin is round robin while no node is on its slow-start ramp,
// and smooth weighted round robin with the ramp's weights while one is.
type rampedRoundRobin struct {
	rr *RoundRobin
	sw *SmoothWeighted
}

func (r *rampedRoundRobin) Pick(exclude NodeSet) int {
	// The clock is read only once a node has come into rotation: a read
	// costs tens of nanoseconds, and this runs for every request.
	if r.sw.ramp.cameUp() && r.sw.ramp.active(loopstat.Now()) {
		return r.sw.Pick(exclude)
	}
	return r.rr.Pick(exclude)
}
