// direct_node through a gateway: a request sent to the node it names, by a
// client the route allows, past the balancer but not past health; the node
// in the access log.

package engine_test

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestDirectNodeThroughGateway(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	nodes := make([]string, 3)
	for i := range nodes {
		name := string(rune('a' + i))
		nodes[i] = startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, name+" "+r.Header.Get("X-Node"))
		}))
	}
	dead := closedPort(t)
	g := startLoggingGateway(t, io.Discard, `
access_log: {path: %q}
upstreams:
  - {name: backend, nodes: ["%s", "%s", "%s", "%s"]}
routes:
  - id: debug
    prefix: /debug/
    upstream: backend
    retry: {attempts: 3}
    direct_node: {header: X-Node, allow_cidrs: ["127.0.0.1/32"]}
  - id: closed
    prefix: /closed/
    upstream: backend
    direct_node: {header: X-Node, allow_cidrs: ["10.0.0.0/8"]}
  - id: plain
    prefix: /plain/
    upstream: backend
`, path, nodes[0], nodes[1], nodes[2], dead)

	call := func(p, node string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", g.url(p), nil)
		if node != "" {
			req.Header.Set("X-Node", node)
		}
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(b)
	}

	// Every request naming node b reaches b, and the header stays behind.
	for i := 0; i < 12; i++ {
		if st, body := call("/debug/x", nodes[1]); st != 200 || body != "b " {
			t.Fatalf("directed to b: %d %q", st, body)
		}
	}
	// Without the header the balancer spreads the requests.
	seen := map[string]bool{}
	for i := 0; i < 12; i++ {
		if st, body := call("/debug/y", ""); st == 200 {
			seen[body] = true
		}
	}
	if len(seen) < 2 {
		t.Errorf("undirected requests reached only %v", seen)
	}

	st, body := call("/debug/x", "127.0.0.1:1")
	if st != 400 || !strings.Contains(body, `"code":40001`) {
		t.Errorf("unknown node: %d %s", st, body)
	}
	st, body = call("/closed/x", nodes[1])
	if st != 403 || !strings.Contains(body, `"code":40301`) {
		t.Errorf("client outside allow_cidrs: %d %s", st, body)
	}
	// A route without direct_node ignores the header (and forwards it).
	if st, body = call("/plain/x", nodes[1]); st != 200 || body[2:] != nodes[1] {
		t.Errorf("route without direct_node: %d %q", st, body)
	}
	// The directed node is down: its failure is the answer, with no retry
	// on another node.
	st, body = call("/debug/dead", dead)
	if st != 502 || !strings.Contains(body, `"code":50201`) {
		t.Errorf("directed to a dead node: %d %s", st, body)
	}

	// Delivered byte by byte, the header still directs.
	c := g.dial(t)
	head := "GET /debug/bytewise HTTP/1.1\r\nHost: x\r\nX-Node: " + nodes[2] + "\r\n\r\n"
	for i := 0; i < len(head); i++ {
		if _, err := io.WriteString(c, head[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	resp, b := readResponse(t, bufio.NewReader(c), "GET")
	if resp.StatusCode != 200 || string(b) != "c " {
		t.Errorf("byte by byte: %d %q", resp.StatusCode, b)
	}

	lines := waitLines(t, "access", 29, func() []byte { bb, _ := os.ReadFile(path); return bb })
	if l := byPath(t, lines, "/debug/bytewise"); l["upstream"] != nodes[2] || l["request_id"] == "" {
		t.Errorf("access line of a directed request: %v", l)
	}
	if l := byPath(t, lines, "/debug/dead"); l["upstream"] != dead || l["retries"] != 0.0 {
		t.Errorf("access line of a request directed to a dead node: %v", l)
	}
}

// A node out of rotation (failing its health checks) is not called for a
// request that names it: 503, code 50301, as when every node is down.
func TestDirectNodeRespectsHealth(t *testing.T) {
	nodes := []*checkedNode{{}, {}, {}}
	addrs := []string{startUpstream(t, nodes[0]), startUpstream(t, nodes[1]), startUpstream(t, nodes[2])}
	g := startGateway(t, `
upstreams:
  - name: backend
    nodes: [%s]
    outlier: {enabled: false}
    health_check: {path: /health, interval: 50ms, stable_interval: 50ms, degraded_interval: 50ms, healthy_threshold: 1, unhealthy_threshold: 1}
routes:
  - {id: all, prefix: /, upstream: backend, direct_node: {allow_cidrs: ["127.0.0.0/8"]}}
`, nodeList(addrs...))
	nodes[2].sick.Store(true)
	healthy(t, g, addrs[2], 0)
	req, _ := http.NewRequest("GET", g.url("/x"), nil)
	req.Header.Set("X-Loopgate-Node", addrs[2]) // the default header
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	expectError(t, resp, body, 503, 50301)
	if n := nodes[2].served.Load(); n != 0 {
		t.Errorf("the unhealthy node served %d requests", n)
	}
	req.Header.Set("X-Loopgate-Node", addrs[1])
	if resp, err = testClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("directed to a healthy node: %v %v", err, resp)
	}
	resp.Body.Close()
	if nodes[1].served.Load() != 1 {
		t.Errorf("node 1 served %d, want 1", nodes[1].served.Load())
	}
}

// A directed request skips the balancer only: the route's rate limit
// counts it and refuses it past the burst (429, code 42902), and the
// route's breaker, opened by directed requests to a dead node, refuses a
// directed request to a live one (503, code 55301) without calling it.
func TestDirectNodeKeepsLimitsAndBreaker(t *testing.T) {
	var served atomic.Int64
	live := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		io.WriteString(w, "ok")
	}))
	dead := closedPort(t)
	g := startGateway(t, `
upstreams:
  - {name: backend, nodes: ["%s", "%s"], outlier: {enabled: false}}
routes:
  - id: limited
    prefix: /limited/
    upstream: backend
    rate_limits: [{key: route, rate: 0.001, burst: 2}]
    direct_node: {allow_cidrs: ["127.0.0.1/32"]}
  - id: broken
    prefix: /broken/
    upstream: backend
    retry: {attempts: 1}
    circuit_breaker: {window: 2, min_calls: 2, open_for: 1h, half_open_calls: 1}
    direct_node: {allow_cidrs: ["127.0.0.1/32"]}
`, live, dead)
	call := func(p, node string) (*http.Response, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", g.url(p), nil)
		req.Header.Set("X-Loopgate-Node", node)
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, b
	}
	for i := range 2 {
		if resp, b := call("/limited/x", live); resp.StatusCode != 200 {
			t.Fatalf("directed request %d within the burst: %d %s", i, resp.StatusCode, b)
		}
	}
	resp, b := call("/limited/x", live)
	expectError(t, resp, b, 429, 42902)

	for range 2 {
		if resp, b := call("/broken/x", dead); resp.StatusCode != 502 {
			t.Fatalf("directed to the dead node: %d %s", resp.StatusCode, b)
		}
	}
	before := served.Load()
	resp, b = call("/broken/x", live)
	expectError(t, resp, b, 503, 55301)
	if n := served.Load() - before; n != 0 {
		t.Errorf("the open breaker let %d directed requests through", n)
	}
}
