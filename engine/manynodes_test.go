// Upstreams of more than 64 nodes, through real sockets: a node past the
// 64th that is down is out of rotation, and a retry leaves a node past the
// 64th it tried, like any other node.

package engine_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// manyNodes serves n nodes from one listener on loopback addresses across
// 127.0.0.0/8 and tells them apart by the address a connection came in on.
// Node i answers requests through h(i) and its health checks with 200,
// or 503 while sick(i).
type manyNodes struct {
	addrs  []string
	index  map[string]int
	served []atomic.Int64
}

func startManyNodes(t *testing.T, n int, sick func(i int) bool, h func(i int, w http.ResponseWriter)) *manyNodes {
	t.Helper()
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	m := &manyNodes{addrs: make([]string, n), index: map[string]int{}, served: make([]atomic.Int64, n)}
	for i := range m.addrs {
		m.addrs[i] = fmt.Sprintf("127.0.%d.%d:%d", i/250, 1+i%250, port)
		m.index[m.addrs[i]] = i
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := m.index[r.Context().Value(http.LocalAddrContextKey).(net.Addr).String()]
		if r.URL.Path == "/health" {
			if sick(i) {
				w.WriteHeader(503)
			}
			return
		}
		m.served[i].Add(1)
		h(i, w)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return m
}

func answerOK(int, http.ResponseWriter) {}

// Node 80 of 100 fails its health checks: round robin passes over it, and
// a full round of requests never reaches it.
func TestHealthDownPastThe64thNode(t *testing.T) {
	m := startManyNodes(t, 100, func(i int) bool { return i == 80 }, answerOK)
	g := startGateway(t, `
loops: 1
upstreams:
  - name: backend
    nodes: [%s]
    outlier: {enabled: false}
    health_check: {path: /health, interval: 100ms, stable_interval: 100ms, degraded_interval: 100ms, healthy_threshold: 1, unhealthy_threshold: 1}
routes:
  - {id: all, prefix: /, upstream: backend}
`, nodeList(m.addrs...))
	healthy(t, g, m.addrs[80], 0)
	c := g.client(t)
	for i := range 300 {
		if resp, body := c.get(fmt.Sprintf("/x/%d", i)); resp.StatusCode != 200 {
			t.Fatalf("GET %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if n := m.served[80].Load(); n != 0 {
		t.Fatalf("node 80, down, served %d of 300 requests", n)
	}
	if m.served[79].Load() == 0 || m.served[81].Load() == 0 {
		t.Fatal("nodes 79 and 81 served nothing: the requests did not go round")
	}
}

// Node 80 of 100 answers 503, and takes nearly every first attempt (weight
// 1000 against 1). The retry goes to another node: node 80 is in the
// tried set like a node of a small upstream.
func TestRetryPastThe64thNode(t *testing.T) {
	m := startManyNodes(t, 100, func(int) bool { return false }, func(i int, w http.ResponseWriter) {
		if i == 80 {
			w.WriteHeader(503)
		}
		io.WriteString(w, "node")
	})
	nodes := make([]string, len(m.addrs))
	for i, a := range m.addrs {
		nodes[i] = fmt.Sprintf("{addr: %q, weight: 1}", a)
	}
	nodes[80] = fmt.Sprintf("{addr: %q, weight: 1000}", m.addrs[80])
	g := startGateway(t, `
loops: 1
upstreams:
  - name: backend
    nodes: [%s]
    balancer: weighted_round_robin
    outlier: {enabled: false} # node 80 stays in rotation
routes:
  - id: all
    prefix: /
    upstream: backend
    retry: {attempts: 2, on_status: [503], methods: [GET]}
`, strings.Join(nodes, ", "))
	c := g.client(t)
	for i := range 20 {
		if resp, body := c.get(fmt.Sprintf("/x/%d", i)); resp.StatusCode != 200 {
			t.Fatalf("GET %d: %d %s: the retry went back to node 80", i, resp.StatusCode, body)
		}
	}
	if n := m.served[80].Load(); n < 10 {
		t.Fatalf("node 80 saw %d first attempts of 20, want most", n)
	}
}
