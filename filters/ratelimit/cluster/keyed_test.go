package cluster

import (
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
	"github.com/loopgate/loopgate/pool/pooltest"
)

func newKeyed(t testing.TB, c *Cluster, spec KeyedSpec) *KeyedLimit {
	t.Helper()
	k, err := c.NewKeyedLimit(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Close)
	return k
}

// takeKeyed is client.take for a keyed limit.
func (c *client) takeKeyed(t testing.TB, k *KeyedLimit, key []byte) Decision {
	d := k.Take(nanotime(), key, 1, c.done)
	if d.Verdict != Pending {
		return d
	}
	select {
	case d = <-c.answers:
		return d
	case <-time.After(10 * time.Second):
		t.Error("a Pending take was never answered")
		return Decision{Verdict: Unavailable}
	}
}

// The cold bound, proved on a hand-driven clock: n nodes that cannot reach
// Redis decide every key at its cold share, Rate / N and max(1, Burst / N)
// for N effective nodes, which is also what they do with Redis up until a
// key goes hot. Offered ten times the rate on every node, each key is
// admitted at most Rate·t + n·max(1, Burst/N) across the cluster (with
// N = n: Rate·t + max(Burst, n)), and each node admits at least its share.
func TestKeyedColdKeysWithinBound(t *testing.T) {
	const nodes, keys = 3, 200
	const rate, burst = 30.0, 10
	const d = 10 * second
	shareBurst := int64(max(1, burst/nodes))
	var now int64 = 1000 * second
	var limits []*KeyedLimit
	for i := range nodes {
		opt := testOptions("127.0.0.1:1", "cold-"+strconv.Itoa(i), nil) // nothing listens: Redis is down from the start
		opt.manual = true
		opt.clock = func() int64 { return now }
		opt.FallbackNodes = nodes
		limits = append(limits, newKeyed(t, newCluster(t, opt), KeyedSpec{LimitSpec: LimitSpec{Name: "user", Rate: rate, Burst: burst}}))
	}
	admitted := make([][nodes]int64, keys)
	start := now
	step := second / (10 * rate) // ten times the rate, on each node, for each key
	for ; now < start+d; now += step {
		for k := range keys {
			key := []byte("user-" + strconv.Itoa(k))
			for i, l := range limits {
				if l.Take(now, key, 1, nil).Verdict == Allow {
					admitted[k][i]++
				}
			}
		}
	}
	bound := int64(rate*float64(d)/1e9) + nodes*shareBurst
	floor := int64(rate/nodes*float64(d)/1e9) + shareBurst - 1
	for k := range keys {
		var total int64
		for i := range nodes {
			if admitted[k][i] < floor {
				t.Fatalf("key %d: node %d admitted %d, below its share %d", k, i, admitted[k][i], floor)
			}
			total += admitted[k][i]
		}
		if total > bound {
			t.Fatalf("key %d: %d admitted across %d nodes, above the cold bound %d", k, total, nodes, bound)
		}
	}
	t.Logf("each key admitted %v (bound %d) over %v", admitted[0], bound, time.Duration(d))
	for _, l := range limits {
		if s := l.Status(); s.Promotions != 0 || s.Hot != 0 {
			t.Fatalf("keys went hot with Redis down: %+v", s)
		}
	}
}

// Keys within their share never touch Redis: 2,000 users, a few requests
// each on each of two nodes, and not one Redis key is written for them.
func TestKeyedColdKeysCostNoRedisCalls(t *testing.T) {
	r := redistest.Start(t)
	var limits []*KeyedLimit
	for i := range 2 {
		c := newCluster(t, testOptions(r.Addr(), "node-"+strconv.Itoa(i), nil))
		limits = append(limits, newKeyed(t, c, KeyedSpec{LimitSpec: LimitSpec{Name: "user", Rate: 10, Burst: 10}}))
	}
	before := r.CommandCalls("evalsha", "eval")
	cl := newClient()
	for u := range 2000 {
		key := []byte("user-" + strconv.Itoa(u))
		for _, l := range limits {
			for range 3 { // within 10 / 2 nodes = 5
				if d := cl.takeKeyed(t, l, key); d.Verdict != Allow {
					t.Fatalf("user %d refused within its share: %+v", u, d)
				}
			}
		}
	}
	if keys := scanKeys(t, r, "test:user:*"); len(keys) != 0 {
		t.Fatalf("%d Redis keys written for cold users, want 0: %v", len(keys), keys[:min(5, len(keys))])
	}
	for _, l := range limits {
		if s := l.Status(); s.Promotions != 0 || s.ColdGrants != 6000 {
			t.Fatalf("status %+v, want 6000 cold grants and no promotion", s)
		}
	}
	t.Logf("scripts run meanwhile (heartbeats only): %d", r.CommandCalls("evalsha", "eval")-before)
}

