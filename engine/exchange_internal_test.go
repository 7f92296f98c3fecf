package engine

import (
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

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
	for i := range srv.snap.Load().routes {
		srv.snap.Load().routes[i].chain = ch
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
