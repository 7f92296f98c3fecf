package cluster

import (
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

const second = int64(time.Second)

// fakeNode is a Cluster on a fake clock whose controller the test steps.
type fakeNode struct {
	t   *testing.T
	c   *Cluster
	now int64
}

func newFakeNode(t *testing.T, addr string, tune func(*Options)) *fakeNode {
	n := &fakeNode{t: t, now: 1000 * second}
	opt := testOptions(addr, "fake", nil)
	opt.manual = true
	opt.clock = func() int64 { return n.now }
	if tune != nil {
		tune(&opt)
	}
	n.c = newCluster(t, opt)
	return n
}

// advance moves the clock by d in controller ticks.
func (n *fakeNode) advance(d time.Duration) {
	for end := n.now + int64(d); n.now < end; {
		n.now += int64(n.c.opt.Tick)
		n.c.step(n.now)
	}
}

// until ticks the controller until cond holds, for at most a minute of
// fake time.
func (n *fakeNode) until(what string, cond func() bool) {
	n.t.Helper()
	for end := n.now + 60*second; !cond(); {
		if n.now > end {
			n.t.Fatalf("no %s after a minute of ticks", what)
		}
		n.advance(n.c.opt.Tick)
	}
}

// allowedOver offers perSecond requests a second for d on the fake clock
// and counts those allowed.
func (n *fakeNode) allowedOver(l *Limit, d time.Duration, perSecond int64) int64 {
	var allowed int64
	step := second / perSecond
	for end := n.now + int64(d); n.now < end; n.now += step {
		if l.Take(n.now, 1, nil).Verdict == Allow {
			allowed++
		}
	}
	return allowed
}

// After Redis comes back, a node's cap starts at its shadow quota and rises
// by a tenth of the cluster rate a second: no jump at the recovery, and the
// full rate after (rate - shadow) / (rate / 10) seconds. The lease is
// stocked so that Redis never says no and only the cap decides.
func TestRampRaisesQuotaGradually(t *testing.T) {
	r := redistest.Start(t)
	n := newFakeNode(t, r.Addr(), func(o *Options) { o.MinNodes = 4 })
	l := newLimit(t, n.c, LimitSpec{Name: "ramp", Rate: 1000, Burst: 100})
	n.advance(time.Second)
	if got := l.Status().ShadowRate; got != 250 {
		t.Fatalf("shadow rate %v, want 1000 / 4 nodes", got)
	}

	r.Kill()
	n.until("Redis marked down", func() bool { return n.c.Health() == Down })
	l.held.Store(0)
	down := n.allowedOver(l, time.Second, 2000)
	if down < 250 || down > 250+25+1 {
		t.Fatalf("down: %d allowed in a second, want the shadow quota, 250 (+25 burst)", down)
	}

	r.Restart()
	n.until("Redis back up", func() bool { return n.c.Health() == Up })
	l.held.Store(1 << 40) // Redis's side of every decision is a yes
	var perSecond []int64
	for range 9 {
		perSecond = append(perSecond, n.allowedOver(l, time.Second, 2000))
	}
	t.Logf("allowed per second: down %d, then %v", down, perSecond)
	for k, got := range perSecond[:7] {
		// The cap is 250 + 100k at the start of second k: about 300 + 100k
		// allowed in it, with at most the 25 shadow burst on top.
		want := 300 + 100*int64(k)
		if got < want-30 || got > want+30 {
			t.Errorf("second %d after recovery: %d allowed, want about %d", k, got, want)
		}
	}
	if perSecond[0] > down+100 {
		t.Errorf("the first second after recovery allowed %d, a jump from %d", perSecond[0], down)
	}
	// The cap reaches the cluster rate 7.5 s in and is gone: the stocked
	// lease allows all that is offered.
	if perSecond[8] != 2000 {
		t.Errorf("second 8 after recovery: %d allowed, want the 2000 offered", perSecond[8])
	}
	if q := l.Status().Quota; q != 1000 {
		t.Errorf("quota %v after the ramp, want the cluster rate", q)
	}
	n.advance(2 * time.Second)
	if n.c.Status().Ramping {
		t.Error("still ramping 11 s after recovery at 10 %/s")
	}
}

// Quota reads the same cap Take applies.
func TestRampQuotaInStatus(t *testing.T) {
	r := redistest.Start(t)
	n := newFakeNode(t, r.Addr(), func(o *Options) { o.MinNodes = 4 })
	l := newLimit(t, n.c, LimitSpec{Name: "q", Rate: 1000, Burst: 100})
	n.advance(time.Second)
	r.Kill()
	n.until("Redis marked down", func() bool { return n.c.Health() == Down })
	r.Restart()
	n.until("Redis back up", func() bool { return n.c.Health() == Up })
	rs := n.c.rampStart.Load()
	for _, c := range []struct {
		at    int64
		quota float64
	}{{0, 250}, {second, 350}, {5 * second, 750}, {7 * second, 950}, {8 * second, 1000}} {
		n.now = rs + c.at
		if got := l.Status().Quota; got < c.quota-0.01 || got > c.quota+0.01 {
			t.Errorf("quota %v s after recovery: %v, want %v", c.at/second, got, c.quota)
		}
	}
}

// The ramp starts from the quota the node was on when Redis came back, not
// from what the first heartbeat back says: a node down past LiveMaxAge is
// on the fallback count's quota, and the empty set it then finds (it is
// the only one back) must not lift its cap to the full rate at once.
func TestRampStartsFromTheQuotaAtRecovery(t *testing.T) {
	r := redistest.Start(t)
	n := newFakeNode(t, r.Addr(), func(o *Options) {
		o.FallbackNodes = 4
		o.LiveMaxAge = 2 * time.Second
	})
	l := newLimit(t, n.c, LimitSpec{Name: "from", Rate: 1000, Burst: 100})
	r.Kill()
	n.until("Redis marked down", func() bool { return n.c.Health() == Down })
	n.advance(3 * time.Second)
	if q := l.Status().Quota; !near(q, 250) {
		t.Fatalf("down past the live max age: quota %v, want 1000 / 4 fallback nodes", q)
	}
	r.Restart()
	n.until("Redis back up", func() bool { return n.c.Health() == Up })
	if s := n.c.Status(); s.EffectiveNodes != 1 || !s.Ramping {
		t.Fatalf("back, alone in the set: %+v, want 1 effective node and ramping", s)
	}
	if q := l.Status().Quota; q > 250+100*0.5 {
		t.Fatalf("just back: quota %v, want the ramp from 250", q)
	}
}
