// Passive outlier ejection: nodes that fail real traffic in a row leave
// rotation for an exponentially growing time, at most a share of an
// upstream's nodes at once.

package upstream

import (
	"log"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/pool/loopstat"
)

// OutlierConfig is one upstream's ejection policy.
type OutlierConfig struct {
	Consecutive      int32         // failures in a row that eject a node (connect errors, resets, timeouts, 5xx)
	BaseEjection     time.Duration // the first ejection's length; the k-th lasts Base × 2^(k−1)
	MaxEjection      time.Duration // the cap on an ejection's length
	MaxEjectedPct    int32         // at most this share of the upstream's nodes is ejected at once
	ForgetAfterClean time.Duration // back this long without an ejection, a node's next one is a first again
}

// Outliers is one upstream's availability state across its nodes: the
// ejection policy and how many nodes are ejected, the active check and how
// many nodes it holds down (health.go), and when a node last came back
// (slow start). Shared by every loop; kept by the engine under the
// upstream's name, so reloads keep it.
type Outliers struct {
	cfg        atomic.Pointer[OutlierConfig]
	nodes      atomic.Int32 // nodes in the upstream now
	ejected    atomic.Int32 // nodes ejected now
	down       atomic.Int32 // nodes active checks took down
	health     atomic.Pointer[HealthCheckConfig]
	lastUp     atomic.Int64 // loopstat.Now when a node last came into rotation (slow start)
	members    []*Node      // the nodes Configure last set; off the loops only
	configured bool         // Configure ran before: nodes it adds are new (slow start)

	// Rotation (rotation.go): the nodes as every loop may read them, the
	// upstream's name for its alert, whether none is in rotation (an
	// upstream_down episode is open) and whether a timer watches the
	// ejections that hold them out.
	rotation       atomic.Pointer[[]*Node]
	name           atomic.Value // string
	noneInRotation atomic.Bool
	watching       atomic.Bool
}

// Configure sets the policy (nil disables ejection) and makes nodes the
// upstream's: their ejections count against it. A node a reload removed
// stops counting, ejected or not. Off the loops, at compile.
func (o *Outliers) Configure(cfg *OutlierConfig, nodes []*Node) {
	o.cfg.Store(cfg)
	o.nodes.Store(int32(len(nodes)))
	keep := make(map[*Node]bool, len(nodes))
	was := make(map[*Node]bool, len(o.members))
	for _, n := range o.members {
		was[n] = true
	}
	var out, down int32
	for _, n := range nodes {
		keep[n] = true
		n.outlier.group.Store(o)
		if o.configured && !was[n] {
			n.markUp() // added by a reload: it ramps up (slow start)
		}
		if n.outlier.until.Load() != 0 {
			out++
		}
		if n.Down() {
			down++
		}
	}
	for _, n := range o.members {
		if !keep[n] {
			n.outlier.group.CompareAndSwap(o, nil) // its return no longer counts here
		}
	}
	o.members = nodes
	o.configured = true
	o.ejected.Store(out)
	o.down.Store(down)
	if len(nodes) > 0 {
		o.name.Store(nodes[0].Upstream)
		o.rotation.Store(&o.members)
		o.rotationChanged(nil, "reload")
	}
}

// SetHealthCheck sets the upstream's active check (nil: none). Off the
// loops, at activation, before its nodes are handed to the prober.
func (o *Outliers) SetHealthCheck(hc *HealthCheckConfig) { o.health.Store(hc) }

// Ejected returns how many of the upstream's nodes are ejected now.
func (o *Outliers) Ejected() int { return int(o.ejected.Load()) }

// nodeOutlier is one node's ejection state.
type nodeOutlier struct {
	group       atomic.Pointer[Outliers]
	consecutive atomic.Int32 // failures in a row
	ejecting    atomic.Bool  // ejected, or being ejected (one loop wins)
	until       atomic.Int64 // loopstat.Now when the ejection ends; 0 when not ejected
	ejections   atomic.Int32 // ejections so far, for the back-off
	back        atomic.Int64 // loopstat.Now when the node last came back
	total       atomic.Uint64
}

// EjectedFor returns how long n stays ejected; 0 when it is in rotation.
// A node whose time is up comes back here, whoever asks first.
func (n *Node) EjectedFor(now int64) time.Duration {
	until := n.outlier.until.Load()
	if until == 0 {
		return 0
	}
	if left := until - now; left > 0 {
		return time.Duration(left)
	}
	n.unEject(until, now)
	return 0
}

