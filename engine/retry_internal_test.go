package engine

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
)

// endWatcher keeps the last exchange's End.
type endWatcher struct {
	filters.Base
	retries atomic.Int64
	node    atomic.Value
}

func (w *endWatcher) Request(*filters.Exchange) filters.Verdict { return filters.Continue }

func (w *endWatcher) Done(x *filters.Exchange) {
	w.retries.Store(int64(x.End.Retries))
	w.node.Store(x.End.Node)
}

// The Done phase (the access log) sees how many attempts were made and
// the node that answered.
func TestRetriesReachDonePhase(t *testing.T) {
	up := listen(t, func(w http.ResponseWriter, r *http.Request) {})
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\nupstreams:\n  - {name: b, nodes: [\"127.0.0.1:1\", \"%s\"]}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n", up)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &endWatcher{Base: filters.Base{FilterName: "watch", FilterOrder: 1}}
	ch, _ := filters.NewChain([]filters.Filter{w}, 1)
	srv.state.Load().snap.routes.at(0).chain = ch
	addr := ServeForTest(t, srv)
	resp, _, _ := exchangeRaw(t, addr, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d, want 200 from the second node", resp.StatusCode)
	}
	waitForInternal(t, func() bool { return w.node.Load() != nil })
	if w.retries.Load() != 1 || w.node.Load() != up {
		t.Fatalf("End.Retries %d, End.Node %v; want 1 and %s", w.retries.Load(), w.node.Load(), up)
	}
}

// A request answered before its call began (every node down) leaves the
// retry budget as it found it.
func TestRetryBudgetUntouchedWithoutCall(t *testing.T) {
	up := listen(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) })
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\nupstreams:\n  - {name: b, nodes: [\"%s\"], health_check: {path: /h, interval: 20ms, stable_interval: 20ms, degraded_interval: 20ms, unhealthy_threshold: 1}}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n", up)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := ServeForTest(t, srv)
	node := srv.state.Load().snap.upstreams[0].group.Nodes[0].Node
	waitForInternal(t, node.Down)
	resp, _, _ := exchangeRaw(t, addr, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("status %d, want 503 (50301)", resp.StatusCode)
	}
	b := srv.state.Load().snap.upstreams[0].budget
	waitForInternal(t, func() bool { return b.Totals().Requests == 0 })
	for range 5 {
		exchangeRaw(t, addr, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	}
	if n := b.Totals().Requests; n != 0 {
		t.Fatalf("requests in flight %d after answered requests, want 0", n)
	}
}
