package limiter_test

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// run passes x through f as the engine would: a parked request waits for
// its resume.
func run(f filters.Filter, park *fakeEngine, x *filters.Exchange) filters.Verdict {
	v := f.Request(x)
	if v == filters.Suspend {
		v = (<-park.resumes)(x)
	}
	f.Done(x)
	return v
}

// A cluster header limit counts each user apart: a user within its share
// costs no Redis call; one past it goes hot, spends its Redis bucket (less
// the cold burst it already had) and is refused with 429; another user is
// untouched; a repeated key header is refused with 400 before any limit.
func TestClusterHeaderLimitPerUser(t *testing.T) {
	r := redistest.Start(t)
	store := newStore(t)
	f := mustCompile(t, parse(t, fmt.Sprintf(`
redis: {addrs: [%q], call_timeout: 5s}
cluster: {node_id: solo}
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [{key: "header:X-User", rate: 0.01, burst: 3, scope: cluster}]}]
`, r.Addr())), store)[0]
	defer runtime.KeepAlive(f) // the Store forgets limits no filter holds
	park := newFakeEngine()
	calls := r.CommandCalls("evalsha", "eval")
	for i := range 3 {
		if v := run(f, park, exchange(t, "192.0.2.1", park, "X-User: alice")); v != filters.Continue {
			t.Fatalf("alice %d: %v", i, v)
		}
	}
	if got := r.CommandCalls("evalsha", "eval") - calls; got > 1 { // a heartbeat may fall in
		t.Fatalf("%d scripts for a user within its share, want none", got)
	}
	x := exchange(t, "192.0.2.1", park, "X-User: alice")
	if v := run(f, park, x); v != filters.Respond || x.Rejection.Status != 429 || x.Rejection.Code != 42902 {
		t.Fatalf("alice past her burst: %v %+v", v, x.Rejection)
	}
	if v := run(f, park, exchange(t, "192.0.2.1", park, "X-User: bob")); v != filters.Continue {
		t.Fatalf("bob: %v", v)
	}
	x = exchange(t, "192.0.2.1", park, "X-User: bob", "X-User: alice")
	if v := run(f, park, x); v != filters.Respond || x.Rejection.Status != 400 || x.Rejection.Code != 40001 {
		t.Fatalf("a repeated key header: %v %+v", v, x.Rejection)
	}
	l := status(t, store, "api/header:x-user", "cluster")
	if l.Hot == nil || l.Hot.Promotions != 1 || l.Hot.Len != 1 || l.Hot.ColdGrants != 4 || l.Keys.Len != 2 || l.Grants != 4 || l.Rejections != 1 {
		t.Fatalf("status %+v hot %+v keys %+v", l, l.Hot, l.Keys)
	}
	if keys := scanKeys(t, r, "loopgate:rl:api/header:x-user:*"); len(keys) != 1 {
		t.Fatalf("Redis keys %v, want alice's bucket alone", keys)
	}
}

// Each client key kind reads its own part of the request: two IPs, two
// users (by the auth subject), two tenants are two keys each.
func TestClusterKeyKinds(t *testing.T) {
	r := redistest.Start(t)
	for _, tc := range []struct {
		key  string
		a, b func(*filters.Exchange)
	}{
		{"ip", func(x *filters.Exchange) {}, func(x *filters.Exchange) { x.ClientIP = x.ClientIP.Next() }},
		{"user", func(x *filters.Exchange) { x.Identity.Subject = []byte("alice") }, func(x *filters.Exchange) { x.Identity.Subject = []byte("bob") }},
		{"tenant", func(x *filters.Exchange) { x.Identity.Tenant = []byte("acme") }, func(x *filters.Exchange) {}},
	} {
		store := newStore(t)
		f := mustCompile(t, parse(t, fmt.Sprintf(`
redis: {addrs: [%q]}
cluster: {node_id: solo}
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [{key: %s, rate: 0.01, burst: 1, scope: cluster}]}]
`, r.Addr(), tc.key)), store)[0]
		park := newFakeEngine()
		for i, set := range []func(*filters.Exchange){tc.a, tc.b} {
			x := exchange(t, "192.0.2.1", park, "X-Tenant-Id: other")
			set(x)
			if v := run(f, park, x); v != filters.Continue {
				t.Fatalf("%s: client %d: %v %+v", tc.key, i, v, x.Rejection)
			}
		}
		if l := status(t, store, "api/"+tc.key, "cluster"); l.Keys.Len != 2 {
			t.Fatalf("%s: %d keys, want 2", tc.key, l.Keys.Len)
		}
		runtime.KeepAlive(f)
	}
}

