// Balancers: round robin and smooth weighted round robin over a group's
// nodes, both able to pass over nodes already tried.

package upstream

import "github.com/loopgate/loopgate/pool/loopstat"

// Balancer picks the index of the next node, passing over the nodes in
// exclude unless every node is in it. A Balancer belongs to one loop and
// is not safe for concurrent use.
type Balancer interface {
	Pick(exclude NodeSet) int
}

var (
	_ Balancer = (*RoundRobin)(nil)
	_ Balancer = (*SmoothWeighted)(nil)
)

// RoundRobin cycles through n nodes.
type RoundRobin struct {
	n, next int
}

// NewRoundRobin returns a balancer over n nodes.
func NewRoundRobin(n int) *RoundRobin { return &RoundRobin{n: n} }

func (r *RoundRobin) Pick(exclude NodeSet) int {
	first := r.advance()
	if exclude.Empty() {
		return first
	}
	for i, tries := first, 1; ; i, tries = r.advance(), tries+1 {
		if !exclude.Has(i) {
			return i
		}
		if tries >= r.n {
			return first // every node is excluded: the turn is first's
		}
	}
}

// advance returns the node whose turn it is and moves the turn on.
func (r *RoundRobin) advance() int {
	i := r.next
	r.next++
	if r.next == r.n {
		r.next = 0
	}
	return i
}

// SmoothWeighted is nginx's smooth weighted round robin: over any window of
// sum(weights) picks each node is chosen weight times, interleaved rather
// than in bursts.
type SmoothWeighted struct {
	weights []int
	current []int
	ramp    slowStart // nodes back in rotation take part at a reduced weight
}

// NewSmoothWeighted returns a balancer with the given positive weights.
func NewSmoothWeighted(weights []int) *SmoothWeighted {
	return &SmoothWeighted{weights: weights, current: make([]int, len(weights))}
}

// Pick passes over excluded nodes as nginx passes over the peers a request
// already tried: they take no part in the round, so the weights of the
// others decide.
func (s *SmoothWeighted) Pick(exclude NodeSet) int {
	best, total := -1, 0
	now := loopstat.Now()
	ramping := s.ramp.active(now)
	for i, w := range s.weights {
		if exclude.Has(i) {
			continue
		}
		if ramping {
			w = s.ramp.weight(i, w, now)
		}
		s.current[i] += w
		total += w
		if best < 0 || s.current[i] > s.current[best] {
			best = i
		}
	}
	if best < 0 {
		return s.Pick(NodeSet{}) // every node is excluded
	}
	s.current[best] -= total
	return best
}
