package engine

import (
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
)

// reqWatcher records, in its response phase, whether the request view was
// still reachable: it must not be, since the bytes it viewed are released
// or reused by then.
type reqWatcher struct {
	filters.Base
	sawReq, responses atomic.Int64
}

func (w *reqWatcher) Request(*filters.Exchange) filters.Verdict { return filters.Continue }

func (w *reqWatcher) Response(x *filters.Exchange) {
	w.responses.Add(1)
	if x.Req != nil {
		w.sawReq.Add(1)
	}
}

func (w *reqWatcher) HasResponseHook() bool { return true }

func TestResponsePhaseHasNoStaleRequestView(t *testing.T) {
	up := listen(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\nupstreams:\n  - {name: b, nodes: [\"%s\"]}\n  - {name: dead, nodes: [\"127.0.0.1:1\"]}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n  - {id: d, prefix: /dead/, upstream: dead}\n", up)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := &reqWatcher{Base: filters.Base{FilterName: "watch", FilterOrder: 1}}
	ch, _ := filters.NewChain([]filters.Filter{w}, 1)
	for i := range srv.state.Load().snap.routes.len() {
		srv.state.Load().snap.routes.at(i).chain = ch
	}
	addr := ServeForTest(t, srv)
	// A proxied response and a gateway error (502 from a dead node).
	for _, path := range []string{"/x", "/dead/x"} {
		resp, _, _ := exchangeRaw(t, addr, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n")
		resp.Body.Close()
	}
	if w.responses.Load() != 2 || w.sawReq.Load() != 0 {
		t.Fatalf("%d response phases, %d saw a request view; want 2 and 0", w.responses.Load(), w.sawReq.Load())
	}
}

// lifecycleCounter takes a "permit" in its request phase and gives it back
// in Done, counting the reasons exchanges ended for.
type lifecycleCounter struct {
	filters.Base
	requests, dones, held atomic.Int64
	reasons               [7]atomic.Int64
	bytesOut              atomic.Int64
}

func (c *lifecycleCounter) Request(*filters.Exchange) filters.Verdict {
	c.requests.Add(1)
	c.held.Add(1)
	return filters.Continue
}

func (c *lifecycleCounter) Done(x *filters.Exchange) {
	c.dones.Add(1)
	c.held.Add(-1)
	c.reasons[x.End.Reason].Add(1)
	c.bytesOut.Add(x.End.BytesOut)
}

// Done runs exactly once for every exchange whose request phase began,
// whichever way it ended: served, upstream failure, or the client leaving
// before or during the response. Permits taken and given back balance.
func TestDonePhaseBalancesUnderClientAborts(t *testing.T) {
	slow := make(chan struct{})
	up := listen(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			select {
			case <-slow:
			case <-r.Context().Done():
			}
		}
		io.WriteString(w, strings.Repeat("x", 1000))
	})
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 2\nupstreams:\n  - {name: b, nodes: [\"%s\"]}\n  - {name: dead, nodes: [\"127.0.0.1:1\"]}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n  - {id: d, prefix: /dead/, upstream: dead}\n", up)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	counter := &lifecycleCounter{Base: filters.Base{FilterName: "count", FilterOrder: 1}}
	ch, _ := filters.NewChain([]filters.Filter{counter}, 2)
	for i := range srv.state.Load().snap.routes.len() {
		srv.state.Load().snap.routes.at(i).chain = ch
	}
	addr := ServeForTest(t, srv)

	rng := rand.New(rand.NewSource(7))
	const n = 120
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		path := [...]string{"/fast", "/slow", "/dead/x"}[rng.Intn(3)]
		abort := rng.Intn(3) // 0: read it all, 1: leave at once, 2: leave after the first bytes
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dialRaw(t, addr)
			io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
			switch {
			case abort == 1 || path == "/slow":
				c.Close() // a /slow request is only ever left
			case abort == 2:
				c.Read(make([]byte, 10))
				c.Close()
			default:
				io.ReadAll(c)
			}
		}()
	}
	wg.Wait()
	close(slow)
	waitForInternal(t, func() bool { return srv.Clients() == 0 && counter.dones.Load() == counter.requests.Load() })
	if r, d, h := counter.requests.Load(), counter.dones.Load(), counter.held.Load(); r != n || d != n || h != 0 {
		t.Fatalf("requests %d, dones %d, permits still held %d; want %d, %d, 0", r, d, h, n, n)
	}
	for _, reason := range []filters.EndReason{filters.EndServed, filters.EndUpstreamFailed, filters.EndClientGone} {
		if counter.reasons[reason].Load() == 0 {
			t.Errorf("no exchange ended as %s: %v", reason, &counter.reasons)
		}
	}
	if counter.bytesOut.Load() == 0 {
		t.Error("Done never saw bytes out")
	}
}

// waitForInternal polls cond for up to 30 s: it waits for the loops to
// finish exchanges the test cannot be told about.
func waitForInternal(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting for every exchange to end")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestExchangeHotFieldsFirst keeps what every proxied request reads and
// writes in the exchange's first eight cache lines, ahead of the call, the
// park, the saved head, the sub-request and the filters' exchange: a
// field added at the top, or a group grown, moves the others out.
func TestExchangeHotFieldsFirst(t *testing.T) {
	var ex exchange
	body := unsafe.Offsetof(ex.body)
	hot := []struct {
		name string
		end  uintptr
	}{
		{"head", unsafe.Offsetof(ex.head) + unsafe.Sizeof(ex.head)},
		{"resp", unsafe.Offsetof(ex.resp) + unsafe.Sizeof(ex.resp)},
		{"end", unsafe.Offsetof(ex.end) + unsafe.Sizeof(ex.end)},
		{"retry.budgetLim", unsafe.Offsetof(ex.retry) + unsafe.Offsetof(ex.retry.budgetLim) + unsafe.Sizeof(ex.retry.budgetLim)},
		{"policy.next", unsafe.Offsetof(ex.policy) + unsafe.Offsetof(ex.policy.next) + unsafe.Sizeof(ex.policy.next)},
		{"log", unsafe.Offsetof(ex.log) + unsafe.Sizeof(ex.log)},
		{"body.remaining", body + unsafe.Offsetof(ex.body.remaining) + unsafe.Sizeof(ex.body.remaining)},
	}
	for _, f := range hot {
		if f.end > 8*64 {
			t.Errorf("exchange.%s ends at byte %d, past the first 8 cache lines", f.name, f.end)
		}
	}
	if c := unsafe.Offsetof(ex.call); c < body {
		t.Errorf("the upstream call (at %d) comes before the body group (at %d)", c, body)
	}
}
