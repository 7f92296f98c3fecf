// With the default isolation a slow route cannot starve a fast route on
// the same upstream: its share of the pool is capped, through real
// sockets, with a pool scaled down from 1024 to 8 connections.

package engine_test

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// Forty clients storm a route whose upstream holds every call until the
// test lets go; a fast route on the same upstream (the same node, the
// same pool) keeps answering 200 beside them, with no isolation section
// anywhere. The slow route holds its share, 6 of the 8 connections, and
// its excess gets 503/50302 at once rather than waiting in the pool's
// queue in front of the fast route's calls.
func TestSlowRouteCannotStarveFastRouteOnSharedUpstream(t *testing.T) {
	hold := make(chan struct{})
	var held atomic.Int64
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			held.Add(1)
			<-hold
		}
		io.WriteString(w, "ok")
	}))
	var once sync.Once
	release := func() { once.Do(func() { close(hold) }) }
	// A fast call waits for one of the two connections the fast calls
	// share; pool_acquire_timeout gives a loaded machine time for that
	// (the default 500 ms refused one under the storm's load).
	g := startGateway(t, `
loops: 1
upstreams:
  - {name: shared, nodes: ["%s"], max_conns: 8, pool_acquire_timeout: 3s}
routes:
  - {id: slow, prefix: /slow, upstream: shared}
  - {id: fast, prefix: /fast, upstream: shared}
`, up)
	t.Cleanup(release) // before the gateway's shutdown, which waits for held calls

	stop := make(chan struct{})
	var storm sync.WaitGroup
	var shareRefused, otherFailures atomic.Int64
	for range 40 {
		storm.Add(1)
		go func() {
			defer storm.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := fetch(g.url("/slow"))
				switch {
				case r.err != nil:
					otherFailures.Add(1)
				case r.resp.StatusCode == 503:
					var e errorBody
					if json.Unmarshal(r.body, &e) == nil && e.Code == 50302 {
						shareRefused.Add(1)
					} else {
						otherFailures.Add(1)
					}
				case r.resp.StatusCode != 200:
					otherFailures.Add(1)
				}
			}
		}()
	}
	t.Cleanup(func() { close(stop); release(); storm.Wait() })
	waitFor(t, "the slow route to fill its part of the pool and be refused past it", func() bool {
		return held.Load() >= 6 && shareRefused.Load() >= 40
	})

	var fastFailed atomic.Int64
	var wg sync.WaitGroup
	for range 4 { // under the fast route's own share: 2 connections free, 2 calls waiting for them
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if r := fetch(g.url("/fast")); r.err != nil || r.resp.StatusCode != 200 {
					if fastFailed.Add(1) == 1 {
						t.Logf("fast route: %v %s", r.err, r.body)
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := fastFailed.Load(); n != 0 {
		t.Fatalf("%d of 80 requests to the fast route failed beside the slow route's storm", n)
	}
	if n := held.Load(); n != 6 {
		t.Fatalf("the slow route reached the upstream with %d calls, want its share, 6", n)
	}
	if n := otherFailures.Load(); n != 0 {
		t.Fatalf("%d slow-route requests failed other than by 503/50302", n)
	}
	if v := scrapeMetrics(t, g.srv).get(t, `loopgate_route_isolation_pool_share_rejected_total{route="slow"}`); v < 40 {
		t.Fatalf("pool share rejections %v, want at least 40", v)
	}
}
