// Pool and group behaviour on the in-memory loop: waiters, limits, dials
// that fail or finish late, idle expiry, node selection; and the names and
// error types callers rely on.

package upstream

import (
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// With max_conns busy, calls wait in order for a released connection; the
// wait queue holds as many again, then a call fails at once.
func TestPoolWaiters(t *testing.T) {
	pc := testPool
	pc.MaxConns = 1
	tl := newTestLoop(t, pc, listenAddr(t))
	p := tl.pool(0)

	_, _, uc, fc := tl.getOpen(p)

	aborted, _ := newCall()
	aborted.Start(p, head(getHead), getOpts)
	if aborted.waiting != p || len(p.waiters) != 1 {
		t.Fatalf("second call is not waiting: %d waiters", len(p.waiters))
	}
	aborted.Abort() // the client left while waiting
	if len(p.waiters) != 0 || aborted.State() != Failed {
		t.Fatalf("aborted waiter: %d waiters, state %s", len(p.waiters), aborted.State())
	}

	c2, r2 := newCall()
	c2.Start(p, head(getHead), getOpts)
	c3, r3 := newCall()
	c3.Start(p, head(getHead), getOpts)
	if r3.err != ErrQueueFull || r3.err.Timeout() || r3.err.Status != 503 {
		t.Fatalf("call past the wait queue: %v", r3.err)
	}
	if c3.State() != Failed {
		t.Fatalf("state %s", c3.State())
	}

	// c1 completes: its connection goes straight to c2.
	fc.out.Reset()
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	if c2.conn != uc || c2.State() != Sent || fc.sent() != getHead || p.Idle() != 0 || r2.ready != 1 {
		t.Fatalf("waiter not handed the released connection: state %s, sent %q", c2.State(), fc.sent())
	}

	// c4 waits past pool_acquire_timeout.
	c4, r4 := newCall()
	c4.Start(p, head(getHead), getOpts)
	tl.advance(2 * pc.AcquireTimeout)
	if r4.err != ErrPoolFull || !r4.err.Timeout() || len(p.waiters) != 0 {
		t.Fatalf("waiter past the acquire timeout: %v, %d waiters", r4.err, len(p.waiters))
	}
	c2.Abort()
}

// When a connection goes away, the first waiter dials in its place.
func TestPoolRemoveLetsWaiterDial(t *testing.T) {
	pc := testPool
	pc.MaxConns = 1
	tl := newTestLoop(t, pc, listenAddr(t))
	p := tl.pool(0)

	_, r1, uc, _ := tl.getOpen(p)
	c2, _ := newCall()
	c2.Start(p, head(getHead), getOpts)
	uc.Closed(io.EOF) // closed before any response: c1 fails, c2 dials
	if r1.err != ErrReset || c2.dialing == nil || len(p.waiters) != 0 {
		t.Fatalf("c1 err %v, c2 dialing %v, %d waiters", r1.err, c2.dialing != nil, len(p.waiters))
	}
	_, fc2 := tl.open()
	if fc2.sent() != getHead || c2.State() != Sent {
		t.Fatalf("c2 after its dial: sent %q, state %s", fc2.sent(), c2.State())
	}
	c2.Abort()
}

func TestPoolDialFailures(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		// Settled on the loop inside Start: no goroutine, no hand-off.
		tl := newTestLoop(t, testPool, refusedAddr(t))
		p := tl.pool(0)
		c, r := newCall()
		c.Start(p, head(getHead), getOpts)
		if r.err != ErrConnect || p.stats.ConnectFailures.Load() != 1 || p.total != 0 || c.State() != Failed || tl.host.guarded != 0 {
			t.Fatalf("err %v, failures %d, total %d, state %s, guarded %d", r.err, p.stats.ConnectFailures.Load(), p.total, c.State(), tl.host.guarded)
		}
	})
	t.Run("refused, by host name", func(t *testing.T) {
		tl := newTestLoop(t, testPool, byName(refusedAddr(t)))
		p := tl.pool(0)
		c, r := newCall()
		c.Start(p, head(getHead), getOpts)
		tl.runTask()
		if r.err != ErrConnect || p.stats.ConnectFailures.Load() != 1 || p.total != 0 || c.State() != Failed || tl.host.guarded != 1 {
			t.Fatalf("err %v, failures %d, total %d, state %s, guarded %d", r.err, p.stats.ConnectFailures.Load(), p.total, c.State(), tl.host.guarded)
		}
	})
	t.Run("adopt refused", func(t *testing.T) {
		tl := newTestLoop(t, testPool, listenAddr(t))
		tl.host.adoptErr = errors.New("engine stopping")
		c, r := newCall()
		c.Start(tl.pool(0), head(getHead), getOpts)
		tl.runTask() // the adoption, once the round of events is over
		if r.err != ErrConnect || tl.pool(0).total != 0 {
			t.Fatalf("err %v, total %d", r.err, tl.pool(0).total)
		}
	})
	t.Run("enroll refused", func(t *testing.T) {
		tl := newTestLoop(t, testPool, byName(listenAddr(t)))
		tl.el.enrollErr = errors.New("engine stopping")
		c, r := newCall()
		c.Start(tl.pool(0), head(getHead), getOpts)
		tl.runTask()
		if r.err != ErrConnect || tl.pool(0).total != 0 {
			t.Fatalf("err %v, total %d", r.err, tl.pool(0).total)
		}
	})
	t.Run("registration fails", func(t *testing.T) {
		tl := newTestLoop(t, testPool, byName(listenAddr(t)))
		c, r := newCall()
		c.Start(tl.pool(0), head(getHead), getOpts)
		e := tl.enrolled()
		e.res <- gnet.RegisteredResult{Err: errors.New("register failed")}
		tl.runTask()
		if r.err != ErrConnect || c.State() != Failed {
			t.Fatalf("err %v, state %s", r.err, c.State())
		}
	})
	t.Run("connect timeout", func(t *testing.T) {
		// Adopted but not opened in time: the connect timeout on the
		// loop's clock ends the dial, and a late OnOpen is closed.
		tl := newTestLoop(t, testPool, listenAddr(t))
		p := tl.pool(0)
		c, r := newCall()
		c.Start(p, head(getHead), getOpts)
		e := tl.enrolled()
		tl.advance(testPool.ConnectTimeout - time.Millisecond)
		if r.err != nil {
			t.Fatalf("failed before the connect timeout: %v", r.err)
		}
		tl.advance(time.Millisecond)
		if r.err != ErrConnect || p.total != 0 || p.stats.ConnectFailures.Load() != 1 {
			t.Fatalf("err %v, total %d, failures %d", r.err, p.total, p.stats.ConnectFailures.Load())
		}
		fc := &fakeConn{sock: -1}
		e.uc.Opened(fc)
		if !fc.closed || p.Idle() != 0 {
			t.Fatalf("late connection: closed %v, idle %d", fc.closed, p.Idle())
		}
	})
	t.Run("after the call gave up", func(t *testing.T) {
		tl := newTestLoop(t, testPool, byName(refusedAddr(t)))
		p := tl.pool(0)
		c, r := newCall()
		c.Start(p, head(getHead), getOpts)
		c.Abort()
		tl.runTask()
		if r.err != nil || p.total != 0 || p.stats.ConnectFailures.Load() != 1 {
			t.Fatalf("err %v (the owner already left), total %d", r.err, p.total)
		}
	})
}

