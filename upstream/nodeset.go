// NodeSet: the nodes of a group a pick passes over, of any number, without
// an allocation per request.

package upstream

// maxFarTried is how many tried nodes past the 64th a NodeSet holds. A
// request tries at most config's retry attempts (10) nodes, so it never
// runs out; were it to, the node is simply not passed over.
const maxFarTried = 10

// NodeSet is the nodes of a group a pick passes over: the nodes earlier
// attempts of a request tried, and, in a set from Group.Unavailable, the
// nodes out of rotation. The first 64 nodes are a bitmask, which is all a
// group of up to 64 nodes needs. Past them, tried nodes are a short list
// (a request tries only a few), and the nodes of a larger group that are
// out of rotation are not copied in but tested one by one, from their
// atomic state, as a pick considers them. The zero value is empty. A
// value: copying it does not allocate.
type NodeSet struct {
	low  uint64             // nodes 0..63 in the set: bit i for node i
	far  [maxFarTried]int32 // tried nodes from 64 on, the first nfar of it
	nfar uint8
	out  outOfRotation // a large group's nodes out of rotation; zero: none
	more bool          // nfar > 0 or out is set: more than low to test
}

// outOfRotation is the view of a large group's nodes out of rotation that
// a set from Group.Unavailable carries: which kinds of unavailability
// count, read from each node as it is tested.
type outOfRotation struct {
	g       *Group // nil: no node is tested
	now     int64  // loopstat.Now when the set was made, for ejections
	ejected bool   // some node of the upstream is ejected
	down    bool   // some node is down and the panic threshold does not apply
}

// Empty reports whether the set passes over no node at all.
func (s *NodeSet) Empty() bool { return s.low == 0 && !s.more }

// Has reports whether node i is in the set: tried, or out of rotation.
// The bitmask alone answers inline; the rest is in has.
func (s *NodeSet) Has(i int) bool {
	if !s.more {
		return s.low&(1<<uint(i)) != 0 // a shift past 63 is 0: no node from 64 on
	}
	return s.has(i)
}

func (s *NodeSet) has(i int) bool {
	switch {
	case i < 64 && s.low&(1<<uint(i)) != 0, s.triedFar(i):
		return true
	}
	return s.out.g != nil && s.out.has(i)
}

// triedFar reports whether node i, past the 64th, is on the tried list.
func (s *NodeSet) triedFar(i int) bool {
	for _, j := range s.far[:s.nfar] {
		if int(j) == i {
			return true
		}
	}
	return false
}

// With returns the set with node i added as tried.
func (s NodeSet) With(i int) NodeSet {
	switch {
	case i < 0:
	case i < 64:
		s.low |= 1 << uint(i)
	case s.triedFar(i), int(s.nfar) == len(s.far):
	default:
		s.far[s.nfar] = int32(i)
		s.nfar++
		s.more = true
	}
	return s
}

// Union returns the nodes in s or in u. The view of nodes out of rotation
// is u's when it has one (a set from Group.Unavailable), else s's.
func (s NodeSet) Union(u NodeSet) NodeSet {
	s.low |= u.low
	for _, j := range u.far[:u.nfar] {
		s = s.With(int(j))
	}
	if u.out.g != nil {
		s.out, s.more = u.out, true
	}
	return s
}

// has reports whether node i of the group is out of rotation: ejected, or
// taken down by active checks while the panic threshold does not apply.
func (o *outOfRotation) has(i int) bool {
	if i >= len(o.g.pools) {
		return false
	}
	n := o.g.pools[i].node
	return o.down && n.Down() || o.ejected && n.EjectedFor(o.now) > 0
}
