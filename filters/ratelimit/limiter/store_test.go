package limiter_test

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/ratelimit/limiter"
	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

// routeWithIPLimit is a config whose route api limits each client IP to a
// token every 100 s, bursts of 3; %s adds routes.
const routeWithIPLimit = `
routes:
  - {id: api, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 0.01, burst: 3}, {key: global, rate: 0.01, burst: 100}]}
%s`

// spend sends n requests from ip through f and counts those allowed.
func spend(t *testing.T, f filters.Filter, ip string, n int) int {
	t.Helper()
	allowed := 0
	for range n {
		if f.Request(exchange(t, ip, nil)) == filters.Continue {
			allowed++
		}
	}
	return allowed
}

// A config compiled again through the same Store keeps every bucket: a
// client at its limit gets no fresh burst, whatever else changed. The
// same config compiled against another Store (state not kept) would.
func TestStoreKeepsBucketsAcrossCompiles(t *testing.T) {
	store := newStore(t)
	v1 := mustCompile(t, parse(t, fmt.Sprintf(routeWithIPLimit, "")), store)
	defer runtime.KeepAlive(v1) // the Store forgets limits no filter holds
	if got := spend(t, v1[0], "192.0.2.1", 5); got != 3 {
		t.Fatalf("first config allowed %d of 5, want the burst of 3", got)
	}
	// A new version: another route added, and the ip limit's rate raised.
	v2cfg := parse(t, fmt.Sprintf(strings.Replace(routeWithIPLimit, "rate: 0.01, burst: 3", "rate: 0.02, burst: 3", 1),
		"  - {id: other, path: /other, upstream: backend}"))
	v2 := mustCompile(t, v2cfg, store)
	defer runtime.KeepAlive(v2)
	if got := spend(t, v2[0], "192.0.2.1", 5); got != 0 {
		t.Fatalf("the recompiled config allowed %d to a client at its limit: a fresh burst", got)
	}
	if got := spend(t, v2[0], "192.0.2.2", 5); got != 3 {
		t.Fatalf("a new client got %d of 5, want the burst of 3", got)
	}
	if l := status(t, store, "api/ip", "local"); l.Rate != 0.02 || l.Grants != 6 || l.Rejections != 9 || l.Keys.Len != 2 {
		t.Fatalf("status %+v (keys %+v): want the new rate and both configs' counts", l, l.Keys)
	}
	if l := status(t, store, "global", "local"); l.Grants != 6 || l.Rejections != 0 {
		t.Fatalf("global status %+v: the global bucket was not kept", l)
	}
	// Control: a Store of its own gives the same client a fresh burst.
	fresh := mustCompile(t, v2cfg, newStore(t))
	if got := spend(t, fresh[0], "192.0.2.1", 5); got != 3 {
		t.Fatalf("a fresh store allowed %d, want 3", got)
	}
}

// A limit no compiled filter holds any more is forgotten: the Store holds
// state only while a config uses it.
func TestStoreForgetsLimitsNoConfigUses(t *testing.T) {
	store := newStore(t)
	old := mustCompile(t, parse(t, `
routes: [{id: gone, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1}]}]`), store)
	status(t, store, "gone/ip", "local")
	runtime.KeepAlive(old)
	old = nil
	deadline := time.Now().Add(10 * time.Second)
	for len(store.Status().Limits) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("limits still in the status after their config is gone: %+v", store.Status().Limits)
		}
		runtime.GC()
	}
}

