// Reload's guard against a config that empties the routes or upstreams,
// through the Go API the process's triggers call.

package engine_test

import (
	"strings"
	"testing"

	"github.com/loopgate/loopgate/engine"
)

// Reload refuses a config with no routes where the running one has some
// (a file cut short reads so); ReloadWith with AllowEmpty applies it, and
// from no routes, none again is no longer emptying anything.
func TestReloadRefusesToEmptyTheRoutes(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, oneRoute, up)
	cut := parseTestConfig(t, "upstreams:\n  - {name: backend, nodes: [\"%s\"]}\n", up)
	_, err := g.srv.Reload(cut)
	if err == nil || !strings.Contains(err.Error(), "removes every route (all)") || !strings.Contains(err.Error(), "still serving config v1") {
		t.Fatalf("reload to no routes: %v, want it refused naming the routes", err)
	}
	g.expectServing(t)
	if _, err := g.srv.Reload(parseTestConfig(t, "")); err == nil || !strings.Contains(err.Error(), "every route (all) and every upstream (backend)") {
		t.Fatalf("reload to nothing: %v, want it refused naming routes and upstreams", err)
	}
	line, err := g.srv.ReloadWith(cut, engine.ReloadOptions{AllowEmpty: true})
	if err != nil || !strings.Contains(line, "routes removed [all]") {
		t.Fatalf("ReloadWith AllowEmpty: %q, %v", line, err)
	}
	if r := fetch(g.url("/x")); r.err != nil {
		t.Fatal(r.err)
	} else if r.resp.StatusCode != 404 {
		t.Fatalf("after an allowed empty reload: %d, want 404", r.resp.StatusCode)
	}
	if _, err := g.srv.Reload(cut); err != nil {
		t.Fatalf("no routes before and after: %v", err)
	}
}
