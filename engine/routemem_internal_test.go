// What a route no request has reached costs the engine: the compiled
// route, its registry entries, and its share of a chain.

package engine

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/engine/config"
)

// manyRoutes is a config of n exact routes /r0 ... with the default
// filters, and one more, "own", whose ip_deny builds its own filter.
func manyRoutes(t testing.TB, n int) *config.Config {
	t.Helper()
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 2\nupstreams:\n  - {name: backend, nodes: [\"127.0.0.1:9\"]}\nroutes:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {id: r%d, path: /r%d, upstream: backend}\n", i, i)
	}
	b.WriteString("  - {id: own, prefix: /own, upstream: backend, ip_deny: [\"192.0.2.0/24\"]}\n")
	cfg, err := config.Parse([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// At 30,000 routes no request has reached, the engine holds at most
// 480 bytes a route (after a collection, the parsed config excluded): the
// compiled route and its metrics entry; no filter stats, no chain of its
// own (they cost 820 bytes a route when compiled), no isolation limiter
// (140 more: 524 bytes a route with it).
func TestUntouchedRoutesCostLittle(t *testing.T) {
	if testing.Short() {
		t.Skip("30,000 routes")
	}
	const n = 30_000
	cfg := manyRoutes(t, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	per := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	t.Logf("%d bytes a route", per)
	if per > 480 {
		t.Fatalf("the engine holds %d bytes per untouched route, want at most 480", per)
	}
}
