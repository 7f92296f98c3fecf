// Retries on another node, through real sockets: what is retried, what
// never is, and what the client sees.

package engine_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// threeNodes is one route over three nodes; the last argument goes under
// the upstream.
const threeNodes = `
upstreams:
  - name: backend
    nodes: ["%s", "%s", "%s"]
%s
routes:
  - id: all
    prefix: /
    upstream: backend
`

// countingHandler answers 200 with its name and counts the requests by method.
type countingHandler struct {
	name        string
	gets, posts atomic.Int64
}

func (h *countingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != "GET" {
		_, _ = io.ReadAll(r.Body)
		h.posts.Add(1)
	} else {
		h.gets.Add(1)
	}
	io.WriteString(w, h.name)
}

// sendAll sends n requests from 8 clients and returns the statuses seen.
func sendAll(t *testing.T, g *gateway, n int, send func() (int, error)) map[int]int {
	t.Helper()
	var mu sync.Mutex
	seen := map[int]int{}
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				status, err := send()
				if err != nil {
					status = -1
				}
				mu.Lock()
				seen[status]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return seen
}

// Dead node: three nodes, one refusing connections. Every GET and every
// POST succeeds: the dead node's failures are connect errors, so no
// request's bytes reached it and every one may go elsewhere.
func TestRetryDeadNode(t *testing.T) {
	a, b := &countingHandler{name: "a"}, &countingHandler{name: "b"}
	// The budget's floor (3 retries in flight) would refuse some of
	// these 8 clients' retries, and ejection would soon spare them: this
	// test is about which requests may be retried, so the floor is raised
	// above the client count and ejection is off.
	g := startGateway(t, threeNodes, startUpstream(t, a), closedPort(t), startUpstream(t, b), `    retry_budget: {min_retries: 8}
    outlier: {enabled: false}`)
	get := func() (int, error) {
		r := fetch(g.url("/x"))
		if r.err != nil {
			return 0, r.err
		}
		return r.resp.StatusCode, nil
	}
	post := func() (int, error) {
		resp, err := testClient.Post(g.url("/x"), "text/plain", strings.NewReader("payload"))
		if err != nil {
			return 0, err
		}
		_, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if seen := sendAll(t, g, 300, get); seen[200] != 300 {
		t.Fatalf("GET load through a dead node: statuses %v, want 300 × 200", seen)
	}
	if seen := sendAll(t, g, 150, post); seen[200] != 150 {
		t.Fatalf("POST load through a dead node: statuses %v, want 150 × 200", seen)
	}
	if a.gets.Load()+b.gets.Load() != 300 || a.posts.Load()+b.posts.Load() != 150 {
		t.Fatalf("live nodes saw %d+%d GETs and %d+%d POSTs, want 300 and 150",
			a.gets.Load(), b.gets.Load(), a.posts.Load(), b.posts.Load())
	}
	s := scrapeMetrics(t, g.srv)
	if v := s.get(t, `loopgate_upstream_retries_total{upstream="backend"}`); v < 100 {
		t.Fatalf("retries counted: %v, want about a third of 450", v)
	}
}

// Dead node under the default retry budget: a retry after a connect
// failure reached no node, so the budget does not limit it. With its
// floor of 3 retries in flight, 8 clients through a refusing node got
// some 502s while the two live nodes were idle; none now.
func TestRetryDeadNodeDefaultBudget(t *testing.T) {
	a, b := &countingHandler{name: "a"}, &countingHandler{name: "b"}
	g := startGateway(t, threeNodes, startUpstream(t, a), closedPort(t), startUpstream(t, b), `    outlier: {enabled: false}`)
	get := func() (int, error) {
		r := fetch(g.url("/x"))
		if r.err != nil {
			return 0, r.err
		}
		return r.resp.StatusCode, nil
	}
	if seen := sendAll(t, g, 600, get); seen[200] != 600 {
		t.Fatalf("GET load through a dead node with the default budget: statuses %v, want 600 × 200", seen)
	}
	s := scrapeMetrics(t, g.srv)
	if v := s.get(t, `loopgate_upstream_retries_total{upstream="backend"}`); v < 100 {
		t.Fatalf("retries counted: %v, want about a third of 600", v)
	}
	if v := s.sum("loopgate_upstream_retries_exhausted_total"); v != 0 {
		t.Fatalf("retries refused by the budget: %v, want 0 (a connect failure's retry is not limited)", v)
	}
}

// resetAfterHead reads a request head and closes the connection without a
// response: the request's bytes reached the node.
func resetAfterHead(hits *atomic.Int64) func(net.Conn) {
	return func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if line == "\r\n" {
				hits.Add(1)
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // a reset, not an orderly close
				}
				return
			}
		}
	}
}