// byName spells addr's host as a name, so the pool dials it off the loop.
func byName(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return net.JoinHostPort("localhost", port)
}

// A dial that completes after its call gave up is not wasted: the
// connection goes to the pool.
func TestPoolLateDialIsPooled(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	c, r := newCall()
	c.Start(p, head(getHead), getOpts)
	c.Abort()
	uc, fc := tl.open()
	if p.Idle() != 1 || uc.state != connIdle || fc.sent() != "" || fc.closed || r.ready != 0 {
		t.Fatalf("late connection: idle %d, state %s, sent %q", p.Idle(), uc.state, fc.sent())
	}
	// and it expires like any idle connection
	tl.advance(2 * testPool.IdleTimeout)
	if !fc.closed || p.Idle() != 0 || p.total != 0 {
		t.Fatalf("after idle_timeout: closed %v, idle %d, total %d", fc.closed, p.Idle(), p.total)
	}
}

// A connection closed while still dialing is dropped when the dial ends,
// whichever way it ends.
func TestPoolConnClosedWhileDialing(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	c, r := newCall()
	c.Start(p, head(getHead), getOpts)
	c.dialing.closeFor(closeError)
	if c.dialing != nil || p.total != 0 || p.stats.Closes[closeError].Load() != 0 {
		t.Fatalf("dialing %v, total %d, closes %d (a connection that never opened is not a close)",
			c.dialing != nil, p.total, p.stats.Closes[closeError].Load())
	}
	// Connected but not yet adopted: the socket is closed, never adopted.
	// The socket's inode tells it apart from whatever may reuse its fd.
	fd := tl.l.connected[0].fd
	var before, after unix.Stat_t
	if err := unix.Fstat(fd, &before); err != nil {
		t.Fatal(err)
	}
	tl.runTask()
	select {
	case e := <-tl.el.enrolls:
		e.close()
		t.Fatal("a socket connected for a closed connection was adopted")
	default:
	}
	if err := unix.Fstat(fd, &after); err == nil && after.Ino == before.Ino || p.Idle() != 0 || r.ready != 0 {
		t.Fatalf("socket still open, idle %d, ready %d", p.Idle(), r.ready)
	}
	c.Abort()

	// Closed after the adoption but before OnOpen: closed at OnOpen.
	c1, r1 := newCall()
	c1.Start(p, head(getHead), getOpts)
	e := tl.enrolled()
	c1.dialing.closeFor(closeError)
	fc := &fakeConn{sock: -1}
	e.uc.Opened(fc)
	if !fc.closed || p.Idle() != 0 || r1.ready != 0 {
		t.Fatalf("dial completed for a closed connection: closed %v, idle %d", fc.closed, p.Idle())
	}
	c1.Abort()

	tl2 := newTestLoop(t, testPool, byName(refusedAddr(t)))
	p2 := tl2.pool(0)
	c2, r2 := newCall()
	c2.Start(p2, head(getHead), getOpts)
	c2.dialing.closeFor(closeError)
	tl2.runTask()
	if p2.stats.ConnectFailures.Load() != 0 || p2.total != 0 || r2.err != nil {
		t.Fatalf("failed dial of a closed connection: failures %d, total %d", p2.stats.ConnectFailures.Load(), p2.total)
	}
	c2.Abort()
}

