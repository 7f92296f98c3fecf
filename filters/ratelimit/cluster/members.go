// Membership: the heartbeat into the node set, and the node count shadow
// quotas divide by.

package cluster

import "strconv"

// heartbeat scores this node in the membership set, trims members that
// stopped beating, and records the live count. It runs on the controller
// goroutine (and in New), with the per-call deadline.
func (c *Cluster) heartbeat(cl *redisClient) bool {
	ttl := strconv.FormatInt(c.opt.MemberTTL.Milliseconds(), 10)
	reply, err := c.call(cl, heartbeatScript, c.membersKey, c.opt.NodeID, ttl)
	if err != nil || len(reply) != 1 {
		return false
	}
	c.live.Store(reply[0])
	c.liveAt.Store(c.now())
	return true
}

// updateEffective recomputes the node count shadow quotas divide by:
//
//	effective = max(MinNodes, live)           while the live count is fresh
//	effective = max(MinNodes, FallbackNodes)  once it is older than LiveMaxAge, or unknown
//
// While Redis is healthy the live count is fresh, so the quota a node falls
// back to is ready before Redis fails. Owned by the controller.
func (c *Cluster) updateEffective(now int64) {
	n := int64(c.opt.FallbackNodes)
	if at := c.liveAt.Load(); at != 0 && now-at <= int64(c.opt.LiveMaxAge) {
		n = c.live.Load()
	}
	c.effective.Store(max(int64(c.opt.MinNodes), n))
}
