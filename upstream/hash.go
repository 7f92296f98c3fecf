// Consistent hashing: a ketama-style ring so a key keeps its node while the
// node set is stable, and moves only 1/n of keys when a node is added.

package upstream

import (
	"sort"
	"strconv"
)

// pointsPerWeight is how many ring points each unit of weight gets; more
// points spread keys more evenly.
const pointsPerWeight = 160

// hashRing maps 64-bit hashes to node indexes. Immutable once built.
type hashRing struct {
	points []uint64
	nodes  []int
}

func newHashRing(nodes []NodeConfig) *hashRing {
	r := &hashRing{}
	type point struct {
		h    uint64
		node int
	}
	var pts []point
	for i, n := range nodes {
		w := max(n.Weight, 1)
		for j := 0; j < pointsPerWeight*w; j++ {
			pts = append(pts, point{fnv1a([]byte(n.Node.Addr + "#" + strconv.Itoa(j))), i})
		}
	}
	sort.Slice(pts, func(a, b int) bool { return pts[a].h < pts[b].h })
	for _, p := range pts {
		r.points = append(r.points, p.h)
		r.nodes = append(r.nodes, p.node)
	}
	return r
}

// lookup returns the node owning key: the first point at or after its
// hash whose node is not in exclude. When every node is, the key's own
// node.
func (r *hashRing) lookup(key []byte, exclude NodeSet) int {
	h := fnv1a(key)
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i] >= h })
	if i == len(r.points) {
		i = 0
	}
	if exclude.Empty() || !exclude.Has(r.nodes[i]) {
		return r.nodes[i]
	}
	for k := 1; k < len(r.points); k++ {
		if n := r.nodes[(i+k)%len(r.points)]; !exclude.Has(n) {
			return n
		}
	}
	return r.nodes[i]
}

// fnv1a is FNV-1a 64 with a final avalanche, so neighbouring keys spread
// over the ring. Stable across processes: every gateway maps a key alike.
func fnv1a(b []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range b {
		h ^= uint64(c)
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}
