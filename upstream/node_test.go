// Nodes across reloads: pools reused by node, retired pools draining, the
// outcomes calls report, and picks that pass over excluded nodes.

package upstream

import (
	"fmt"
	"testing"

	"github.com/loopgate/loopgate/pool/loopstat"
)

// count is how many observations h holds.
func count(h *loopstat.Histogram) uint64 {
	var s loopstat.Sum
	s.Add(h)
	return s.Count()
}

// Update keeps the pool (and the idle connection) of a node that stays,
// under its new settings, and retires the pool of a node that left: its
// idle connection closes at once, its busy one after its call.
func TestUpdateReusesAndRetiresPools(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t), listenAddr(t))
	stay, leave := tl.pool(0), tl.pool(1)
	_, stayConn := tl.exchange(stay)
	// The leaving node ends up with one idle connection and one carrying
	// a call (c2's).
	_, leaveIdle := tl.exchange(leave)
	c1, r1 := newCall()
	c1.Start(leave, head(getHead), getOpts) // takes the idle connection
	c2, _ := newCall()
	c2.Start(leave, head(getHead), getOpts) // dials a second one
	_, busyFC := tl.open()
	leaveIdle.receive("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	c1.conn.Traffic() // c1 done: its connection is idle again
	if r1.err != nil || leave.total != 2 || leave.Idle() != 1 {
		t.Fatalf("leaving pool: err %v, %d open, %d idle", r1.err, leave.total, leave.Idle())
	}

	next := &GroupConfig{Name: "g", Pool: testPool, Nodes: []NodeConfig{tl.gc.Nodes[0], nodes("10.9.9.9:80")[0]}}
	next.Pool.MaxIdle = 7
	next.Prepare()
	gs := tl.l.Update([]*GroupConfig{next})
	if gs[0].Pools()[0] != stay || stay.cfg.MaxIdle != 7 || stay.retired || stayConn.closed || stay.Idle() != 1 {
		t.Fatalf("kept node: same pool %v, max_idle %d, retired %v, its idle connection closed %v",
			gs[0].Pools()[0] == stay, stay.cfg.MaxIdle, stay.retired, stayConn.closed)
	}
	if !leave.retired || !leaveIdle.closed || leave.total != 1 || leave.stats.Closes[closeRetired].Load() != 1 {
		t.Fatalf("removed node: retired %v, idle connection closed %v, %d open, %d retired",
			leave.retired, leaveIdle.closed, leave.total, leave.stats.Closes[closeRetired].Load())
	}
	// The busy connection finishes its call, then closes instead of idling.
	deliver(c2.conn, busyFC, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	if c2.State() != Done || !busyFC.closed || leave.total != 0 {
		t.Fatalf("after the last call: state %s, closed %v, %d open", c2.State(), busyFC.closed, leave.total)
	}
	// A request of the older config may still use the retired pool: it
	// gets a connection of its own, closed after it.
	_, late := tl.exchange(leave)
	if !late.closed || leave.total != 0 {
		t.Fatalf("late call on a retired pool: connection closed %v, %d open", late.closed, leave.total)
	}
	// Gauges of the node count back to zero.
	if s := leave.node.Stats(0); s.Idle() != 0 || s.Active() != 0 {
		t.Fatalf("retired node gauges: idle %d, active %d", s.Idle(), s.Active())
	}
}

// Every call that ends on its own reports to its node: status, errors,
// durations; a call its owner aborted reports nothing.
func TestCallsReportOutcomes(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	s := p.node.Stats(0)
	tl.exchange(p)
	if s.Responses[1].Load() != 1 || count(&s.Duration) != 1 || count(&s.FirstByte) != 1 {
		t.Fatalf("after a 200: 2xx %d, durations %d, first bytes %d", s.Responses[1].Load(), count(&s.Duration), count(&s.FirstByte))
	}

	c, r := newCall()
	c.Start(p, head(getHead), getOpts)
	c.conn.gc.(*fakeConn).receive("HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n")
	c.conn.Traffic()
	if r.status != 503 || s.Responses[4].Load() != 1 || count(&s.Duration) != 2 {
		t.Fatalf("after a 503: 5xx %d, durations %d", s.Responses[4].Load(), count(&s.Duration))
	}

	c.Start(p, head(getHead), getOpts)
	tl.advance(2 * getOpts.ResponseTimeout)
	if r.err != ErrTimeout || s.Timeouts.Load() != 1 || count(&s.Duration) != 3 {
		t.Fatalf("after a timeout: err %v, timeouts %d, durations %d", r.err, s.Timeouts.Load(), count(&s.Duration))
	}

	c.Start(p, head(getHead), getOpts)
	_, _ = tl.open()
	c.Abort()
	if count(&s.Duration) != 3 {
		t.Fatal("an aborted call reported an outcome")
	}

	// Aborted after the final head (a status retried elsewhere): the node
	// answered, so the call reports that status.
	c, r, uc, fc := tl.getOpen(p)
	deliver(uc, fc, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 10\r\n\r\npart")
	c.Abort()
	if r.status != 502 || s.Responses[4].Load() != 2 || count(&s.Duration) != 4 {
		t.Fatalf("aborted after a 502 head: 5xx %d, durations %d", s.Responses[4].Load(), count(&s.Duration))
	}

	refused := newTestLoop(t, testPool, refusedAddr(t))
	c3, _ := newCall()
	c3.Start(refused.pool(0), head(getHead), getOpts)
	rs := refused.pool(0).node.Stats(0)
	if rs.ConnectFailures.Load() != 1 || count(&rs.Duration) != 1 {
		t.Fatalf("after a refused connect: failures %d, durations %d", rs.ConnectFailures.Load(), count(&rs.Duration))
	}
}

// Picks pass over excluded nodes, so a retry can go elsewhere, and fall
// back to the normal pick when every node is excluded.
func TestPicksExclude(t *testing.T) {
	rr := NewRoundRobin(3)
	for i := 0; i < 6; i++ {
		if got := rr.Pick(NodeSet{}.With(0).With(1)); got != 2 {
			t.Fatalf("round robin excluding 0 and 1 picked %d", got)
		}
	}
	if got := rr.Pick(NodeSet{}.With(0).With(1).With(2)); got < 0 || got > 2 {
		t.Fatalf("all excluded: %d", got)
	}
	sw := NewSmoothWeighted([]int{5, 1, 1})
	counts := make([]int, 3)
	for i := 0; i < 40; i++ {
		counts[sw.Pick(NodeSet{}.With(0))]++
	}
	if counts[0] != 0 || counts[1] != 20 || counts[2] != 20 {
		t.Fatalf("weighted picks excluding node 0: %v", counts)
	}

	tl := newTestLoop(t, testPool, "10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80")
	g := tl.groups[0]
	for i := 0; i < 20; i++ {
		key := []byte(fmt.Sprintf("user-%d", i))
		first := g.PickHash(key, NodeSet{})
		tried := g.Exclude(NodeSet{}, first)
		second := g.PickHash(key, tried)
		if second == first || g.PickHash(key, tried) != second {
			t.Fatalf("key %s: retry went to %s after %s", key, second.Addr, first.Addr)
		}
		if g.Pick(g.Exclude(tried, second)) == first || g.Pick(g.Exclude(tried, second)) == second {
			t.Fatal("Pick returned an excluded node")
		}
	}
}
