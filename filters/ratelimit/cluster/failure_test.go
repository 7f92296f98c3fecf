package cluster

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

// Killing Redis under load: every node switches to its shadow quota within
// about a second, no request sees an error, the nodes together admit no
// more than the cluster limit, the breaker stops the redialling, and when
// Redis comes back the quota climbs back rather than jumping.
func TestRedisKilledFallsBackToShadowQuota(t *testing.T) {
	r := redistest.Start(t)
	const rate, burst = 300, 30
	var dials atomic.Int64
	var nodes []*Cluster
	var limits []*Limit
	for i := range 3 {
		opt := testOptions(r.Addr(), "node-"+strconv.Itoa(i), &dials)
		opt.RampStep = 0.5 // from a third to the full rate in 1.3 s
		c := newCluster(t, opt)
		nodes = append(nodes, c)
		limits = append(limits, newLimit(t, c, LimitSpec{Name: "global", Rate: rate, Burst: burst}))
	}
	waitFor(t, 15*time.Second, "every node to count 3 live nodes", func() bool {
		for _, c := range nodes {
			if s := c.Status(); s.LiveNodes != 3 || s.EffectiveNodes != 3 {
				return false
			}
		}
		return true
	})

	var admitted tally
	var stop atomic.Bool
	var wg sync.WaitGroup
	// A node's shadow bucket (100/s, a burst of 10) fills in 90 ms: a
	// stretch in which a loaded machine stalled both its clients wastes its
	// quota, so the floor below leaves such stretches out.
	const fill = 90 * time.Millisecond
	idle := make([]stalls, 2*len(limits))
	for i, l := range limits {
		for j := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := newClient()
				last := time.Now()
				for !stop.Load() {
					admitted.add(cl.take(t, l))
					now := time.Now()
					if now.Sub(last) > fill {
						idle[2*i+j].note(last, now)
					}
					last = now
				}
			}()
		}
	}
	defer func() { stop.Store(true); wg.Wait() }()
	waitFor(t, 15*time.Second, "traffic through Redis", func() bool { return admitted.allow.Load() > 100 })

	r.Kill()
	killed := time.Now()
	waitFor(t, 5*time.Second, "every node to mark Redis down", func() bool {
		for _, c := range nodes {
			if c.Health() != Down {
				return false
			}
		}
		return true
	})
	t.Logf("all nodes on their shadow quota %v after the kill", time.Since(killed))
	for _, c := range nodes {
		if got := c.Status().Limits[0].Quota; got != rate/3 {
			t.Fatalf("shadow quota %v, want %v", got, rate/3)
		}
	}

	// One second down: the three shadow quotas add up to the cluster rate.
	var held int64
	for _, l := range limits {
		held += l.held.Load()
	}
	allowedBefore, dialsBefore := admitted.allow.Load(), dials.Load()
	start := time.Now()
	waitFor(t, 15*time.Second, "a second of outage", func() bool { return time.Since(start) >= time.Second })
	down := time.Since(start)
	allowed := admitted.allow.Load() - allowedBefore
	bound := int64(rate*down.Seconds()) + burst + held + 3
	t.Logf("down %v: admitted %d (bound %d), %d dials", down, allowed, bound, dials.Load()-dialsBefore)
	if allowed > bound {
		t.Fatalf("admitted %d in %v down, above the cluster limit's %d", allowed, down, bound)
	}
	var floor float64
	for i := range limits {
		stalled := min(idle[2*i].within(start, start.Add(down), fill), idle[2*i+1].within(start, start.Add(down), fill))
		floor += rate / 3 * max(0, (down-stalled).Seconds()) / 2
	}
	t.Logf("floor %.0f: half the shadow quotas over the time their clients ran", floor)
	if float64(allowed) < floor {
		t.Fatalf("admitted %d in %v down, not half the shadow quotas' sum over the time their clients ran (%.0f)", allowed, down, floor)
	}
	// Probes back off from 50 to 400 ms: a handful of dials per node, not
	// one per request.
	if n := dials.Load() - dialsBefore; n > 3*10 {
		t.Fatalf("%d dials in %v while down: the breaker did not stop the redialling", n, down)
	}
	if n := admitted.unavailable.Load(); n != 0 {
		t.Fatalf("%d requests failed because Redis died", n)
	}

	r.Restart()
	ramping := make([]bool, len(nodes))
	waitFor(t, 15*time.Second, "every node to find Redis again, its quota below the rate", func() bool {
		all := true
		for i, c := range nodes {
			s := c.Status()
			if s.Redis == Up && s.Ramping && s.Limits[0].Quota < rate {
				ramping[i] = true
			}
			all = all && ramping[i]
		}
		return all
	})
	waitFor(t, 15*time.Second, "every quota to climb back to the cluster rate", func() bool {
		for _, c := range nodes {
			if s := c.Status(); s.Ramping || s.Limits[0].Quota != rate {
				return false
			}
		}
		return true
	})
	calls := nodes[0].Status().Calls
	waitFor(t, 15*time.Second, "requests to reach Redis again", func() bool { return nodes[0].Status().Calls > calls+2 })
	if n := admitted.unavailable.Load(); n != 0 {
		t.Fatalf("%d requests failed around the outage", n)
	}
}

