package cluster

import (
	"strconv"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

// acquire runs one raw acquire and waits for its result.
func acquire(t *testing.T, l *Limit, n int64) Result {
	t.Helper()
	got := make(chan Result, 1)
	if err := l.Acquire(n, func(r Result) { got <- r }); err != nil {
		t.Fatalf("Acquire(%d): %v", n, err)
	}
	r := <-got
	if r.Err != nil {
		t.Fatalf("Acquire(%d) failed: %v", n, r.Err)
	}
	return r
}

// serverMicros reads Redis's clock.
func serverMicros(t *testing.T, r *redistest.Server) int64 {
	t.Helper()
	tm, err := r.Do("TIME").AsStrSlice()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := strconv.ParseInt(tm[0], 10, 64)
	us, _ := strconv.ParseInt(tm[1], 10, 64)
	return s*1_000_000 + us
}

// The acquire script grants at most what it is asked for and at most what
// the bucket holds, keeps its TAT in Redis's own microseconds with a PX
// expiry at the moment the bucket is full again, and says how long the
// rest would take.
func TestAcquireScriptGrantsAtMostN(t *testing.T) {
	r := redistest.Start(t)
	c := newCluster(t, testOptions(r.Addr(), "a", nil))
	// 10 s a token: a loaded machine cannot let one come back between the
	// calls below (at 100 ms a token one did, and the last acquire got 4).
	l := newLimit(t, c, LimitSpec{Name: "script", Rate: 0.1, Burst: 10, LeaseWindow: -1})

	before := serverMicros(t, r)
	if got := acquire(t, l, 4); got.Granted != 4 || got.Remaining != 6 || got.RetryAfter != 0 {
		t.Fatalf("first 4 of 10: %+v", got)
	}
	if got := acquire(t, l, 4); got.Granted != 4 || got.Remaining != 2 {
		t.Fatalf("second 4 of 10: %+v", got)
	}
	got := acquire(t, l, 4)
	after := serverMicros(t, r)
	if got.Granted != 2 || got.Remaining != 0 {
		t.Fatalf("4 with 2 left: %+v, want 2 granted", got)
	}
	// The two missing tokens take 20 s, less the time since the bucket
	// was first touched.
	if elapsed := time.Duration(after-before) * time.Microsecond; got.RetryAfter > 20*time.Second ||
		got.RetryAfter < 20*time.Second-elapsed-time.Millisecond {
		t.Fatalf("retry after %v, want 20s less at most %v", got.RetryAfter, elapsed)
	}
	if got := acquire(t, l, 1); got.Granted != 0 || got.RetryAfter <= 0 {
		t.Fatalf("one from an empty bucket: %+v", got)
	}

	// The TAT is 10 tokens (100 s) past the server's time of the first call.
	tat, err := r.Do("GET", "test:script").AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if tat < before+100_000_000 || tat > after+100_000_000 {
		t.Fatalf("stored TAT %d, want server time + 100s within [%d, %d]", tat, before+100_000_000, after+100_000_000)
	}
	pttl, _ := r.Do("PTTL", "test:script").AsInt64()
	if pttl <= 0 || pttl > 100_000 {
		t.Fatalf("PTTL %d ms, want (0, 100000]: the key expires when the bucket is full", pttl)
	}

	// Handing 3 back moves the TAT back 30 s.
	cl := c.client.Load()
	l.giveBack(cl, 3)
	back, _ := r.Do("GET", "test:script").AsInt64()
	if back != tat-30_000_000 || l.returned.Load() != 3 {
		t.Fatalf("after handing 3 back: TAT %d, want %d; returned %d", back, tat-30_000_000, l.returned.Load())
	}
	if got := acquire(t, l, 5); got.Granted != 3 {
		t.Fatalf("after handing 3 back, 5 asked: %+v, want the 3", got)
	}
}

// A token handed back is whole again though part of its interval has
// passed: a bucket of one token at 0.01 a second, taken and handed back a
// moment later, is full, and the next acquire gets the token.
func TestGiveBackScriptReturnsPartlyEarnedToken(t *testing.T) {
	r := redistest.Start(t)
	c := newCluster(t, testOptions(r.Addr(), "a", nil))
	l := newLimit(t, c, LimitSpec{Name: "slow", Rate: 0.01, Burst: 1, LeaseWindow: -1}) // 100 s a token
	if got := acquire(t, l, 1); got.Granted != 1 {
		t.Fatalf("the burst's token: %+v", got)
	}
	// A millisecond of the token's 100 s has passed by Redis's clock.
	for start := serverMicros(t, r); serverMicros(t, r) < start+1000; {
	}
	l.giveBack(c.client.Load(), 1)
	if n := l.returned.Load(); n != 1 {
		t.Fatalf("returned %d, want the 1 token", n)
	}
	if n, err := r.Do("EXISTS", "test:slow").AsInt64(); err != nil || n != 0 {
		t.Fatalf("bucket key exists %d (%v): want it deleted, the bucket full", n, err)
	}
	if got := acquire(t, l, 1); got.Granted != 1 {
		t.Fatalf("after handing it back: %+v, want the token", got)
	}
}

// After Redis loses its script cache the call falls back from EVALSHA to
// EVAL and still works.
func TestAcquireScriptSurvivesScriptFlush(t *testing.T) {
	r := redistest.Start(t)
	c := newCluster(t, testOptions(r.Addr(), "a", nil))
	l := newLimit(t, c, LimitSpec{Name: "flush", Rate: 100, Burst: 5, LeaseWindow: -1})
	acquire(t, l, 1)
	evals := r.CommandCalls("eval")
	if err := r.Do("SCRIPT", "FLUSH").Error(); err != nil {
		t.Fatal(err)
	}
	if got := acquire(t, l, 1); got.Granted != 1 {
		t.Fatalf("after SCRIPT FLUSH: %+v", got)
	}
	if r.CommandCalls("eval") <= evals {
		t.Fatal("no EVAL after the script cache was flushed")
	}
	if got := acquire(t, l, 1); got.Granted != 1 || c.Health() != Up {
		t.Fatalf("after reloading the script: %+v, health %v", got, c.Health())
	}
}
