package limiter_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/ratelimit/limiter"
	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

// unleased is a route limit kept in the Redis at %s, a token every 100 s,
// bursts of %d, with leasing off: every request asks Redis.
const unleased = `
redis: {addrs: [%q], call_timeout: 5s}
cluster: {node_id: solo, probe_min: 50ms}
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [{key: route, rate: 0.01, burst: %d, scope: cluster, lease_window: 0s%s}]}]
`

// A request parks while Redis answers, and the answer resumes it; the
// request past the burst is refused with the limit's figures.
func TestParkedRequestResumes(t *testing.T) {
	r := redistest.Start(t)
	store := newStore(t)
	f := mustCompile(t, parse(t, fmt.Sprintf(unleased, r.Addr(), 1, "")), store)[0]
	defer runtime.KeepAlive(f) // the Store forgets limits no filter holds
	park := newFakeEngine()
	run := func() (*filters.Exchange, filters.Verdict) {
		x := exchange(t, "192.0.2.1", park)
		v := f.Request(x)
		if v == filters.Suspend {
			v = (<-park.resumes)(x)
		}
		f.Done(x)
		return x, v
	}
	if _, v := run(); v != filters.Continue {
		t.Fatalf("first request: %v", v)
	}
	x, v := run()
	if v != filters.Respond || x.Rejection.Status != 429 || x.Rejection.Code != 42902 {
		t.Fatalf("second request: %v %+v", v, x.Rejection)
	}
	for name, want := range map[string]string{"X-RateLimit-Limit": "0.01", "X-RateLimit-Remaining": "0", "Retry-After": "100"} {
		if got := string(x.Rejection.Header(name)); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	if l := status(t, store, "api/route", "cluster"); l.Grants != 1 || l.Rejections != 1 {
		t.Fatalf("status %+v", l)
	}
}

// Redis answers a parked request, but the request ended first and the
// engine drops the resume: Done gives the token back.
func TestDroppedResumeGivesTokenBack(t *testing.T) {
	r := redistest.Start(t)
	store := newStore(t)
	f := mustCompile(t, parse(t, fmt.Sprintf(unleased, r.Addr(), 1, "")), store)[0]
	defer runtime.KeepAlive(f) // the Store forgets limits no filter holds
	// Redis holds the call until the request has parked.
	if err := r.Do("CLIENT", "PAUSE", "20000", "WRITE").Error(); err != nil {
		t.Fatal(err)
	}
	park := newFakeEngine()
	x := exchange(t, "192.0.2.1", park)
	v := f.Request(x)
	if err := r.Do("CLIENT", "UNPAUSE").Error(); err != nil {
		t.Fatal(err)
	}
	if v != filters.Suspend {
		t.Fatalf("request: %v, want it parked", v)
	}
	<-park.resumes // the answer came; the request timed out meanwhile, so its resume is dropped
	park.gen++
	f.Done(x)
	waitGivenBack(t, store, "api/route", 1)
	// The token is there for the next request.
	x = exchange(t, "192.0.2.2", park)
	v = f.Request(x)
	if v == filters.Suspend {
		v = (<-park.resumes)(x)
	}
	if v != filters.Continue {
		t.Fatalf("next request: %v %+v", v, x.Rejection)
	}
}

// While Redis is down a closed limit refuses with 503, code 50304; an open
// one allows; a shadow one admits its shadow quota.
func TestFailureModesWhileRedisDown(t *testing.T) {
	r := redistest.Start(t)
	addr := r.Addr()
	r.Kill()
	for _, tc := range []struct {
		mode    string
		allowed int
	}{{"closed", 0}, {"open", 10}, {"shadow", 2}} {
		store := newStore(t)
		f := mustCompile(t, parse(t, fmt.Sprintf(unleased, addr, 2, ", on_redis_failure: "+tc.mode)), store)[0]
		defer runtime.KeepAlive(f) // the Store forgets limits no filter holds
		allowed := 0
		for range 10 {
			x := exchange(t, "192.0.2.1", nil)
			switch v := f.Request(x); {
			case v == filters.Continue:
				allowed++
			case tc.mode == "closed" && (x.Rejection.Status != 503 || x.Rejection.Code != 50304 || string(x.Rejection.Header("Retry-After")) != "1"):
				t.Fatalf("closed: %v %+v", v, x.Rejection)
			case tc.mode == "shadow" && x.Rejection.Code != 42902:
				t.Fatalf("shadow: %v %+v", v, x.Rejection)
			}
		}
		if allowed != tc.allowed {
			t.Errorf("%s: %d of 10 allowed, want %d", tc.mode, allowed, tc.allowed)
		}
		l := status(t, store, "api/route", "cluster")
		if l.Lease.OnRedisFailure != tc.mode || l.Lease.Degraded != 10 || tc.mode == "open" && !l.Unlimited {
			t.Errorf("%s: status %+v %+v", tc.mode, l, l.Lease)
		}
	}
}

// A request the second cluster limit refuses will not run: the token the
// first one granted it goes back to that limit's lease.
func TestRefusedRequestGivesEarlierTokensBack(t *testing.T) {
	r := redistest.Start(t)
	store := newStore(t)
	f := mustCompile(t, parse(t, fmt.Sprintf(`
redis: {addrs: [%q], call_timeout: 5s}
cluster: {node_id: solo, probe_min: 50ms}
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [
  {key: route, rate: 0.01, burst: 5, scope: cluster, lease_window: 0s},
  {key: global, rate: 0.01, burst: 1, scope: cluster, lease_window: 0s}]}]
`, r.Addr())), store)[0]
	defer runtime.KeepAlive(f) // the Store forgets limits no filter holds
	park := newFakeEngine()
	run := func() (*filters.Exchange, filters.Verdict) {
		x := exchange(t, "192.0.2.1", park)
		v := f.Request(x)
		for v == filters.Suspend {
			v = (<-park.resumes)(x)
		}
		f.Done(x)
		return x, v
	}
	if _, v := run(); v != filters.Continue {
		t.Fatalf("first request: %v", v)
	}
	if x, v := run(); v != filters.Respond || x.Rejection.Code != 42902 {
		t.Fatalf("second request, past the global burst: %v %+v", v, x.Rejection)
	}
	waitGivenBack(t, store, "api/route", 2)
}

// waitGivenBack waits until the cluster limit name has made grants grants
// and holds one token given back, in its lease or handed on to Redis. The
// controller may be handing it on: held, then returned, and for a moment
// neither, so the test polls.
func waitGivenBack(t *testing.T, store *limiter.Store, name string, grants uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for l := status(t, store, name, "cluster"); l.Grants != grants || l.Lease.Held+int64(l.Lease.Returned) != 1; l = status(t, store, name, "cluster") {
		if time.Now().After(deadline) {
			t.Fatalf("%s: status %+v %+v: the token was not given back", name, l, l.Lease)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
