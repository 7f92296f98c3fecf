// Adaptive slow-call isolation through real sockets, with short windows.

package engine_test

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A route whose upstream turns slow has its limit cut to the floor, so its
// excess requests get 429/42901 while a route on another upstream is
// untouched; once the slowness ends the limit grows back to its base.
func TestIsolationShrinksAndRecovers(t *testing.T) {
	var slow atomic.Bool
	slowUp := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			time.Sleep(150 * time.Millisecond) // the upstream's slowness under test, not synchronisation
		}
		io.WriteString(w, "ok")
	}))
	g := startGateway(t, `
isolation: {limit: 12, floor: 2, step: 5, slow_call: 100ms, window: 100ms, min_samples: 5, slow_ratio: 30, cold_start: 5}
upstreams:
  - {name: slow, nodes: ["%s"]}
  - {name: fast, nodes: ["%s"]}
routes:
  - {id: fast, prefix: /fast/, upstream: fast, isolation: {enabled: false}}
  - {id: slow, prefix: /, upstream: slow}
`, slowUp, startUpstream(t, okHandler))
	limit := `loopgate_route_isolation_limit{route="slow"}`
	if v := scrapeMetrics(t, g.srv).get(t, limit); v != 12 {
		t.Fatalf("initial limit %v, want 12", v)
	}
	slow.Store(true)
	var rejected, fastFailed atomic.Int64
	burst := func(n int) {
		var wg sync.WaitGroup
		for range n {
			wg.Add(2)
			go func() {
				defer wg.Done()
				r := fetch(g.url("/x"))
				if r.err == nil && r.resp.StatusCode == 429 {
					var e errorBody
					if json.Unmarshal(r.body, &e) == nil && e.Code == 42901 {
						rejected.Add(1)
					}
				}
			}()
			go func() {
				defer wg.Done()
				if r := fetch(g.url("/fast/x")); r.err != nil || r.resp.StatusCode != 200 {
					fastFailed.Add(1)
				}
			}()
		}
		wg.Wait()
	}
	waitFor(t, "the slow route's limit to fall to the floor", func() bool {
		burst(8)
		return scrapeMetrics(t, g.srv).get(t, limit) == 2
	})
	burst(8)
	if rejected.Load() == 0 {
		t.Fatal("no request got 429/42901 at the floor")
	}
	if fastFailed.Load() != 0 {
		t.Fatalf("%d requests to the fast route failed", fastFailed.Load())
	}
	s := scrapeMetrics(t, g.srv)
	if v := s.get(t, `loopgate_route_isolation_warnings_total{route="slow"}`); v != 1 {
		t.Fatalf("warnings %v, want 1 for the episode", v)
	}
	slow.Store(false)
	waitFor(t, "the limit to grow back to its base", func() bool {
		burst(2)
		return scrapeMetrics(t, g.srv).get(t, limit) == 12
	})
	waitMetric(t, g.srv, `loopgate_route_isolation_in_flight{route="slow"}`, 0)
	if _, ok := scrapeMetrics(t, g.srv).values[`loopgate_route_isolation_limit{route="fast"}`]; ok {
		t.Fatal("the route with isolation off has a limiter")
	}
}