// While Redis is down the breaker keeps requests from calling it: however
// many requests arrive, only the probes dial.
func TestBreakerStopsCallsWhileDown(t *testing.T) {
	r := redistest.Start(t)
	var dials atomic.Int64
	c := newCluster(t, testOptions(r.Addr(), "breaker", &dials))
	l := newLimit(t, c, LimitSpec{Name: "breaker", Rate: 1000, Burst: 10, LeaseWindow: -1})
	cl := newClient()
	cl.take(t, l)
	r.Kill()
	waitFor(t, 15*time.Second, "Redis marked down", func() bool {
		cl.take(t, l) // each call fails, and is decided by the shadow quota
		return c.Health() == Down
	})
	dialsAtTrip, callsAtTrip, probesAtTrip := dials.Load(), c.Status().Calls, c.Status().Probes
	var outcomes tally
	requests := 0
	waitFor(t, 15*time.Second, "three probes", func() bool {
		for range 1000 {
			outcomes.add(cl.take(t, l))
		}
		requests += 1000
		return c.Status().Probes-probesAtTrip >= 3
	})
	s := c.Status()
	probes := s.Probes - probesAtTrip
	t.Logf("%d requests while down: %d dials, %d calls, %d probes", requests, dials.Load()-dialsAtTrip, s.Calls-callsAtTrip, probes)
	if n := dials.Load() - dialsAtTrip; n > int64(probes)+1 {
		t.Fatalf("%d dials while down for %d probes", n, probes)
	}
	if n := s.Calls - callsAtTrip; n > probes+1 {
		t.Fatalf("%d Redis calls while down for %d probes", n, probes)
	}
	if outcomes.unavailable.Load() != 0 || outcomes.allow.Load() == 0 {
		t.Fatalf("while down: %d allowed, %d unavailable", outcomes.allow.Load(), outcomes.unavailable.Load())
	}
}

// A node that starts while Redis is unreachable starts Down, decides by its
// failure mode, and comes up when Redis appears.
func TestStartsDownThenFindsRedis(t *testing.T) {
	r := redistest.Start(t)
	r.Kill()
	c := newCluster(t, testOptions(r.Addr(), "late", nil))
	l := newLimit(t, c, LimitSpec{Name: "late", Rate: 0.1, Burst: 4}) // no token comes back during the takes below
	if c.Health() != Down {
		t.Fatalf("health %v with no Redis, want down", c.Health())
	}
	cl := newClient()
	for i := range 4 {
		if d := cl.take(t, l); d.Verdict != Allow {
			t.Fatalf("take %d within the shadow burst: %+v", i, d)
		}
	}
	if d := cl.take(t, l); d.Verdict != Deny || d.RetryAfter <= 0 {
		t.Fatalf("take past the shadow burst: %+v", d)
	}
	r.Restart()
	waitFor(t, 15*time.Second, "the node to find Redis", func() bool { return c.Health() == Up })
}

