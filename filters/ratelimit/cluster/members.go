// Membership: the heartbeat into the node set, the node counts it yields,
// and the node count shadow quotas divide by.

package cluster

import "strconv"

// heartbeat scores this node in the membership set, trims members gone for
// longer than LiveMaxAge, and records two counts: live, the nodes that beat
// within MemberTTL (the ones answering), and known, the nodes seen within
// LiveMaxAge (the ones that may still be spending a shadow quota). It runs
// on the controller goroutine (and in New), with the per-call deadline.
//
// Redis's set is the cluster's memory of who was there, and a Redis that
// restarted empty has lost it: the first node back would see itself alone.
// A heartbeat that finds this node's own entry gone, though it beat within
// LiveMaxAge, says exactly that; the node then keeps the known count it had
// before, dated by its last heartbeat, so it stays in force for LiveMaxAge
// as the lost entries would have. A heartbeat that failed on this side
// (its deadline passed) may still have run on a restarted Redis and put
// the entry back: after a failure, fewer nodes known than before is taken
// for the same loss. Where no set was lost, the node then keeps counting a
// member that aged out for LiveMaxAge more, which only leaves it a smaller
// share.
func (c *Cluster) heartbeat(cl *redisClient) bool {
	reply, err := c.call(cl, heartbeatScript, c.membersKey, c.opt.NodeID, c.liveMSArg, c.keepMSArg)
	if err != nil || len(reply) != 3 {
		c.beatLost = true
		return false
	}
	now := c.now()
	prevAt := c.liveAt.Load()
	recent := prevAt != 0 && now-prevAt <= int64(c.opt.LiveMaxAge)
	lost := reply[2] == 0 || c.beatLost && reply[1] < c.known.Load()
	c.beatLost = false
	if lost && recent {
		c.heldKnown, c.heldAt = c.known.Load(), prevAt
	}
	known := reply[1]
	if c.heldAt != 0 && now-c.heldAt <= int64(c.opt.LiveMaxAge) {
		known = max(known, c.heldKnown)
	}
	live := min(max(reply[0], 1), known)
	c.live.Store(live)
	c.known.Store(known)
	c.liveAt.Store(now)
	for _, l := range *c.limits.Load() {
		l.setShare(live, known)
	}
	return true
}

// updateEffective recomputes the node count shadow quotas divide by:
//
//	effective = max(MinNodes, known)          while the counts are fresh
//	effective = max(MinNodes, FallbackNodes)  once they are older than LiveMaxAge, or unknown
//
// known counts every node seen within LiveMaxAge, answering or not: a node
// that stopped answering is on its shadow quota, which it computed from
// the same count. While Redis is healthy the counts are fresh, so the quota
// a node falls back to is ready before Redis fails. Owned by the
// controller.
func (c *Cluster) updateEffective(now int64) {
	n := int64(c.opt.FallbackNodes)
	if at := c.liveAt.Load(); at != 0 && now-at <= int64(c.opt.LiveMaxAge) {
		n = c.known.Load()
	}
	c.effective.Store(max(int64(c.opt.MinNodes), n))
}

// msArg is d in whole milliseconds, for a script.
func msArg(d int64) string { return strconv.FormatInt(d/1e6, 10) }
