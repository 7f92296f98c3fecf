// Balancers: round robin and smooth weighted round robin over a group's nodes.

package upstream

// Balancer picks the index of the next node. A Balancer belongs to one loop
// and is not safe for concurrent use.
type Balancer interface {
	Pick() int
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

func (r *RoundRobin) Pick() int {
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
	total   int
}

// NewSmoothWeighted returns a balancer with the given positive weights.
func NewSmoothWeighted(weights []int) *SmoothWeighted {
	s := &SmoothWeighted{weights: weights, current: make([]int, len(weights))}
	for _, w := range weights {
		s.total += w
	}
	return s
}

func (s *SmoothWeighted) Pick() int {
	best := 0
	for i, w := range s.weights {
		s.current[i] += w
		if s.current[i] > s.current[best] {
			best = i
		}
	}
	s.current[best] -= s.total
	return best
}
