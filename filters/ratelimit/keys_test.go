package ratelimit

import (
	"hash/maphash"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopgate/loopgate/pool/pooltest"
)

// holds reports whether k holds a live bucket for key, without adding it.
func holds(k *Keys, key string) bool {
	h := maphash.String(k.seed, key)
	base := (h & k.mask) * groupSize
	for i := base; i < base+groupSize; i++ {
		if e := k.slots[i].Load(); e != nil && e.hash == h && e.tat.Load() != dead {
			return true
		}
	}
	return false
}

func TestNewKeysRoundsCapacity(t *testing.T) {
	for _, c := range []struct{ max, cap int }{{1, 8}, {8, 8}, {9, 16}, {17, 32}, {65536, 65536}, {0, DefaultMaxKeys}} {
		if got := NewKeys(c.max, 0).Cap(); got != c.cap {
			t.Errorf("NewKeys(%d).Cap() = %d, want %d", c.max, got, c.cap)
		}
	}
}

func TestKeysSeparateBuckets(t *testing.T) {
	l := mustLimit(t, 1, 2)
	k := NewKeys(64, 0)
	for _, key := range []string{"10.0.0.1", "10.0.0.2"} {
		for i := range 2 {
			if !k.AllowString(l, key, 0, 1).Allowed {
				t.Fatalf("%s take %d denied", key, i)
			}
		}
		if k.Allow(l, []byte(key), 0, 1).Allowed {
			t.Fatalf("%s allowed past its burst", key)
		}
	}
	if k.Len() != 2 {
		t.Fatalf("Len = %d, want 2", k.Len())
	}
}

// A million distinct keys through a table of 65,536: the table never holds
// more than its capacity, the oldest keys make room for the newest, a key
// being limited throughout keeps its state, so the flood buys it no fresh
// burst, and each new key costs one allocation, its entry, and nothing
// else. (It runs in make test's build without -race, where its million
// inserts take a second rather than a minute.)
func TestKeysMillionKeysBoundedAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	const flood = 1_000_000
	l := mustLimit(t, 10, 5) // per key
	k := NewKeys(1<<16, 0)
	var now int64
	hotAllowed := 0
	key := make([]byte, 0, 32)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range flood {
		now += 1000 // 1 µs per request: the flood spans one second
		key = strconv.AppendInt(append(key[:0], "flood-"...), int64(i), 10)
		k.Allow(l, key, now, 1)
		if i%100 == 0 { // the hot key asks 10,000 times a second, 1000x its rate
			if k.AllowString(l, "hot", now, 1).Allowed {
				hotAllowed++
			}
		}
		if i%65536 == 0 && k.Len() > k.Cap() {
			t.Fatalf("after %d keys the table holds %d, capacity %d", i, k.Len(), k.Cap())
		}
	}
	runtime.ReadMemStats(&after)
	if n := after.Mallocs - before.Mallocs; n > flood+1000 {
		t.Fatalf("%d allocations for %d new keys, want one each", n, flood)
	}
	st := k.Stats()
	if st.Len > st.Cap || st.Evictions < flood-uint64(st.Cap) {
		t.Fatalf("stats after the flood: %+v", st)
	}
	// burst 5, then 10 a second for the one second the flood lasted
	if hotAllowed > 5+10+1 {
		t.Fatalf("the limited key was allowed %d times during the flood, want at most 16", hotAllowed)
	}
	if !holds(k, "hot") {
		t.Fatal("the limited key was evicted")
	}
	oldGone, newKept := 0, 0
	for i := range 1000 {
		if !holds(k, "flood-"+strconv.Itoa(i)) {
			oldGone++
		}
		if holds(k, "flood-"+strconv.Itoa(flood-1-i)) {
			newKept++
		}
	}
	if oldGone != 1000 || newKept < 990 {
		t.Fatalf("of the first 1000 keys %d were evicted (want all), of the last 1000 %d are held (want nearly all)", oldGone, newKept)
	}
}

// Sweep empties the table of idle buckets and keeps the ones in use.
func TestKeysSweepDropsIdle(t *testing.T) {
	l := mustLimit(t, 10, 5)
	k := NewKeys(1<<14, time.Minute)
	for i := range 3000 {
		k.AllowString(l, "idle-"+strconv.Itoa(i), 0, 1)
	}
	now := 60_000 * ms
	for k.AllowString(l, "busy", now, 1).Allowed {
	}
	// The idle buckets are full again at 100 ms, idle for a minute at 60.1 s.
	if n := k.Sweep(now + 100*ms - 1); n != 0 {
		t.Fatalf("swept %d buckets before any was idle for a minute", n)
	}
	// Hashing is seeded per process: a probe group that filled up may
	// have evicted an idle key to make room, which the sweep then cannot
	// find. Every idle key is swept or was evicted; only busy is left.
	if n := k.Sweep(now + 100*ms); uint64(n)+k.Stats().Evictions != 3000 || k.Len() != 1 || !holds(k, "busy") {
		t.Fatalf("swept %d (evicted %d before), %d left, busy held %v: want 3000 gone and only busy left", n, k.Stats().Evictions, k.Len(), holds(k, "busy"))
	}
	if d := k.AllowString(l, "busy", now+100*ms, 1); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("the busy key after the sweep: %+v, want its one token back and no more", d)
	}
}

// Loops adding, evicting and sweeping keys at once never lose a hot key's
// state: at one instant, racing loops are allowed exactly its burst.
func TestKeysConcurrentChurn(t *testing.T) {
	l := mustLimit(t, 1, 500)
	k := NewKeys(64, 1)
	const now = 1_000_000_000
	k.AllowString(l, "hot", now, 1)
	var hot atomic.Int64
	hot.Add(1)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 5000 {
				k.AllowString(l, strconv.Itoa(g)+"/"+strconv.Itoa(i), now, 1)
				if k.AllowString(l, "hot", now, 1).Allowed {
					hot.Add(1)
				}
				if i%500 == 0 {
					k.Sweep(now)
				}
			}
		}()
	}
	wg.Wait()
	if hot.Load() != 500 || k.Len() > k.Cap() {
		t.Fatalf("hot key allowed %d times (want its burst, 500); %d keys held of %d", hot.Load(), k.Len(), k.Cap())
	}
}

// Deciding for a key the table already holds allocates nothing.
func TestKeysAllowAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	l := mustLimit(t, 1e6, 1e6)
	k := NewKeys(1024, 0)
	key := []byte("203.0.113.7")
	k.Allow(l, key, 0, 1)
	now := int64(0)
	if n := testing.AllocsPerRun(1000, func() {
		now++
		k.Allow(l, key, now, 1)
	}); n != 0 {
		t.Fatalf("Allow on a held key: %v allocs, want 0", n)
	}
	var b Bucket
	if n := testing.AllocsPerRun(1000, func() { b.Allow(l, now, 1) }); n != 0 {
		t.Fatalf("Bucket.Allow: %v allocs, want 0", n)
	}
}