// A key with more demand than its share on two nodes goes hot on both and
// gets the cluster rate, within the bound: Rate·t + Burst (its Redis
// bucket; the leases held nothing when the run began) + the cold bursts
// the nodes spent before it went hot and have not yet charged to the
// bucket (at most Burst/2 each). Every key Redis holds expires.
func TestKeyedHotKeyGetsClusterRate(t *testing.T) {
	r := redistest.Start(t)
	const rate, burst = 200, 20
	var limits []*KeyedLimit
	for i := range 2 {
		opt := testOptions(r.Addr(), "node-"+strconv.Itoa(i), nil)
		opt.FallbackNodes = 2
		opt.MinNodes = 2
		limits = append(limits, newKeyed(t, newCluster(t, opt), KeyedSpec{LimitSpec: LimitSpec{Name: "user", Rate: rate, Burst: burst}}))
	}
	hot := []byte("alice")
	var admitted tally
	start := time.Now()
	var wg sync.WaitGroup
	for _, l := range limits {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl := newClient()
				for time.Since(start) < 1200*time.Millisecond {
					admitted.add(cl.takeKeyed(t, l, hot))
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	allowed := admitted.allow.Load()
	bound := int64(rate*elapsed.Seconds()) + burst + 2*(burst/2) + 1
	share := int64(rate * elapsed.Seconds())
	t.Logf("a hot key on 2 nodes admitted %d in %v (bound %d)", allowed, elapsed, bound)
	if allowed > bound {
		t.Fatalf("admitted %d, above the bound %d", allowed, bound)
	}
	if allowed < share*6/10 {
		t.Fatalf("admitted %d: the hot key did not get the cluster rate (%d over the run)", allowed, share)
	}
	// The bucket expires within about Burst·interval of the last grant,
	// so it may be gone already (PTTL -2); it must never lack a TTL (-1).
	bucket := limits[0].prefix + redisKey(hot)
	for _, key := range append(scanKeys(t, r, "test:*"), bucket) {
		ttl, err := r.Do("PTTL", key).AsInt64()
		if err != nil || ttl == -1 {
			t.Fatalf("Redis key %q has PTTL %d (%v): every key written must expire", key, ttl, err)
		}
	}
	for _, l := range limits {
		if s := l.Status(); s.Promotions != 1 || s.Hot != 1 {
			t.Fatalf("status %+v, want the one key hot", s)
		}
	}
}

// A hot key's request served from its lease allocates nothing.
func TestKeyedHotKeyAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	r := redistest.Start(t)
	opt := testOptions(r.Addr(), "allocs", nil)
	opt.manual = true
	c := newCluster(t, opt)
	k := newKeyed(t, c, KeyedSpec{LimitSpec: LimitSpec{Name: "user", Rate: 1000, Burst: 1}})
	key := []byte("alice")
	k.Take(nanotime(), key, 1, func(Decision) {})
	e := k.promote(k.cold.Hash(key), key)
	e.held.Store(1 << 40) // far above the lease size: no refill is queued
	done := func(Decision) {}
	if n := testing.AllocsPerRun(1000, func() {
		if d := k.Take(nanotime(), key, 1, done); d.Verdict != Allow {
			t.Fatalf("%+v", d)
		}
	}); n != 0 {
		t.Fatalf("Take of a hot key from its lease: %v allocs, want 0", n)
	}
}

// The hot set is bounded: a key that needs to go hot while its group is
// full stays at its cold share, counted; a hot key idle for a second hands
// its lease back and goes cold, and its slot takes the next one.
func TestKeyedHotSetBounded(t *testing.T) {
	r := redistest.Start(t)
	n := newFakeNode(t, r.Addr(), nil)
	k := newKeyed(t, n.c, KeyedSpec{LimitSpec: LimitSpec{Name: "user", Rate: 1000, Burst: 1}, HotKeys: hotGroup})
	cl := newClient()
	take := func(key string) Decision {
		d := k.Take(n.now, []byte(key), 1, cl.done)
		if d.Verdict == Pending {
			d = <-cl.answers
		}
		return d
	}
	for i := range 3 * hotGroup {
		key := "user-" + strconv.Itoa(i)
		take(key) // the cold burst of 1
		d := take(key)
		hot := k.findHot(k.cold.Hash([]byte(key))) != nil
		if i < hotGroup && !hot {
			t.Fatalf("key %d: %+v, not hot", i, d)
		}
		if i >= hotGroup && (hot || d.Verdict != Deny) {
			t.Fatalf("key %d with the hot set full: %+v (hot %v), want a refusal at its share", i, d, hot)
		}
	}
	s := k.Status()
	if s.Hot != hotGroup || s.Promotions != hotGroup || s.HotFull != 2*hotGroup {
		t.Fatalf("status %+v, want %d hot, %d promotions, %d refused promotions", s, hotGroup, hotGroup, 2*hotGroup)
	}
	n.advance(2 * time.Second)
	if s := k.Status(); s.Hot != 0 || s.Demotions != hotGroup || s.Held != 0 {
		t.Fatalf("after 2 s idle: %+v, want every hot key cold and its lease handed back", s)
	}
	key := "user-" + strconv.Itoa(2*hotGroup)
	take(key)
	if d := take(key); k.Status().Hot != 1 {
		t.Fatalf("a key going hot after the set emptied: %+v, %+v", d, k.Status())
	}
}

// While Redis is down every key decides by the failure mode, as the global
// limit does: shadow the cold share (a hot key spends its lease first),
// open allows, closed answers Unavailable.
func TestKeyedFailureModes(t *testing.T) {
	opt := testOptions("127.0.0.1:1", "down", nil)
	opt.manual = true
	opt.FallbackNodes = 2
	c := newCluster(t, opt)
	for _, tc := range []struct {
		mode FailureMode
		want []Verdict
	}{
		{FailShadow, []Verdict{Allow, Allow, Deny}}, // burst 4 / 2 nodes
		{FailOpen, []Verdict{Allow, Allow, Allow}},
		{FailClosed, []Verdict{Unavailable, Unavailable, Unavailable}},
	} {
		k := newKeyed(t, c, KeyedSpec{LimitSpec: LimitSpec{Name: "user-" + tc.mode.String(), Rate: 1, Burst: 4, OnFailure: tc.mode}})
		now := nanotime()
		for i, want := range tc.want {
			if d := k.Take(now, []byte("alice"), 1, nil); d.Verdict != want {
				t.Fatalf("%v: take %d: %v, want %v", tc.mode, i, d.Verdict, want)
			}
		}
		if s := k.Status(); s.Degraded == 0 && tc.mode != FailShadow || s.Promotions != 0 {
			t.Fatalf("%v: status %+v", tc.mode, s)
		}
	}
}

// scanKeys lists the Redis keys matching pattern (a test's look; the
// gateway itself never enumerates keys).
func scanKeys(t testing.TB, r *redistest.Server, pattern string) []string {
	t.Helper()
	var out []string
	cursor := "0"
	for {
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

// BenchmarkKeyedTakeHot is a hot key served from its lease: a hash, a
// probe of the hot set and Limit.Take's compare-and-swap.
func BenchmarkKeyedTakeHot(b *testing.B) {
	r := redistest.Start(b)
	opt := testOptions(r.Addr(), "bench", nil)
	opt.manual = true
	k := newKeyed(b, newCluster(b, opt), KeyedSpec{LimitSpec: LimitSpec{Name: "user", Rate: 1000, Burst: 1}})
	key := []byte("alice")
	k.promote(k.cold.Hash(key), key).held.Store(1 << 50)
	done := func(Decision) {}
	b.ReportAllocs()
	for b.Loop() {
		k.Take(nanotime(), key, 1, done)
	}
}

// BenchmarkKeyedTakeCold is a cold key within its share: a probe of the
// hot set and the cold table's compare-and-swap.
func BenchmarkKeyedTakeCold(b *testing.B) {
	r := redistest.Start(b)
	opt := testOptions(r.Addr(), "bench", nil)
	opt.manual = true
	k := newKeyed(b, newCluster(b, opt), KeyedSpec{LimitSpec: LimitSpec{Name: "user", Rate: 1e6, Burst: 1e6}})
	key := []byte("alice")
	done := func(Decision) {}
	b.ReportAllocs()
	for b.Loop() {
		k.Take(nanotime(), key, 1, done)
	}
}

// A hot key when Redis goes down behaves as a global limit does: its
// leased tokens first, then its shadow quota, every decision counted as
// made without Redis; a cold key keeps its share.
func TestKeyedHotKeyWhenRedisDown(t *testing.T) {
	r := redistest.Start(t)
	n := newFakeNode(t, r.Addr(), nil)
	k := newKeyed(t, n.c, KeyedSpec{LimitSpec: LimitSpec{Name: "user", Rate: 0.001, Burst: 4}})
	key := []byte("alice")
	e := k.promote(k.cold.Hash(key), key)
	e.debt.Store(0)
	e.held.Store(3)
	n.c.br.set(Up, Down)
	var got []Verdict
	for range 8 {
		got = append(got, k.Take(n.now, key, 1, nil).Verdict)
	}
	want := []Verdict{Allow, Allow, Allow, Allow, Allow, Allow, Allow, Deny} // 3 leased, then the shadow burst of 4
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("takes with Redis down: %v, want %v", got, want)
		}
	}
	if s := k.Status(); s.Degraded != 8 || s.Quota != s.ShadowRate {
		t.Fatalf("status %+v: want 8 decisions without Redis at the shadow quota", s)
	}
	if d := k.Take(n.now, []byte("bob"), 1, nil); d.Verdict != Allow {
		t.Fatalf("a cold key with Redis down: %+v", d)
	}
}