// Keys idle for key_idle are swept off the loops, by the Store's timer.
func TestStoreSweepsIdleKeys(t *testing.T) {
	store := newStore(t)
	fs := mustCompile(t, parse(t, `
rate_limit: {key_idle: 20ms}
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1000, burst: 1}]}]`), store)
	defer runtime.KeepAlive(fs) // the Store forgets limits no filter holds
	for i := range 100 {
		fs[0].Request(exchange(t, fmt.Sprintf("198.51.100.%d", i), nil))
	}
	// The sweeper may take the first keys while the last are added (a
	// loaded machine takes longer than key_idle for the loop): each key is
	// held or swept, none lost. A sweep counts what it dropped when its
	// walk ends, so a status read during one sees fewer: this holds
	// between sweeps.
	if k := status(t, store, "api/ip", "local").Keys; k.Inserts != 100 {
		t.Fatalf("keys %+v: want 100 inserted", k)
	}
	deadline := time.Now().Add(10 * time.Second)
	for k := status(t, store, "api/ip", "local").Keys; k.Len+int(k.Swept) != 100; k = status(t, store, "api/ip", "local").Keys {
		if time.Now().After(deadline) {
			t.Fatalf("keys %+v: %d held and %d swept, want 100 in all", k, k.Len, k.Swept)
		}
		time.Sleep(time.Millisecond)
	}
	for k := status(t, store, "api/ip", "local").Keys; k.Len != 0 || k.Swept != 100; k = status(t, store, "api/ip", "local").Keys {
		if time.Now().After(deadline) {
			t.Fatalf("keys %+v: the sweep did not drop the idle keys", k)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A cluster limit compiled again is the same cluster limit, lease and
// counts included; the Redis and cluster settings cannot change under it.
func TestStoreKeepsClusterLimitAcrossCompiles(t *testing.T) {
	r := redistest.Start(t)
	cfg := fmt.Sprintf(`
redis: {addrs: [%q], call_timeout: 2s}
cluster: {node_id: n1}
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [{key: route, rate: 1000, burst: 100, scope: cluster}]}]
`, r.Addr())
	store := newStore(t)
	v1 := mustCompile(t, parse(t, cfg), store)
	defer runtime.KeepAlive(v1) // the Store forgets limits no filter holds
	park := newFakeEngine()
	for range 10 {
		x := exchange(t, "192.0.2.1", park)
		if v := v1[0].Request(x); v == filters.Suspend {
			if fn := <-park.resumes; fn(x) != filters.Continue {
				t.Fatalf("resumed request refused: %+v", x.Rejection)
			}
		} else if v != filters.Continue {
			t.Fatalf("request refused: %+v", x.Rejection)
		}
	}
	v2 := mustCompile(t, parse(t, cfg), store)
	defer runtime.KeepAlive(v2)
	before := status(t, store, "api/route", "cluster")
	if v := v2[0].Request(exchange(t, "192.0.2.1", park)); v != filters.Continue {
		t.Fatalf("the recompiled filter's first request: %v; the lease was not kept", v)
	}
	after := status(t, store, "api/route", "cluster")
	if before.Grants != 10 || after.Grants != 11 || after.Lease.Leases != before.Lease.Leases {
		t.Fatalf("before %+v %+v, after %+v %+v: want one limit, served from its lease", before, before.Lease, after, after.Lease)
	}
	_, err := compile(t, parse(t, strings.Replace(cfg, "node_id: n1", "node_id: n2", 1)), store, 1)
	if err == nil || !strings.Contains(err.Error(), "cannot change while the gateway runs") {
		t.Fatalf("changed cluster settings: %v", err)
	}
}

// GET /limits is the status as JSON; other methods are refused.
func TestHandler(t *testing.T) {
	store := newStore(t)
	fs := mustCompile(t, parse(t, fmt.Sprintf(routeWithIPLimit, "")), store)
	defer runtime.KeepAlive(fs) // the Store forgets limits no filter holds
	spend(t, fs[0], "192.0.2.1", 4)
	rec := httptest.NewRecorder()
	store.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/limits", nil))
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("GET: %d %v", rec.Code, rec.Header())
	}
	var st limiter.Status
	if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
		t.Fatal(err)
	}
	if st.Cluster != nil || len(st.Limits) != 2 {
		t.Fatalf("status %s", rec.Body)
	}
	if l := st.Limits[0]; l.Name != "api/ip" || l.Route != "api" || l.Key != "ip" || l.Grants != 3 || l.Rejections != 1 || l.Keys.Cap != 131072 {
		t.Fatalf("ip limit %+v %+v", l, l.Keys)
	}
	rec = httptest.NewRecorder()
	store.Handler().ServeHTTP(rec, httptest.NewRequest("POST", "/limits", nil))
	if rec.Code != 405 || rec.Header().Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST: %d %v", rec.Code, rec.Header())
	}
	var series strings.Builder
	store.WriteMetrics(&series)
	for _, want := range []string{
		"# TYPE loopgate_ratelimit_grants_total counter\n",
		`loopgate_ratelimit_grants_total{limit="api/ip",scope="local"} 3` + "\n",
		`loopgate_ratelimit_rejections_total{limit="api/ip",scope="local"} 1` + "\n",
		`loopgate_ratelimit_quota{limit="global",scope="local"} 0.01` + "\n",
		`loopgate_ratelimit_keys{limit="api/ip",scope="local"} 1` + "\n",
		`loopgate_ratelimit_keys_capacity{limit="api/ip",scope="local"} 131072` + "\n",
	} {
		if !strings.Contains(series.String(), want) {
			t.Errorf("series lack %q:\n%s", want, series.String())
		}
	}
}