// max_idle bounds the free list: a connection released beyond it closes.
func TestPoolMaxIdle(t *testing.T) {
	pc := testPool
	pc.MaxIdle = 1
	tl := newTestLoop(t, pc, listenAddr(t))
	p := tl.pool(0)
	_, fc1, fc2 := tl.releaseTwo(p)
	if p.Idle() != 1 || fc1.closed || !fc2.closed {
		t.Fatalf("idle %d, first closed %v, second closed %v", p.Idle(), fc1.closed, fc2.closed)
	}
}

// A stale idle connection (bytes arrived unnoticed) is skipped at acquire.
func TestPoolSkipsUnusableIdle(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	_, fc := tl.exchange(p)
	fc.in = append(fc.in, "junk"...) // not yet seen by Traffic
	c, _ := newCall()
	c.Start(p, head(getHead), getOpts)
	if !fc.closed || c.dialing == nil || p.stats.Reuses.Load() != 0 {
		t.Fatalf("closed %v, dialing %v, reuses %d", fc.closed, c.dialing != nil, p.stats.Reuses.Load())
	}
	c.Abort()
}

// Consistent hashing spreads different keys over the nodes and keeps each
// key on its node; Pick balances without a key.
func TestGroupPicks(t *testing.T) {
	tl := newTestLoop(t, testPool, "10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80")
	g := tl.groups[0]
	if len(g.Pools()) != 3 || g.Name != "g" {
		t.Fatalf("group %q with %d pools", g.Name, len(g.Pools()))
	}
	used := map[*Pool]int{}
	for i := 0; i < 30; i++ {
		key := []byte(fmt.Sprintf("user-%d", i))
		p := g.PickHash(key, NodeSet{})
		if g.PickHash(key, NodeSet{}) != p {
			t.Fatalf("key %s moved", key)
		}
		used[p]++
	}
	if len(used) != 3 {
		t.Fatalf("30 keys on %d of 3 nodes", len(used))
	}
	for i := 0; i < 6; i++ {
		if got, want := g.Pick(NodeSet{}), g.Pools()[i%3]; got != want {
			t.Fatalf("pick %d: %s, want %s", i, got.Addr, want.Addr)
		}
	}

	gc := &GroupConfig{Name: "w", Weighted: true, Pool: testPool, Nodes: nodes("a:1", "b:1")}
	gc.Nodes[0].Weight = 3
	gc.Prepare()
	wl := NewLoop(tl.el, tl.host, tl.clock, tl.l.limits)
	wg := wl.Update([]*GroupConfig{gc})[0]
	counts := map[string]int{}
	for i := 0; i < 8; i++ {
		counts[wg.Pick(NodeSet{}).Addr]++
	}
	if counts["a:1"] != 6 || counts["b:1"] != 2 {
		t.Fatalf("weighted picks %v, want a:1 x6, b:1 x2", counts)
	}
}

