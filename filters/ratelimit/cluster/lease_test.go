package cluster

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// Three nodes, each with several clients asking far above the limit, share
// one global limit: however the tokens are leased, what they admit in total
// stays within Rate·t + Burst (the nodes hold nothing when the run starts).
func TestNodesShareGlobalLimit(t *testing.T) {
	r := redistest.Start(t)
	const rate, burst = 400, 40
	var limits []*Limit
	for i := range 3 {
		c := newCluster(t, testOptions(r.Addr(), "node-"+strconv.Itoa(i), nil))
		limits = append(limits, newLimit(t, c, LimitSpec{Name: "global", Rate: rate, Burst: burst}))
	}
	var admitted tally
	start := time.Now()
	var wg sync.WaitGroup
	for _, l := range limits {
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := newClient()
				for time.Since(start) < 1500*time.Millisecond {
					admitted.add(cl.take(t, l))
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	allowed := admitted.allow.Load()
	bound := int64(rate*elapsed.Seconds()) + burst + 1
	t.Logf("3 nodes admitted %d in %v (bound %d, offered %d)", allowed, elapsed, bound, allowed+admitted.deny.Load())
	if allowed > bound {
		t.Fatalf("admitted %d, above the global limit's %d", allowed, bound)
	}
	if allowed < bound/2 {
		t.Fatalf("admitted %d, not even half the limit's %d", allowed, bound)
	}
	if admitted.unavailable.Load() != 0 {
		t.Fatalf("%d requests were answered Unavailable", admitted.unavailable.Load())
	}
}

// With leasing, Redis runs the acquire script far less often than requests
// arrive; without it, once per request. The ratio is read from Redis's own
// INFO commandstats.
func TestLeasingCutsRedisCalls(t *testing.T) {
	r := redistest.Start(t)
	run := func(name string, window time.Duration) (requests, calls int64) {
		c := newCluster(t, testOptions(r.Addr(), name, nil))
		l := newLimit(t, c, LimitSpec{Name: name, Rate: 1e6, Burst: 1e5, LeaseWindow: window})
		before := r.CommandCalls("evalsha", "eval")
		cl := newClient()
		const n = 5000
		for range n {
			if d := cl.take(t, l); d.Verdict != Allow {
				t.Fatalf("%s: denied far under the limit: %+v", name, d)
			}
		}
		return n, r.CommandCalls("evalsha", "eval") - before
	}
	reqs, leased := run("leased", 100*time.Millisecond)
	_, unleased := run("unleased", -1)
	t.Logf("acquire calls per request: %.4f with leasing, %.4f without", float64(leased)/float64(reqs), float64(unleased)/float64(reqs))
	if leased*100 > reqs {
		t.Fatalf("leasing: %d Redis calls for %d requests, want under 1 in 100", leased, reqs)
	}
	if unleased < reqs {
		t.Fatalf("without leasing: %d Redis calls for %d requests, want one each", unleased, reqs)
	}
}

// The lease follows the node's demand over the lease window, capped at the
// burst divided among the nodes.
func TestLeaseSizeFollowsDemand(t *testing.T) {
	opt := testOptions("127.0.0.1:1", "size", nil) // nothing listens: Down, no Redis needed
	opt.manual = true
	opt.FallbackNodes = 4
	now := int64(1e9)
	opt.clock = func() int64 { return now }
	c := newCluster(t, opt)
	l := newLimit(t, c, LimitSpec{Name: "size", Rate: 10_000, Burst: 2000, LeaseWindow: 100 * time.Millisecond})
	if got := l.size.Load(); got != 250 { // fair share 2500/s over 100 ms
		t.Fatalf("initial lease size %d, want 250", got)
	}
	for range 20 { // 300 tokens a tick of 100 ms: 3000/s
		l.demand.Add(300)
		now += int64(100 * time.Millisecond)
		c.step(now)
	}
	if got := l.size.Load(); got < 295 || got > 300 {
		t.Fatalf("lease size %d at 3000/s, want about 300", got)
	}
	for range 20 { // 10_000/s: capped at 2000 / 4 nodes
		l.demand.Add(1000)
		now += int64(100 * time.Millisecond)
		c.step(now)
	}
	if got := l.size.Load(); got != 500 {
		t.Fatalf("lease size %d at 10,000/s, want the cap of 500", got)
	}
}

// A node that stops asking hands its lease back, and a token of a request
// that never ran returns to the lease.
func TestLeaseHandedBackWhenIdle(t *testing.T) {
	r := redistest.Start(t)
	c := newCluster(t, testOptions(r.Addr(), "idle", nil))
	l := newLimit(t, c, LimitSpec{Name: "idle", Rate: 1000, Burst: 1000})
	cl := newClient()
	d := cl.take(t, l)
	if d.Verdict != Allow || l.held.Load() == 0 {
		t.Fatalf("first take: %+v, %d held", d, l.held.Load())
	}
	held := l.held.Load()
	l.Return(d)
	if l.held.Load() != held+1 {
		t.Fatalf("Return: %d held, want %d", l.held.Load(), held+1)
	}
	waitFor(t, 15*time.Second, "the idle lease to be handed back", func() bool {
		return l.held.Load() == 0 && l.returned.Load() > 0
	})
	// The cluster bucket got them back: an idle node leaves it full.
	waitFor(t, 15*time.Second, "the bucket to be full again", func() bool {
		n, err := r.Do("EXISTS", "test:idle").AsInt64()
		return err == nil && n == 0
	})
}

// A request served from the lease allocates nothing.
func TestTakeFromLeaseAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	r := redistest.Start(t)
	opt := testOptions(r.Addr(), "allocs", nil)
	opt.manual = true
	c := newCluster(t, opt)
	l := newLimit(t, c, LimitSpec{Name: "allocs", Rate: 1000, Burst: 100})
	l.held.Store(1 << 40) // far above the lease size: no refill is queued
	done := func(Decision) {}
	if n := testing.AllocsPerRun(1000, func() {
		if d := l.Take(nanotime(), 1, done); d.Verdict != Allow {
			t.Fatalf("%+v", d)
		}
	}); n != 0 {
		t.Fatalf("Take from the lease: %v allocs, want 0", n)
	}
}

func BenchmarkTakeFromLease(b *testing.B) {
	r := redistest.Start(b)
	opt := testOptions(r.Addr(), "bench", nil)
	opt.manual = true
	c := newCluster(b, opt)
	l := newLimit(b, c, LimitSpec{Name: "bench", Rate: 1000, Burst: 100})
	l.held.Store(1 << 50)
	done := func(Decision) {}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			l.Take(nanotime(), 1, done)
		}
	})
}
