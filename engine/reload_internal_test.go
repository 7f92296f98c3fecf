package engine

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/config"
)

// A replaced config version is released once no request runs on it:
// neither the loops nor the exchanges waiting in their free lists keep it.
func TestReloadReleasesOldVersions(t *testing.T) {
	up := listen(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	text := fmt.Sprintf("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 2\nupstreams:\n  - {name: b, nodes: [\"%s\"]}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n", up)
	parse := func() *config.Config {
		cfg, err := config.Parse([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	srv, err := New(parse())
	if err != nil {
		t.Fatal(err)
	}
	addr := ServeForTest(t, srv)
	const versions = 5
	var released atomic.Int64
	for i := 0; i < versions; i++ {
		resp, _, _ := exchangeRaw(t, addr, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
		resp.Body.Close()
		// The routes of the version the request ran on: what an exchange
		// holds on to through its route.
		runtime.SetFinalizer(srv.state.Load().snap.routes.at(0), func(*route) { released.Add(1) })
		if _, err := srv.Reload(parse()); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for released.Load() < versions {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d replaced versions released", released.Load(), versions)
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
}