func TestBalancerEdgeCases(t *testing.T) {
	one := NewRoundRobin(1)
	sw := NewSmoothWeighted([]int{7})
	for i := 0; i < 3; i++ {
		if one.Pick(NodeSet{}) != 0 || sw.Pick(NodeSet{}) != 0 {
			t.Fatal("a single node is not always picked")
		}
	}
	eq := NewSmoothWeighted([]int{2, 2, 2})
	for i := 0; i < 6; i++ {
		if got := eq.Pick(NodeSet{}); got != i%3 {
			t.Fatalf("equal weights pick %d = %d, want round robin", i, got)
		}
	}
}

func TestConnStateNames(t *testing.T) {
	for s, name := range map[connState]string{connDialing: "dialing", connIdle: "idle", connActive: "active", connClosed: "closed"} {
		if s.String() != name {
			t.Errorf("%d.String() = %q, want %q", s, s.String(), name)
		}
	}
}

// Callers decide retries and logging from the error's type, not its text:
// only deadline failures are Timeout().
func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		err     *Error
		status  int
		timeout bool
	}{
		{ErrConnect, 502, false},
		{ErrReset, 502, false},
		{ErrBadResponse, 502, false},
		{ErrHeadTooLarge, 502, false},
		{ErrPoolFull, 503, true},
		{ErrQueueFull, 503, false},
		{ErrTimeout, 504, true},
	} {
		var e error = tc.err
		if tc.err.Status != tc.status || tc.err.Timeout() != tc.timeout || e.Error() != tc.err.Message || e.Error() == "" {
			t.Errorf("%q: status %d timeout %v", e.Error(), tc.err.Status, tc.err.Timeout())
		}
	}
	if ErrQueueFull.Code != ErrPoolFull.Code {
		t.Error("the two pool-exhaustion errors carry different codes")
	}
}