// A reset before any response byte: a GET goes to another node, a POST
// (whose bytes reached the node) never does and gets the 502; nor does a
// PUT, retried by method, whose body went out and was not kept.
func TestRetryResetOnlyIdempotent(t *testing.T) {
	var resets atomic.Int64
	good := &countingHandler{name: "good"}
	bad := startRawUpstream(t, resetAfterHead(&resets))
	// One loop, so one round robin: a retried request leaves the turn
	// on the resetting node, and every request tries it first.
	g := startGateway(t, `
loops: 1
upstreams:
  - name: backend
    nodes: ["%s", "%s"]
    outlier: {enabled: false} # the failing node stays in rotation
routes:
  - id: all
    prefix: /
    upstream: backend
`, bad, startUpstream(t, good))
	for i := range 4 {
		r := fetch(g.url(fmt.Sprintf("/get/%d", i)))
		if r.err != nil || r.resp.StatusCode != 200 || string(r.body) != "good" {
			t.Fatalf("GET %d: %v %v %q, want the good node's 200", i, r.err, r.resp, r.body)
		}
	}
	if resets.Load() != 4 {
		t.Fatalf("the resetting node saw %d GETs, want all 4 first", resets.Load())
	}
	c := g.client(t)
	failed := 0
	for i := range 4 {
		c.send(fmt.Sprintf("POST /post/%d HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody", i))
		resp, body := readResponse(t, c.br, "POST")
		switch resp.StatusCode {
		case 200:
		case 502:
			expectError(t, resp, body, 502, 50202)
			failed++
			c = g.client(t)
		default:
			t.Fatalf("POST %d: status %d", i, resp.StatusCode)
		}
	}
	// Not retried, a POST leaves the turn on the good node: they alternate.
	if failed != 2 || good.posts.Load() != 2 || resets.Load() != 6 {
		t.Fatalf("POSTs: %d failed, the good node saw %d, the resetting one %d, want 2, 2, 2: a POST that reached a node was retried",
			failed, good.posts.Load(), resets.Load()-4)
	}
}

// bodyRecorder answers 200 and keeps every request body it got.
type bodyRecorder struct {
	mu     sync.Mutex
	bodies []string
}

func (b *bodyRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.bodies = append(b.bodies, r.Method+" "+string(body))
	b.mu.Unlock()
	io.WriteString(w, "good")
}

func (b *bodyRecorder) got() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.bodies...)
}

// A PUT (retried by method) whose body was held whole within
// request_buffer_bytes is sent again, body and all, to the next node after
// a reset, chunked or not; one whose body streamed (over the limit) is not
// retried. The next request on the connection is read after the kept body,
// never from it.
func TestRetryReplaysHeldBody(t *testing.T) {
	var resets atomic.Int64
	good := &bodyRecorder{}
	g := startGateway(t, `
loops: 1
limits: {request_buffer_bytes: 64}
upstreams:
  - name: backend
    nodes: ["%s", "%s"]
    outlier: {enabled: false}
routes:
  - {id: all, prefix: /, upstream: backend}
`, startRawUpstream(t, resetAfterHead(&resets)), startUpstream(t, good))
	c := g.client(t)
	// Round robin: each request tries the resetting node first (a retry
	// leaves the turn there).
	c.send("PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: 9\r\n\r\nfirst-put")
	if resp, body := readResponse(t, c.br, "PUT"); resp.StatusCode != 200 || string(body) != "good" {
		t.Fatalf("held PUT: %d %q, want the good node's 200", resp.StatusCode, body)
	}
	c.send("PUT /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\nchunk\r\n3\r\ned!\r\n0\r\n\r\n" +
		"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
	if resp, body := readResponse(t, c.br, "PUT"); resp.StatusCode != 200 || string(body) != "good" {
		t.Fatalf("held chunked PUT: %d %q", resp.StatusCode, body)
	}
	if resp, body := readResponse(t, c.br, "GET"); resp.StatusCode != 200 || string(body) != "good" {
		t.Fatalf("pipelined GET after a replayed body: %d %q", resp.StatusCode, body)
	}
	big := strings.Repeat("z", 100) // over request_buffer_bytes: it streams
	c.send("PUT /c HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + big)
	resp, body := readResponse(t, c.br, "PUT")
	expectError(t, resp, body, 502, 50202)
	want := []string{"PUT first-put", "PUT chunked!", "GET "}
	if got := good.got(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the good node got %q, want %q", got, want)
	}
	if resets.Load() != 4 {
		t.Fatalf("the resetting node saw %d requests, want 4", resets.Load())
	}
}

// A 503 is retried only when the route lists it, and a method outside
// retry.methods is not retried once its bytes reached a node.
func TestRetryOnStatus(t *testing.T) {
	var busy atomic.Int64
	unavailable := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		busy.Add(1)
		w.WriteHeader(503)
		io.WriteString(w, "busy")
	}))
	good := &countingHandler{name: "good"}
	g := startGateway(t, `
loops: 1
upstreams:
  - name: backend
    nodes: ["%s", "%s"]
    outlier: {enabled: false} # the failing node stays in rotation
routes:
  - id: listed
    prefix: /listed/
    upstream: backend
    retry: {on_status: [503], methods: [GET]}
  - id: unlisted
    prefix: /
    upstream: backend
`, unavailable, startUpstream(t, good))
	for i := range 4 {
		r := fetch(g.url(fmt.Sprintf("/listed/%d", i)))
		if r.err != nil || r.resp.StatusCode != 200 {
			t.Fatalf("GET /listed/%d: %v %v, want 200 from the other node", i, r.err, r.resp)
		}
	}
	got503 := 0
	for i := range 4 {
		if r := fetch(g.url(fmt.Sprintf("/other/%d", i))); r.err == nil && r.resp.StatusCode == 503 {
			got503++
		}
	}
	if got503 != 2 {
		t.Fatalf("unlisted route passed %d of 4 503s through, want 2", got503)
	}
	// A retried GET leaves the turn on the busy node, so the DELETE
	// after it goes there first.
	if r := fetch(g.url("/listed/again")); r.err != nil || r.resp.StatusCode != 200 {
		t.Fatalf("GET /listed/again: %v %v", r.err, r.resp)
	}
	before := busy.Load()
	req, _ := http.NewRequest("DELETE", g.url("/listed/x"), nil)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || busy.Load() != before+1 {
		t.Fatalf("DELETE outside retry.methods: status %d after %d busy answers, want the one 503 (not retried)", resp.StatusCode, busy.Load()-before)
	}
}
