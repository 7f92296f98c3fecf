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
	// A route's series are written once a request has reached it.
	if r := fetch(g.url("/first")); r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("first request: %+v", r)
	}
	if v := waitMetric(t, g.srv, `loopgate_route_requests_total{route="slow",code="2xx"}`, 1).get(t, limit); v != 12 {
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

// heldUpstream answers /hold only once release is called, and anything
// else at once.
func heldUpstream(t *testing.T) (addr string, release func()) {
	hold := make(chan struct{})
	var once sync.Once
	addr = startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			<-hold
		}
		io.WriteString(w, "ok")
	}))
	release = func() { once.Do(func() { close(hold) }) }
	return addr, release
}

// isolationGateway runs a route "r" with the isolation section given (a
// limit of 1) and starts a /hold request that takes the one permit.
func isolationGateway(t *testing.T, isolation string) (g *gateway, held <-chan fetched, release func()) {
	up, release := heldUpstream(t)
	g = startGateway(t, `
upstreams: [{name: u, nodes: ["%s"]}]
routes: [{id: r, prefix: /, upstream: u, isolation: %s}]
`, up, isolation)
	t.Cleanup(release) // before the gateway's shutdown, which waits for the held call
	done := make(chan fetched, 1)
	go func() { done <- fetch(g.url("/hold")) }()
	waitMetric(t, g.srv, `loopgate_route_isolation_in_flight{route="r"}`, 1)
	return g, done, release
}

func expectStatus(t *testing.T, what string, r fetched, status int) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("%s: %v", what, r.err)
	}
	if r.resp.StatusCode != status {
		t.Fatalf("%s: status %d, want %d; body %s", what, r.resp.StatusCode, status, r.body)
	}
}

// A request over the limit waits in the queue, and the permit the running
// call gives back goes to it: it is served, not refused.
func TestIsolationQueueHandsOnFreedPermit(t *testing.T) {
	g, held, release := isolationGateway(t, `{limit: 1, floor: 1, queue_timeout: 10s}`)
	waiter := make(chan fetched, 1)
	go func() { waiter <- fetch(g.url("/x")) }()
	waitMetric(t, g.srv, `loopgate_route_isolation_waiting{route="r"}`, 1)
	release()
	expectStatus(t, "the held call", <-held, 200)
	expectStatus(t, "the waiting request", <-waiter, 200)
	s := waitMetric(t, g.srv, `loopgate_route_isolation_in_flight{route="r"}`, 0)
	if v := s.get(t, `loopgate_route_isolation_waiting{route="r"}`); v != 0 {
		t.Fatalf("waiting %v after both answered", v)
	}
	if v := s.get(t, `loopgate_route_isolation_rejected_total{route="r"}`); v != 0 {
		t.Fatalf("rejected %v, want 0", v)
	}
}

// With several loops a permit given back on one loop reaches a request
// waiting on another (the tick's grant): every one of a queue of waiters,
// spread over both loops, is served in turn.
func TestIsolationQueueAcrossLoops(t *testing.T) {
	g, held, release := isolationGateway(t, `{limit: 1, floor: 1, queue_timeout: 10s}`)
	const waiters = 8 // on their own connections, which the kernel spreads over both loops
	results := make(chan fetched, waiters)
	var wg sync.WaitGroup
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
			resp, err := c.Get(g.url("/x"))
			if err != nil {
				results <- fetched{err: err}
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			results <- fetched{resp: resp, body: body, err: err}
		}()
	}
	waitMetric(t, g.srv, `loopgate_route_isolation_waiting{route="r"}`, waiters)
	release()
	expectStatus(t, "the held call", <-held, 200)
	wg.Wait()
	for range waiters {
		expectStatus(t, "a waiting request", <-results, 200)
	}
	waitMetric(t, g.srv, `loopgate_route_isolation_in_flight{route="r"}`, 0)
}

// A full queue refuses at once, and a request that waited queue_timeout
// without a permit is refused then: 429, code 42901, Retry-After: 1.
func TestIsolationQueueFullAndTimeout(t *testing.T) {
	// The waiter's queue_timeout must outlast the scrape that sees it
	// waiting and the refused request after it: 300 ms did not always, on
	// a loaded machine.
	g, _, _ := isolationGateway(t, `{limit: 1, floor: 1, queue: 1, queue_timeout: 2s}`)
	waiter := make(chan fetched, 1)
	go func() { waiter <- fetch(g.url("/x")) }()
	waitMetric(t, g.srv, `loopgate_route_isolation_waiting{route="r"}`, 1)

	over := fetch(g.url("/y"))
	if v := scrapeMetrics(t, g.srv).get(t, `loopgate_route_isolation_waiting{route="r"}`); v != 1 {
		t.Fatalf("the queue-full refusal came after the waiter left the queue (waiting %v)", v)
	}
	for what, r := range map[string]fetched{"over a full queue": over, "after queue_timeout": <-waiter} {
		expectStatus(t, what, r, 429)
		var e errorBody
		if err := json.Unmarshal(r.body, &e); err != nil || e.Code != 42901 {
			t.Fatalf("%s: body %s, want code 42901", what, r.body)
		}
		if got := r.resp.Header.Get("Retry-After"); got != "1" {
			t.Fatalf("%s: Retry-After %q, want 1", what, got)
		}
	}
	if v := scrapeMetrics(t, g.srv).get(t, `loopgate_route_isolation_rejected_total{route="r"}`); v != 2 {
		t.Fatalf("rejected %v, want 2", v)
	}
}

// queue: 0 turns waiting off: over the limit is refused at once.
func TestIsolationQueueOff(t *testing.T) {
	g, _, _ := isolationGateway(t, `{limit: 1, floor: 1, queue: 0, queue_timeout: 10s}`)
	expectStatus(t, "over the limit", fetch(g.url("/x")), 429)
}

// A client that leaves while it waits leaves the queue, and takes nothing
// with it: the permit still goes round afterwards.
func TestIsolationQueueClientLeaves(t *testing.T) {
	g, held, release := isolationGateway(t, `{limit: 1, floor: 1, queue_timeout: 10s}`)
	c := g.dial(t)
	if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\nHost: gw\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, g.srv, `loopgate_route_isolation_waiting{route="r"}`, 1)
	c.Close()
	waitMetric(t, g.srv, `loopgate_route_isolation_waiting{route="r"}`, 0)
	release()
	expectStatus(t, "the held call", <-held, 200)
	expectStatus(t, "a request after", fetch(g.url("/x")), 200)
	waitMetric(t, g.srv, `loopgate_route_isolation_in_flight{route="r"}`, 0)
}