// A node given by IP address is connected on the loop, inside Start, and
// adopted there later, together with the sockets connected around it:
// one ring of the host's round bell for the group, or where there is no
// bell one task; nothing handed to another goroutine. A node given by
// host name goes through the resolver and Enroll, off the loop.
func TestPoolDialsAddressesOnTheLoop(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t), listenAddr(t))
	c, _ := newCall()
	c.Start(tl.pool(0), head(getHead), getOpts)
	c1, _ := newCall()
	c1.Start(tl.pool(1), head(getHead), getOpts)
	if n := len(tl.l.connected); n != 2 {
		t.Fatalf("%d sockets connected in Start, want 2", n)
	}
	if len(tl.el.enrolls) != 0 || len(tl.el.tasks) != 1 {
		t.Fatalf("%d adopted before the round ended, %d tasks queued (want 0 and 1)", len(tl.el.enrolls), len(tl.el.tasks))
	}
	tl.runTask()
	for range 2 {
		select {
		case e := <-tl.el.enrolls:
			defer e.close()
			if e.nc != nil {
				t.Fatal("an IP node was dialed off the loop (Enroll)")
			}
		default:
			t.Fatal("the round's task did not adopt every socket connected in it")
		}
	}
	c.Abort()
	c1.Abort()

	// With the host's round bell, the group rings it once and waits for
	// RoundBell instead of a task.
	rung := newTestLoop(t, testPool, listenAddr(t), listenAddr(t))
	rung.host.bell = true
	r0, _ := newCall()
	r0.Start(rung.pool(0), head(getHead), getOpts)
	r1, _ := newCall()
	r1.Start(rung.pool(1), head(getHead), getOpts)
	if rung.host.rings != 1 || len(rung.el.tasks) != 0 || len(rung.el.enrolls) != 0 {
		t.Fatalf("%d rings, %d tasks, %d adopted before the bell (want 1, 0, 0)", rung.host.rings, len(rung.el.tasks), len(rung.el.enrolls))
	}
	rung.l.RoundBell()
	if len(rung.el.enrolls) != 2 {
		t.Fatalf("the bell adopted %d of the 2 sockets", len(rung.el.enrolls))
	}
	for range 2 {
		(<-rung.el.enrolls).close()
	}
	r0.Abort()
	r1.Abort()

	byname := newTestLoop(t, testPool, byName(listenAddr(t)))
	c2, _ := newCall()
	c2.Start(byname.pool(0), head(getHead), getOpts)
	if e := byname.enrolled(); e.nc == nil {
		t.Fatal("a host name was connected without the resolver")
	}
	c2.Abort()
}

// A connection that must close after the response it is reading (the
// upstream said Connection: close) is left for the handler to close as
// Traffic returns, inline, rather than closed through a task queued to the
// loop; the pool has let it go already.
func TestTrafficClosesInline(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	_, r, uc, fc := tl.getOpen(p)
	fc.receive("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
	if !uc.Traffic() {
		t.Fatal("Traffic did not ask the handler to close the connection")
	}
	if fc.closed || !r.done || p.total != 0 || p.Idle() != 0 {
		t.Fatalf("closed through Close %v, done %v, total %d, idle %d", fc.closed, r.done, p.total, p.Idle())
	}
	// Closed outside a read, a connection is closed through gnet's Close.
	c2, _, _, fc2 := tl.getOpen(p)
	c2.Abort()
	if !fc2.closed {
		t.Fatal("a close outside Traffic did not reach gnet")
	}
}

// Which node addresses are dialed on the loop, and as what.
func TestSockaddr(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:80":          "127.0.0.1:80",
		"[::1]:8080":            "[::1]:8080",
		"[::ffff:10.0.0.1]:443": "10.0.0.1:443", // IPv4-mapped: connected as IPv4
		"localhost:80":          "",             // a host name: resolved off the loop
		"[fe80::1%eth0]:80":     "",             // a zone: left to net.Dial
	} {
		sa, remote := sockaddr(addr)
		got := ""
		if sa != nil {
			got = remote.String()
		}
		if got != want {
			t.Errorf("sockaddr(%q) = %q, want %q", addr, got, want)
		}
	}
}

