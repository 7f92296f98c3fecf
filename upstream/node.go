// Node: one upstream node, shared by every loop's pool for it, and the
// outcomes calls report to it.

package upstream

import (
	"fmt"
	"sync/atomic"
	"time"
)

// Node is one upstream node: an address within a named upstream. The
// engine makes one per upstream name and address and keeps it across
// reloads that keep the node, and every loop's Pool for the node shares
// it. Every call to the node reports how it ended here (see Outcome), so
// what the gateway learns about a node lives in one place under a stable
// name: metrics read it, and passive health, outlier ejection and circuit
// breakers are meant to read it too.
//
// Safe for concurrent use: a loop writes only its own shard, with atomics,
// and any goroutine may read every shard.
type Node struct {
	Upstream string // the upstream's name
	Addr     string // "host:port"

	shards  []nodeShard  // by loop index (Host.Index)
	outlier nodeOutlier  // passive ejection (outlier.go)
	health  nodeHealth   // active health checks (health.go)
	upSince atomic.Int64 // loopstat.Now when it last came (back) into rotation, for slow start; 0 = in it from the start
}

// nodeShard keeps one loop's stats off the cache lines of the others.
type nodeShard struct {
	_ [64]byte
	NodeStats
	_ [64]byte
}

// NewNode makes the node addr of upstream, with stats for loops event
// loops.
func NewNode(upstream, addr string, loops int) *Node {
	return &Node{Upstream: upstream, Addr: addr, shards: make([]nodeShard, max(loops, 1))}
}

// Loops returns how many loops the node keeps stats for.
func (n *Node) Loops() int { return len(n.shards) }

// Stats returns what loop recorded for the node. Safe for concurrent use;
// only loop writes it.
func (n *Node) Stats(loop int) *NodeStats { return &n.shards[loop].NodeStats }

// shard is loop's stats, checked: a Host whose index is out of range is
// a wiring error, reported as one rather than as an index panic.
func (n *Node) shard(loop int) *NodeStats {
	if loop < 0 || loop >= len(n.shards) {
		panic(fmt.Sprintf("upstream: node %s/%s has stats for %d loops, not for loop %d", n.Upstream, n.Addr, len(n.shards), loop))
	}
	return &n.shards[loop].NodeStats
}

// Outcome is how one call to a node ended. Call reports one per call that
// ended on its own: completed, or failed by the node, the network or a
// deadline. A call its owner aborted before the node answered (the client
// left) reports nothing, since the node did not decide how it ended; one
// aborted after the final response head (a status retried elsewhere)
// reports that status.
type Outcome struct {
	Err    *Error        // why the call failed (ErrConnect, ErrReset, ErrTimeout, ...); nil when the response completed
	Status int           // the final response status; 0 when none arrived
	Total  time.Duration // from Start to the end of the call, pool wait, connect and a retry included
}

// report records o in the stats of loop's shard. On that loop only.
func (n *Node) report(s *NodeStats, o *Outcome) {
	if o.Err != nil {
		s.failed(o.Err)
	}
	if o.Status >= 100 {
		class := min(o.Status/100, 5) - 1
		s.Responses[class].Add(1)
	}
	s.Duration.Observe(int64(o.Total))
	n.judge(o)
}