// Each failure mode decides as documented while Redis is down.
func TestFailureModes(t *testing.T) {
	opt := testOptions("127.0.0.1:1", "modes", nil)
	opt.manual = true
	opt.FallbackNodes = 2
	c := newCluster(t, opt)
	open := newLimit(t, c, LimitSpec{Name: "open", Rate: 10, Burst: 2, OnFailure: FailOpen})
	closed := newLimit(t, c, LimitSpec{Name: "closed", Rate: 10, Burst: 2, OnFailure: FailClosed})
	shadow := newLimit(t, c, LimitSpec{Name: "shadow", Rate: 10, Burst: 2})
	now := nanotime()
	for range 10 {
		if d := open.Take(now, 1, nil); d.Verdict != Allow {
			t.Fatalf("open: %+v", d)
		}
		if d := closed.Take(now, 1, nil); d.Verdict != Unavailable || d.RetryAfterSeconds() != 1 {
			t.Fatalf("closed: %+v", d)
		}
	}
	// Burst 2 over 2 fallback nodes: one each.
	if d := shadow.Take(now, 1, nil); d.Verdict != Allow {
		t.Fatalf("shadow, first: %+v", d)
	}
	if d := shadow.Take(now, 1, nil); d.Verdict != Deny {
		t.Fatalf("shadow, second at once: %+v", d)
	}
	s := c.Status()
	if q := s.Limits[0]; !q.Unlimited || q.Grants != 10 {
		t.Errorf("open status: %+v", q)
	}
	if q := s.Limits[1]; q.Quota != 0 || q.Unavailable != 10 {
		t.Errorf("closed status: %+v", q)
	}
	if q := s.Limits[2]; q.Quota != 5 || q.Grants != 1 || q.Rejections != 1 || q.Degraded != 2 {
		t.Errorf("shadow status: %+v", q)
	}
}