// A connection gnet has closed (Closed, its OnClose) serves the next dial
// with its Conn and timer, not one the pool let go that gnet still holds:
// the next dial before Closed gets a Conn of its own. The reused Conn is
// the new dial's through and through: its call, its connection, and its
// timer, which fires for it (the idle timeout here).
func TestClosedConnServesTheNextDial(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	_, r1, uc1, fc1 := tl.getOpen(p)
	deliver(uc1, fc1, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok")
	if !r1.done || !fc1.closed {
		t.Fatalf("first exchange: done %v, closed %v", r1.done, fc1.closed)
	}
	c2, _, uc2, _ := tl.getOpen(p) // gnet has not reported uc1 closed yet
	if uc2 == uc1 {
		t.Fatal("a Conn gnet had not closed yet served another dial")
	}
	c2.Abort()
	uc1.Closed(io.EOF) // gnet's OnClose
	uc2.Closed(nil)
	if n := len(tl.l.spare); n != 2 {
		t.Fatalf("%d spare Conns after two closes, want 2", n)
	}

	_, r3, uc3, fc3 := tl.getOpen(p)
	if uc3 != uc2 && uc3 != uc1 {
		t.Fatal("the dial after the closes made a new Conn")
	}
	if uc3.gc != fc3 || uc3.state != connActive || uc3.dialFor != nil || uc3.served != 0 {
		t.Fatalf("reused Conn: gc ok %v, state %v, dialFor %v, served %d", uc3.gc == fc3, uc3.state, uc3.dialFor, uc3.served)
	}
	deliver(uc3, fc3, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	if !r3.done || p.Idle() != 1 {
		t.Fatalf("third exchange: done %v, idle %d", r3.done, p.Idle())
	}
	tl.advance(testPool.IdleTimeout + time.Second)
	if !fc3.closed || p.Idle() != 0 {
		t.Fatalf("after the idle timeout: closed %v, idle %d: the reused timer did not fire for its new connection", fc3.closed, p.Idle())
	}
}

// idle_timeout counts from a connection's latest release, though its timer
// stays armed while a call uses the connection: a connection reused before
// its first deadline is not closed there, one busy at a deadline is left
// alone, and each is closed idle_timeout after it last went idle.
func TestPoolIdleTimeoutFromLatestRelease(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	idle := testPool.IdleTimeout
	exchange := func(uc *Conn, fc *fakeConn) *Call {
		c, _ := newCall()
		c.Start(p, head(getHead), getOpts)
		if c.conn != uc {
			t.Fatalf("the idle connection was not reused")
		}
		deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		return c
	}
	_, _, uc, fc := tl.getOpen(p)
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") // idle at 0
	tl.advance(idle / 2)
	exchange(uc, fc)                 // idle again at idle/2
	tl.advance(idle/2 + time.Second) // the first deadline passes
	if fc.closed || p.Idle() != 1 {
		t.Fatalf("closed %v at the deadline of an earlier idle period", fc.closed)
	}
	tl.advance(idle/2 - 2*time.Second)
	if fc.closed {
		t.Fatal("closed before idle_timeout since its latest release")
	}
	tl.advance(2 * time.Second)
	if !fc.closed || p.Idle() != 0 {
		t.Fatalf("not closed idle_timeout after its latest release: closed %v, idle %d", fc.closed, p.Idle())
	}

	// Busy at the deadline: nothing happens then, and the connection
	// expires idle_timeout after the call ends.
	c, _, uc, fc := tl.getOpen(p)
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") // idle at 0
	tl.advance(idle - getOpts.ResponseTimeout/2)
	c.Start(p, head(getHead), getOpts)
	if c.conn != uc {
		t.Fatal("the idle connection was not reused")
	}
	tl.advance(getOpts.ResponseTimeout * 3 / 4) // the deadline passes mid-call
	if fc.closed || c.State().Terminal() {
		t.Fatalf("busy connection: closed %v, call %s", fc.closed, c.State())
	}
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	tl.advance(idle - time.Second)
	if fc.closed {
		t.Fatal("closed before idle_timeout after the busy call")
	}
	tl.advance(2 * time.Second)
	if !fc.closed {
		t.Fatal("not closed idle_timeout after the busy call")
	}
}

// A reload that shortens idle_timeout reaches a connection whose timer
// was armed under the longer one, at its next release: it closes after
// the new timeout, not at the old deadline.
func TestPoolIdleTimeoutShortenedByReload(t *testing.T) {
	tl := newTestLoop(t, testPool, listenAddr(t))
	p := tl.pool(0)
	_, _, uc, fc := tl.getOpen(p)
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") // armed for testPool's idle_timeout
	short := testPool.IdleTimeout / 10
	p.cfg.IdleTimeout = short // what Loop.Update does with the reloaded pool settings
	c, _ := newCall()
	c.Start(p, head(getHead), getOpts)
	if c.conn != uc {
		t.Fatal("the idle connection was not reused")
	}
	deliver(uc, fc, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n") // released under the short timeout
	tl.advance(short + time.Second)
	if !fc.closed || p.Idle() != 0 {
		t.Fatalf("idle for the new idle_timeout %v and more, still open (closed %v, idle %d): the old deadline held", short, fc.closed, p.Idle())
	}
}
