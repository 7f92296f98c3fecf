package upstream

import (
	"io"
	"testing"
)

// Every close of an established connection is counted once, under its
// reason; reuses are counted per idle connection taken.
func TestConnClosesCountedByReason(t *testing.T) {
	pc := testPool
	pc.MaxIdle = 1
	tl := newTestLoop(t, pc, listenAddr(t))
	p := tl.pool(0)
	closes := func() (n [closeReasons]uint64) {
		for r := range n {
			n[r] = p.stats.Closes[r].Load()
		}
		return n
	}
	want := func(what string, r closeReason, n uint64) {
		t.Helper()
		if got := p.stats.Closes[r].Load(); got != n {
			t.Fatalf("%s: %s closes %d, want %d (all: %v)", what, r, got, n, closes())
		}
	}

	// Two concurrent exchanges with max_idle 1: the second release hits the cap.
	uc1, fc1, _ := tl.releaseTwo(p)
	want("idle cap", closeIdleCap, 1)

	// Reused, then the upstream asks to close.
	c3, _ := newCall()
	c3.Start(p, head(getHead), getOpts)
	if p.stats.Reuses.Load() != 1 || c3.conn != uc1 {
		t.Fatalf("reuses %d", p.stats.Reuses.Load())
	}
	deliver(uc1, fc1, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
	want("Connection: close", closeUpstream, 1)

	// The upstream closes an idle connection.
	uc, _ := tl.exchange(p)
	uc.Closed(io.EOF)
	want("peer close", closeUpstream, 2)

	// An idle connection outlives idle_timeout.
	_, fc := tl.exchange(p)
	tl.advance(pc.IdleTimeout)
	if !fc.closed {
		t.Fatal("idle connection not closed at idle_timeout")
	}
	want("idle timeout", closeIdleTimeout, 1)

	// Bytes on an idle connection; a client that leaves mid-exchange.
	uc, fc = tl.exchange(p)
	deliver(uc, fc, "junk")
	want("bytes while idle", closeError, 1)
	c4, _ := newCall()
	c4.Start(p, head(getHead), getOpts)
	_, _ = tl.open()
	c4.Abort()
	want("aborted", closeAborted, 1)

	// The engine stops: gnet closes the connection with no error.
	uc, _ = tl.exchange(p)
	uc.Closed(nil)
	want("engine stop", closeRetired, 1)

	// A dial that never connected is a connect failure, not a close.
	total := uint64(0)
	for _, n := range closes() {
		total += n
	}
	if total != 7 {
		t.Fatalf("%d closes counted, want 7: %v", total, closes())
	}
}

// The Idle and Active gauges follow every move: dials, reuses and parks
// (counted through Reuses and parks alone), and closes of idle and
// active connections.
func TestPoolGaugesFollowReusesAndParks(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	want := func(what string, idle, active int64) {
		t.Helper()
		if i, a := p.stats.Idle(), p.stats.Active(); i != idle || a != active {
			t.Fatalf("%s: idle %d, active %d; want %d, %d", what, i, a, idle, active)
		}
	}
	want("no connection", 0, 0)
	c1, _, uc1, fc1 := tl.getOpen(p)
	want("one dialed", 0, 1)
	_, _, uc2, fc2 := tl.getOpen(p)
	want("two dialed", 0, 2)
	deliver(uc1, fc1, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	want("one parked", 1, 1)
	deliver(uc2, fc2, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	want("both parked", 2, 0)
	if c1.State() != Done {
		t.Fatalf("first call %s", c1.State())
	}

	c3, _ := newCall()
	c3.Start(p, head(getHead), getOpts)
	want("one reused", 1, 1)
	uc3 := c3.conn
	deliver(uc3, uc3.gc.(*fakeConn), "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
	want("the reused one closed after its response", 1, 0)

	uc, _ := tl.exchange(p) // the last idle one, reused and parked again
	want("reused and parked", 1, 0)
	uc.Closed(io.EOF)
	want("the idle one closed by its peer", 0, 0)
	if r := p.stats.Reuses.Load(); r != 2 {
		t.Fatalf("reuses %d, want 2", r)
	}
}