// A hot client served from its lease: no allocation per request, the
// park for a refill and the 429s of a client above 1e6/s included.
func TestClusterKeyedHotAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	r := redistest.Start(t)
	store := newStore(t)
	f := mustCompile(t, parse(t, fmt.Sprintf(`
redis: {addrs: [%q]}
cluster: {node_id: solo}
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1000000, burst: 1000, scope: cluster}]}]
`, r.Addr())), store)[0]
	defer runtime.KeepAlive(f)
	park := newFakeEngine()
	x := exchange(t, "192.0.2.1", park)
	req, ip := x.Req, x.ClientIP
	request := func() {
		x.Reset(req, nil, ip, 0, park)
		run(f, park, x)
	}
	for range 20000 {
		request()
	}
	if l := status(t, store, "api/ip", "cluster"); l.Hot.Len != 1 {
		t.Fatalf("the client did not go hot: %+v", l.Hot)
	}
	if n := testing.AllocsPerRun(5000, request); n != 0 {
		t.Fatalf("%v allocs per request of a hot client, want 0", n)
	}
}

// scanKeys lists the Redis keys matching pattern (the test's look; the
// gateway never enumerates keys).
func scanKeys(t testing.TB, r *redistest.Server, pattern string) []string {
	t.Helper()
	var out []string
	for cursor := "0"; ; {
		reply, err := r.Do("SCAN", cursor, "MATCH", pattern, "COUNT", "1000").ToArray()
		if err != nil || len(reply) != 2 {
			t.Fatalf("SCAN: %v", err)
		}
		cursor, _ = reply[0].ToString()
		keys, _ := reply[1].AsStrSlice()
		out = append(out, keys...)
		if cursor == "0" {
			return out
		}
	}
}

// A config compiled again keeps a cluster keyed limit, its cold keys and
// its hot set; one that changes hot_keys builds a new one.
func TestStoreKeepsClusterKeyedLimit(t *testing.T) {
	r := redistest.Start(t)
	store := newStore(t)
	yaml := func(hot int) string {
		return fmt.Sprintf(`
redis: {addrs: [%q]}
cluster: {node_id: solo}
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [{key: user, rate: 0.01, burst: 1, scope: cluster, hot_keys: %d}]}]
`, r.Addr(), hot)
	}
	f := mustCompile(t, parse(t, yaml(64)), store)[0]
	park := newFakeEngine()
	x := exchange(t, "192.0.2.1", park)
	x.Identity.Subject = []byte("alice")
	run(f, park, x)
	again := mustCompile(t, parse(t, yaml(64)), store)[0]
	x = exchange(t, "192.0.2.1", park)
	x.Identity.Subject = []byte("alice")
	if v := run(again, park, x); v != filters.Respond || x.Rejection.Status != 429 {
		t.Fatalf("alice after a recompile: %v %+v, want her burst spent", v, x.Rejection)
	}
	if l := status(t, store, "api/user", "cluster"); l.Keys.Len != 1 || l.Hot.Cap != 64 {
		t.Fatalf("status after a recompile: keys %+v hot %+v", l.Keys, l.Hot)
	}
	changed := mustCompile(t, parse(t, yaml(128)), store)[0]
	if l := status(t, store, "api/user", "cluster"); l.Keys.Len != 0 || l.Hot.Cap != 128 {
		t.Fatalf("status after hot_keys changed: keys %+v hot %+v", l.Keys, l.Hot)
	}
	runtime.KeepAlive(f)
	runtime.KeepAlive(again)
	runtime.KeepAlive(changed)
}
