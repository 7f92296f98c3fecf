package limiter_test

import (
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// A flood of a million distinct client IPs through an ip limit's key path
// keeps memory bounded by the table (65,536 keys here), and a client
// asking far above its rate throughout is still held to it: the flood
// evicts idle keys, not the one being limited. Run without -race (make
// test's allocation step), where it takes about a second.
func TestMillionClientIPsBoundedAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	store := newStore(t)
	f := mustCompile(t, parse(t, `
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1, burst: 5, max_keys: 65536}]}]`), store)[0]
	x := exchange(t, "192.0.2.1", nil)
	req, abuser := x.Req, netip.MustParseAddr("203.0.113.7")
	request := func(ip netip.Addr) filters.Verdict {
		x.Reset(req, []byte("id"), ip, 0, nil)
		return f.Request(x)
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	abuserAllowed := 0
	const flood = 1_000_000
	for i := range flood {
		request(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
		if i%100 == 0 && request(abuser) == filters.Continue {
			abuserAllowed++
		}
	}
	elapsed := time.Since(start)
	runtime.GC()
	runtime.ReadMemStats(&after)

	k := status(t, store, "api/ip", "local").Keys
	runtime.KeepAlive(f)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d keys in %v: table %d/%d, %d evictions, heap %+d KiB after GC", flood, elapsed.Round(time.Millisecond),
		k.Len, k.Cap, k.Evictions, grown>>10)
	if k.Cap != 65536 || k.Len > k.Cap || k.Evictions < flood-uint64(k.Cap) {
		t.Fatalf("table %+v: it must hold at most its capacity", k)
	}
	if grown > 8<<20 {
		t.Fatalf("heap grew %d KiB over the flood; the table should bound it at a few MiB", grown>>10)
	}
	if most := 5 + int(elapsed.Seconds()) + 1; abuserAllowed > most {
		t.Fatalf("the abusive client was allowed %d times during the flood, at most %d", abuserAllowed, most)
	}
}
