// Rotation: whether an upstream has any node left in rotation, whatever
// took the others out (active checks, passive ejection, or both), and the
// upstream_down alert that says when it has none.

package upstream

import (
	"fmt"
	"time"

	"github.com/loopgate/loopgate/pool/alert"
	"github.com/loopgate/loopgate/pool/loopstat"
)

// rotationChanged re-judges whether every node of the upstream is out of
// rotation after n left or came back (n nil: a reload changed the nodes),
// and raises upstream_down when that begins or ends. It costs two loads
// unless the counters allow every node to be out; only then does it walk
// the nodes. Called where a node changes state: on a loop (an ejection, an
// ejection's end seen by a pick), on the prober, or at compile.
func (o *Outliers) rotationChanged(n *Node, why string) {
	// Two transitions judged at once can see each other half done: the
	// episode flag is set from what was seen, then judged again, until it
	// agrees with the nodes (a change flips it at most once more).
	for range 4 {
		out, ejected := o.allOut()
		if out == o.noneInRotation.Load() || !o.noneInRotation.CompareAndSwap(!out, out) {
			return
		}
		e := alert.Event{Kind: alert.UpstreamDown, Subject: o.name.Load().(string), Resolved: !out}
		addr := "-"
		if n != nil {
			addr = n.Addr
		}
		if out {
			e.Message = fmt.Sprintf("upstream=%s: no node in rotation (%d unhealthy, %d ejected; the last %s %s)",
				e.Subject, o.down.Load(), o.ejected.Load(), addr, why)
			if ejected {
				o.watchEjections()
			}
		} else {
			e.Message = fmt.Sprintf("upstream=%s node=%s %s: back in rotation", e.Subject, addr, why)
		}
		alert.Raise(e)
	}
}

// allOut reports whether every node of the upstream is out of rotation
// now, and whether an ejection holds one of them out (its end is a
// timer's to see when no pick asks).
func (o *Outliers) allOut() (out, ejected bool) {
	nodes := o.rotation.Load()
	if nodes == nil || len(*nodes) == 0 || int(o.ejected.Load()+o.down.Load()) < len(*nodes) {
		return false, false // some node is counted in neither
	}
	now := loopstat.Now()
	for _, n := range *nodes {
		switch until := n.outlier.until.Load(); {
		case n.Down():
		case until != 0 && until > now:
			ejected = true
		default:
			return false, false
		}
	}
	return true, ejected
}

// watchEjections ends the ejections that are over once they are, while
// every node is out: a pick ends one lazily (EjectedFor), but an upstream
// with no traffic has no pick, and its episode would never resolve. One
// timer per upstream at a time, armed only while no node is in rotation.
func (o *Outliers) watchEjections() {
	if !o.watching.CompareAndSwap(false, true) {
		return
	}
	nodes, now := o.rotation.Load(), loopstat.Now()
	next := int64(0)
	for _, n := range *nodes {
		if until := n.outlier.until.Load(); until > now && (next == 0 || until < next) {
			next = until
		}
	}
	if next == 0 {
		o.watching.Store(false)
		return
	}
	time.AfterFunc(time.Duration(next-now), func() {
		now := loopstat.Now()
		for _, n := range *o.rotation.Load() {
			n.EjectedFor(now) // ends it when it is over; unEject re-judges
		}
		o.watching.Store(false)
		if out, ejected := o.allOut(); out && ejected && o.noneInRotation.Load() {
			o.watchEjections()
		}
	})
}
