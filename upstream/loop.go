// Loop: the upstream state one event loop owns, its groups and pools.

package upstream

import (
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/wheel"
	"github.com/panjf2000/gnet/v2"
)

// NodeConfig is one upstream node.
type NodeConfig struct {
	Addr   string
	Weight int
}

// GroupConfig is one named upstream: its nodes, how to balance across them
// and the limits and timeouts of each node's pool.
type GroupConfig struct {
	Name     string
	Nodes    []NodeConfig
	Weighted bool // smooth weighted round robin instead of plain round robin
	Pool     PoolConfig

	ring *hashRing // built once by Prepare
}

// Prepare builds what all loops share for the group. Call it once before
// NewLoop.
func (gc *GroupConfig) Prepare() { gc.ring = newHashRing(gc.Nodes) }

// PoolConfig bounds one node's connections on one loop.
type PoolConfig struct {
	MaxIdle        int
	MaxConns       int
	IdleTimeout    time.Duration
	ConnectTimeout time.Duration
	AcquireTimeout time.Duration
}

// Loop is the upstream side of one event loop. It is owned by that loop's
// goroutine; nothing in it is safe for concurrent use.
type Loop struct {
	el     gnet.EventLoop
	wheel  *wheel.Wheel
	limits codec.Limits // bounds on response heads (max_response_header_*)
	groups []*Group
	resp   codec.Response // scratch: valid only while a response head is handled

	logLimit logLimiter // upstream trouble logged from this loop
	// Owner is the engine's per-loop state, so a connection event can find
	// its loop without a lookup.
	Owner any

	// Guard runs a callback that arrived through EventLoop.Execute the way
	// the engine runs its own callbacks (see engine loop.enter). Nil runs it
	// bare.
	Guard func(func())
}

// run calls f under Guard.
func (l *Loop) run(f func()) {
	if l.Guard != nil {
		l.Guard(f)
		return
	}
	f()
}

// NewLoop builds the pools for every group on the loop el. limits bound the
// upstreams' response heads.
func NewLoop(el gnet.EventLoop, w *wheel.Wheel, limits codec.Limits, groups []GroupConfig) *Loop {
	l := &Loop{el: el, wheel: w, limits: limits}
	for _, gc := range groups {
		l.groups = append(l.groups, newGroup(l, gc))
	}
	return l
}

// Group returns the i-th group, in configuration order.
func (l *Loop) Group(i int) *Group { return l.groups[i] }

// Group is one upstream's nodes on one loop.
type Group struct {
	Name     string
	pools    []*Pool
	balancer Balancer
	ring     *hashRing // for PickHash; shared by every loop's group
}

func newGroup(l *Loop, gc GroupConfig) *Group {
	g := &Group{Name: gc.Name, ring: gc.ring}
	weights := make([]int, len(gc.Nodes))
	for i, n := range gc.Nodes {
		g.pools = append(g.pools, newPool(l, n.Addr, gc.Pool))
		weights[i] = n.Weight
	}
	if gc.Weighted {
		g.balancer = NewSmoothWeighted(weights)
	} else {
		g.balancer = NewRoundRobin(len(gc.Nodes))
	}
	return g
}

// Pick chooses the node pool for the next call.
func (g *Group) Pick() *Pool { return g.pools[g.balancer.Pick()] }

// PickHash chooses the node for key by consistent hashing: the same key gets
// the same node on every loop and every gateway with the same nodes.
func (g *Group) PickHash(key []byte) *Pool { return g.pools[g.ring.lookup(key)] }

// Pools returns the group's node pools, for stats and tests.
func (g *Group) Pools() []*Pool { return g.pools }

// logLimiter lets one log line through per second. Owned by the loop.
type logLimiter struct{ last time.Time }

// Allow reports whether a line may be logged at now.
func (l *logLimiter) Allow(now time.Time) bool {
	if now.Sub(l.last) < time.Second {
		return false
	}
	l.last = now
	return true
}