// Ejections returns how many times n was ejected.
func (n *Node) Ejections() uint64 { return n.outlier.total.Load() }

// judge counts an outcome against n's run of failures and ejects n when
// the run reaches the upstream's threshold. On the reporting loop.
func (n *Node) judge(o *Outcome) {
	g := n.outlier.group.Load()
	if g == nil {
		return
	}
	cfg := g.cfg.Load()
	if cfg == nil {
		return
	}
	failed := o.Err == ErrConnect || o.Err == ErrReset || o.Err == ErrTimeout || o.Err == nil && o.Status >= 500
	out := &n.outlier
	if !failed {
		// Every loop reports to the node: a load on success, the common
		// case, keeps its cache line shared rather than written per call.
		if out.consecutive.Load() != 0 {
			out.consecutive.Store(0)
		}
		return
	}
	if out.consecutive.Add(1) < cfg.Consecutive {
		return
	}
	n.eject(g, cfg, loopstat.Now())
}

// eject takes n out of rotation unless it is out already or the upstream
// has its share of nodes out.
func (n *Node) eject(g *Outliers, cfg *OutlierConfig, now int64) {
	out := &n.outlier
	if !out.ejecting.CompareAndSwap(false, true) {
		return
	}
	limit := g.nodes.Load() * cfg.MaxEjectedPct / 100
	if g.ejected.Add(1) > limit {
		g.ejected.Add(-1)
		out.ejecting.Store(false)
		return
	}
	if back := out.back.Load(); back != 0 && now-back > int64(cfg.ForgetAfterClean) {
		out.ejections.Store(0) // it behaved long enough: start the back-off over
	}
	k := out.ejections.Add(1)
	d := cfg.BaseEjection << min(k-1, 30)
	if d > cfg.MaxEjection || d <= 0 {
		d = cfg.MaxEjection
	}
	out.total.Add(1)
	out.consecutive.Store(0)
	out.until.Store(now + int64(d))
	// Once per ejection. The engine queues the standard logger's output
	// (engine/notices.go), so this never waits on stderr.
	log.Printf("outlier upstream=%s node=%s ejected for %s (ejection %d, %d failures in a row)", n.Upstream, n.Addr, d, k, cfg.Consecutive)
	g.rotationChanged(n, "ejected")
}

// unEject brings n back once its ejection, ending at until, is over. One
// more failure ejects it again, for longer: its run starts one short.
func (n *Node) unEject(until, now int64) {
	out := &n.outlier
	if !out.until.CompareAndSwap(until, 0) {
		return
	}
	g := out.group.Load()
	if g != nil {
		g.ejected.Add(-1)
		if cfg := g.cfg.Load(); cfg != nil {
			out.consecutive.Store(cfg.Consecutive - 1)
		}
	}
	out.back.Store(now)
	n.markUp()
	out.ejecting.Store(false)
	log.Printf("outlier upstream=%s node=%s back in rotation", n.Upstream, n.Addr)
	if g != nil {
		g.rotationChanged(n, "ejection over")
	}
}

// Unavailable returns the set of the group's nodes that are out of
// rotation now, for Pick and PickHash to pass over: every node, however
// many the group has. It costs one atomic load while no node of the
// upstream is out. While one is, a group of up to 64 nodes is tested here
// into the set's bitmask, and a larger one's nodes are tested as a pick
// considers them: round robin and the hash ring test a few, not hundreds.
func (g *Group) Unavailable() NodeSet {
	if len(g.pools) == 0 {
		return NodeSet{}
	}
	o := g.pools[0].node.outlier.group.Load()
	if o == nil || o.ejected.Load() == 0 && o.down.Load() == 0 {
		return NodeSet{}
	}
	out := outOfRotation{g: g, ejected: o.ejected.Load() > 0, down: o.holdsDown(g)}
	if !out.ejected && !out.down {
		return NodeSet{}
	}
	if out.ejected {
		out.now = loopstat.Now()
	}
	if len(g.pools) > 64 {
		return NodeSet{out: out, more: true}
	}
	var s NodeSet
	for i := range g.pools {
		if out.has(i) {
			s.low |= 1 << uint(i)
		}
	}
	return s
}

// FailuresInARow returns n's current run of failed calls (connect errors,
// resets, timeouts, 5xx).
func (n *Node) FailuresInARow() int { return int(n.outlier.consecutive.Load()) }
