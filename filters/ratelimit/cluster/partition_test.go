package cluster

import (
	"strconv"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

// beat scores member in the test's membership set as if it had beaten
// ago before Redis's now.
func beat(t *testing.T, r *redistest.Server, member string, ago time.Duration) {
	t.Helper()
	ms := serverMicros(t, r)/1000 - ago.Milliseconds()
	if err := r.Do("ZADD", "test:nodes", strconv.FormatInt(ms, 10), member).Error(); err != nil {
		t.Fatal(err)
	}
}

// A node that stopped beating but was seen within LiveMaxAge is taken for
// cut off and on its shadow quota: the node still answering is charged so
// that it gets only its own share of the bucket, rate and burst, and the
// cluster stays within the limit. Once the silent node is past LiveMaxAge
// its share is given back.
func TestSilentNodeKeepsItsShare(t *testing.T) {
	r := redistest.Start(t)
	n := newFakeNode(t, r.Addr(), func(o *Options) { o.LiveMaxAge = 3 * time.Second })
	// 10 s a token, so that none comes back between two calls below on a
	// loaded machine.
	l := newLimit(t, n.c, LimitSpec{Name: "share", Rate: 0.1, Burst: 10, LeaseWindow: -1})

	beat(t, r, "b", 0)
	n.advance(time.Second)
	if s := n.c.Status(); s.LiveNodes != 2 || s.KnownNodes != 2 {
		t.Fatalf("with b beating: %+v", s)
	}
	if got := acquire(t, l, 4); got.Granted != 4 {
		t.Fatalf("with every node answering: %+v, want all 4", got)
	}
	r.Do("DEL", "test:share")

	// b last beat 1.5 s ago: past the member TTL (1 s), within the live
	// max age. It may be spending its shadow quota (0.05/s); a gets the
	// other half of the bucket: a burst of 5, and 0.05 a second.
	beat(t, r, "b", 1500*time.Millisecond)
	n.advance(time.Second)
	s := n.c.Status()
	if s.LiveNodes != 1 || s.KnownNodes != 2 || s.EffectiveNodes != 2 {
		t.Fatalf("with b silent: %+v, want 1 live of 2 known", s)
	}
	if got := acquire(t, l, 10); got.Granted != 5 || got.RetryAfter < 90*time.Second {
		t.Fatalf("with b silent, 10 asked of an idle bucket: %+v, want half the burst and 5 more taking 100 s", got)
	}
	if got := acquire(t, l, 1); got.Granted != 0 || got.RetryAfter > 20*time.Second {
		t.Fatalf("with b silent, one more: %+v, want none, within a token's 20 s", got)
	}
	r.Do("DEL", "test:share")

	// b last beat 4 s ago, past the live max age: trimmed, and a has the
	// whole bucket again.
	beat(t, r, "b", 4*time.Second)
	n.advance(time.Second)
	if s := n.c.Status(); s.LiveNodes != 1 || s.KnownNodes != 1 {
		t.Fatalf("with b gone: %+v, want a alone", s)
	}
	if got := acquire(t, l, 10); got.Granted != 10 {
		t.Fatalf("with b gone: %+v, want the whole burst", got)
	}
}

// A Redis that restarts empty has lost the membership set. The first node
// back must not take itself for the only one: it keeps the count it knew,
// takes only its share of the bucket while the others are not back, and
// ramps from the shadow quota it was on, not from the full rate.
func TestRedisRestartedEmptyKeepsKnownNodes(t *testing.T) {
	r := redistest.Start(t)
	n := newFakeNode(t, r.Addr(), nil)
	l := newLimit(t, n.c, LimitSpec{Name: "restart", Rate: 1000, Burst: 100, LeaseWindow: -1})
	beat(t, r, "b", 0)
	n.advance(time.Second)
	if s := n.c.Status(); s.KnownNodes != 2 || s.EffectiveNodes != 2 {
		t.Fatalf("before the restart: %+v", s)
	}

	r.Kill()
	n.until("Redis marked down", func() bool { return n.c.Health() == Down })
	if q := l.Status().Quota; !near(q, 500) {
		t.Fatalf("down: quota %v, want the 500 shadow quota", q)
	}
	r.Restart() // empty: b's entry and a's are gone
	n.until("Redis back up", func() bool { return n.c.Health() == Up })
	n.advance(time.Second)
	s := n.c.Status()
	if s.LiveNodes != 1 || s.KnownNodes != 2 || s.EffectiveNodes != 2 {
		t.Fatalf("after the restart, b not back: %+v, want 1 live of the 2 known", s)
	}
	if q := l.Status().Quota; q > 500+100*1.2+1 {
		t.Fatalf("a second after the restart: quota %v, want the ramp from 500 at 100/s", q)
	}
	if got := acquire(t, l, 100); got.Granted != 50 {
		t.Fatalf("after the restart, b not back: %+v, want half the burst", got)
	}

	// The held count lasts LiveMaxAge (30 s) from a's last heartbeat
	// before the outage, as b's lost entry would have.
	n.advance(30 * time.Second)
	if s := n.c.Status(); s.KnownNodes != 1 || s.EffectiveNodes != 1 {
		t.Fatalf("30 s on, b never back: %+v, want a alone", s)
	}
}

// The same when the node's first heartbeat after the restart ran on Redis
// but its answer never came back (the call's deadline passed on a loaded
// machine): its entry is there again at the next heartbeat, and b's share
// must still be kept.
func TestRedisRestartedEmptyKeepsKnownNodesPastALostAnswer(t *testing.T) {
	r := redistest.Start(t)
	n := newFakeNode(t, r.Addr(), nil)
	beat(t, r, "b", 0)
	n.advance(time.Second)
	if s := n.c.Status(); s.KnownNodes != 2 {
		t.Fatalf("before the restart: %+v", s)
	}
	r.Kill()
	n.until("Redis marked down", func() bool { return n.c.Health() == Down })
	r.Restart()
	beat(t, r, "fake", 0) // the heartbeat Redis ran whose answer the node lost
	n.until("Redis back up", func() bool { return n.c.Health() == Up })
	n.advance(time.Second)
	if s := n.c.Status(); s.LiveNodes != 1 || s.KnownNodes != 2 || s.EffectiveNodes != 2 {
		t.Fatalf("after the restart, b not back: %+v, want 1 live of the 2 known", s)
	}
}