// When the call queue is full a request is decided at once, without Redis,
// and a raw acquire is refused with ErrQueueFull; nothing waits.
func TestQueueFullDecidesAtOnce(t *testing.T) {
	r := redistest.Start(t)
	opt := testOptions(r.Addr(), "queue", nil)
	opt.Workers, opt.Queue = 1, 1
	opt.CallTimeout = 5 * time.Second
	opt.manual = true
	c := newCluster(t, opt)
	l := newLimit(t, c, LimitSpec{Name: "queue", Rate: 1000, Burst: 100, LeaseWindow: -1})
	if err := r.Do("CLIENT", "PAUSE", "2000", "ALL").Error(); err != nil {
		t.Fatal(err)
	}
	answers := make(chan Decision, 2)
	done := func(d Decision) { answers <- d }
	if d := l.Take(nanotime(), 1, done); d.Verdict != Pending {
		t.Fatalf("first take: %+v, want pending", d)
	}
	waitFor(t, 15*time.Second, "the worker to take the first call", func() bool { return len(c.jobs) == 0 })
	if d := l.Take(nanotime(), 1, done); d.Verdict != Pending {
		t.Fatalf("second take: %+v, want pending in the queue", d)
	}
	if d := l.Take(nanotime(), 1, done); d.Verdict != Allow || d.from != fromLocal {
		t.Fatalf("third take with the queue full: %+v, want an answer from the shadow quota", d)
	}
	if err := l.Acquire(1, func(Result) {}); err != ErrQueueFull {
		t.Fatalf("Acquire with the queue full: %v, want ErrQueueFull", err)
	}
	if s := c.Status(); s.QueueFull != 2 {
		t.Fatalf("queue-full count %d, want 2", s.QueueFull)
	}
	for i := range 2 {
		select {
		case d := <-answers:
			if d.Verdict != Allow {
				t.Fatalf("queued take %d: %+v", i, d)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("queued take %d never answered", i)
		}
	}
}

// A Redis call that fails while a request waits on it is decided by the
// limit's failure mode, as a call never made would be: the waiting request
// gets 503 from a closed limit and goes on through an open one.
func TestFailedCallDecidedByFailureMode(t *testing.T) {
	r := redistest.Start(t)
	opt := testOptions(r.Addr(), "failed-call", nil)
	opt.manual = true // no probe marks Redis down behind the test's back
	c := newCluster(t, opt)
	closed := newLimit(t, c, LimitSpec{Name: "closed", Rate: 1000, Burst: 100, OnFailure: FailClosed, LeaseWindow: -1})
	open := newLimit(t, c, LimitSpec{Name: "open", Rate: 1000, Burst: 100, OnFailure: FailOpen, LeaseWindow: -1})
	cl := newClient()
	for _, l := range []*Limit{closed, open} {
		if d := cl.take(t, l); d.Verdict != Allow {
			t.Fatalf("%s with Redis up: %+v", l.Spec().Name, d)
		}
	}
	r.Kill()
	for _, tc := range []struct {
		l    *Limit
		want Verdict
	}{{closed, Unavailable}, {open, Allow}} {
		// Fewer failed calls than the threshold: Redis is still up, so
		// each take asks it and waits.
		if d := tc.l.Take(nanotime(), 1, cl.done); d.Verdict != Pending {
			t.Fatalf("%s after the kill: %+v, want pending", tc.l.Spec().Name, d)
		}
		select {
		case d := <-cl.answers:
			if d.Verdict != tc.want || tc.want == Unavailable && d.RetryAfterSeconds() < 1 {
				t.Fatalf("%s, its call failed: %+v, want %v", tc.l.Spec().Name, d, tc.want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the failed call was never answered", tc.l.Spec().Name)
		}
	}
	if q := c.Status().Limits[0]; q.Unavailable != 1 || q.Degraded != 1 {
		t.Errorf("closed status: %+v", q)
	}
}

// A lease refill whose Redis call fails does not stop leasing: once Redis
// answers again, the next request that leaves the lease under half full
// queues a refill as before.
func TestFailedRefillLeasesAgain(t *testing.T) {
	r := redistest.Start(t)
	opt := testOptions(r.Addr(), "refill", nil)
	opt.manual = true // no probe marks Redis down behind the test's back
	c := newCluster(t, opt)
	l := newLimit(t, c, LimitSpec{Name: "refill", Rate: 1000, Burst: 1000, LeaseWindow: 100 * time.Millisecond})
	cl := newClient()
	cl.take(t, l) // asks Redis, and fills the lease
	size := l.size.Load()
	if held := l.held.Load(); size < 4 || held != size {
		t.Fatalf("lease after the first take: %d held of %d, want it full", held, size)
	}
	leases := c.Status().Limits[0].Leases
	// Spend from the lease down to half: no refill yet.
	for l.held.Load() > size/2 {
		if d := l.Take(nanotime(), 1, nil); d.Verdict != Allow {
			t.Fatalf("take from the lease: %+v", d)
		}
	}
	r.Kill()
	l.Take(nanotime(), 1, nil) // under half: the refill is queued, and fails
	waitFor(t, 15*time.Second, "the refill's call to fail", func() bool { return c.Status().CallErrors == 1 })
	r.Restart()
	waitFor(t, 15*time.Second, "a refill after Redis came back", func() bool {
		if l.held.Load() == 0 {
			t.Fatal("the lease ran dry: no refill was queued after the failed one")
		}
		l.Take(nanotime(), 1, nil)
		return c.Status().Limits[0].Leases > leases
	})
}

// stalls records one client's stretches without a decision longer than a
// shadow bucket's fill time.
type stalls struct {
	mu   sync.Mutex
	gaps [][2]time.Time
}

func (s *stalls) note(from, to time.Time) {
	s.mu.Lock()
	if len(s.gaps) < 10_000 {
		s.gaps = append(s.gaps, [2]time.Time{from, to})
	}
	s.mu.Unlock()
}

// within is how long the stretches overlapping [from, to] lasted there
// past fill: the time a bucket left alone by the client sat full.
func (s *stalls) within(from, to time.Time, fill time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, g := range s.gaps {
		start, end := g[0], g[1]
		if start.Before(from) {
			start = from
		}
		if end.After(to) {
			end = to
		}
		d += max(0, end.Sub(start)-fill)
	}
	return d
}
