package engine

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/pool/loopstat"
)

// A config spliced from the running one (config.WithRoutes) compiles, by
// keeping the running snapshot's routes it shares, to what the whole
// config compiles to: each route's id, upstream, filters, limits and
// policies, the table's match for every route, and the durable state
// (metrics, breakers) the same objects. Kept routes keep their chain.
func TestCompileKeepsSharedRoutes(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	const head = "listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 2\nupstreams:\n  - {name: a, nodes: [\"127.0.0.1:9\"]}\n  - {name: b, nodes: [\"127.0.0.1:10\"]}\nroutes:\n"
	line := func(id string) string {
		extra := []string{"", ", rate_limits: [{key: ip, rate: 5, burst: 5}]", ", limits: {max_body_bytes: 512}",
			", circuit_breaker: {enabled: true, window: 20}", ", response_timeout: 4s"}[rng.Intn(5)]
		return fmt.Sprintf("  - {id: %s, path: /%s/%d, upstream: %s%s}\n", id, id, rng.Intn(1000), []string{"a", "b"}[rng.Intn(2)], extra)
	}
	var ids []string
	lines := map[string]string{}
	for i := 0; i < 2*routeChunk+30; i++ { // three chunks of compiled routes
		id := fmt.Sprintf("r%d", i)
		ids, lines[id] = append(ids, id), line(id)
	}
	text := func(only []string) string {
		var b strings.Builder
		b.WriteString(head)
		for _, id := range only {
			b.WriteString(lines[id])
		}
		return b.String()
	}
	parse := func(s string) *config.Config {
		cfg, err := config.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	srv, err := New(parse(text(ids)))
	if err != nil {
		t.Fatal(err)
	}
	for step := 0; step < 60; step++ {
		var changed []string
		// The chunks of compiled routes before the one the edit is in
		// stay the running version's, and for a change in place, those
		// after it too.
		wantShared, deleted := 0, false
		switch rng.Intn(3) {
		case 0:
			wantShared = len(ids) / routeChunk
			id := fmt.Sprintf("n%d", step)
			ids, lines[id] = append(ids, id), line(id)
			changed = append(changed, id)
		case 1:
			k := rng.Intn(len(ids))
			wantShared, deleted = k/routeChunk, true
			ids = append(ids[:k:k], ids[k+1:]...)
		default:
			wantShared = (len(ids)+routeChunk-1)/routeChunk - 1
			id := ids[rng.Intn(len(ids))]
			lines[id] = line(id)
			changed = append(changed, id)
		}
		running := srv.state.Load()
		spliced, err := running.cfg.WithRoutes(slicesClone(ids), parse(text(changed)))
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		c, err := srv.Compile(spliced)
		if err != nil {
			t.Fatal(err)
		}
		whole, err := compile(parse(text(ids)), len(srv.loops), &srv.durable, nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		got := c.snap
		if deleted && len(got.table.Gone()) > 0 {
			// The router left the deleted route's slot empty: so does the
			// list, and every chunk but that slot's is kept.
			wantShared = len(got.routes.chunks) - 1
		}
		shared := 0
		for k, chunk := range got.routes.chunks {
			if k < len(running.snap.routes.chunks) && &chunk[0] == &running.snap.routes.chunks[k][0] {
				shared++
			}
		}
		if shared < wantShared {
			t.Fatalf("step %d: %d chunks of %d kept from the running version, want %d", step, shared, len(got.routes.chunks), wantShared)
		}
		if got.routes.count() != whole.routes.count() || got.table.Len() != whole.table.Len() ||
			got.routes.len() != got.table.Slots() || got.routes.len()-got.routes.count() != len(got.table.Gone()) {
			t.Fatalf("step %d: %d routes in %d slots, want %d (%d removed)", step, got.routes.count(), got.routes.len(),
				whole.routes.count(), len(got.table.Gone()))
		}
		prevChains := map[string]any{}
		for i := range running.snap.routes.len() {
			prevChains[running.snap.routes.at(i).id] = running.snap.routes.at(i).chain
		}
		for i := range whole.routes.len() {
			slot := got.table.SlotOf(i)
			g, w := got.routes.at(slot), whole.routes.at(i)
			if g.id != w.id || got.upstreams[g.upstream].name != whole.upstreams[w.upstream].name ||
				g.maxBody != w.maxBody || g.connectTimeout != w.connectTimeout || g.responseTimeout != w.responseTimeout ||
				!reflect.DeepEqual(g.retry, w.retry) || g.breaker != w.breaker || !reflect.DeepEqual(g.breakerCfg, w.breakerCfg) ||
				!reflect.DeepEqual(g.isolationCfg, w.isolationCfg) ||
				g.metrics != w.metrics || chainNames(g) != chainNames(w) {
				t.Fatalf("step %d: route %d: %+v, want %+v", step, i, *g, *w)
			}
			kept := !contains(changed, g.id)
			if pc, ok := prevChains[g.id]; ok && kept && g.chain != nil && any(g.chain) != pc {
				t.Fatalf("step %d: route %s kept but its chain rebuilt", step, g.id)
			}
			_, path, _ := strings.Cut(lines[g.id], "path: ")
			path, _, _ = strings.Cut(path, ",")
			if r := got.table.Match(nil, []byte("GET"), []byte(path), nil); r.Index != slot {
				t.Fatalf("step %d: %s matches slot %d, want %d", step, path, r.Index, slot)
			}
		}
		if _, err := srv.Apply(c); err != nil {
			t.Fatal(err)
		}
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func chainNames(r *route) string {
	if r.chain == nil {
		return ""
	}
	var names []string
	for i := 0; i < r.chain.Len(); i++ {
		names = append(names, r.chain.Filter(i).Name())
	}
	return strings.Join(names, ",")
}

// A reload (ReloadWith) of a config spliced from the running one builds
// the filters' shared objects again (the auth verifier, which reads key
// files) and the routes whose chains use them, and keeps every other
// route's compiled state; an API write's compile (Compile) keeps them all.
func TestReloadRebuildsPreparedRoutes(t *testing.T) {
	const head = "listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\nauth:\n  jwt: {hs256_secret: 0123456789abcdef0123456789abcdef}\n" +
		"upstreams:\n  - {name: a, nodes: [\"127.0.0.1:9\"]}\nroutes:\n"
	const guarded, open = "  - {id: guarded, prefix: /g/, upstream: a, auth: required}\n", "  - {id: open, prefix: /o/, upstream: a}\n"
	parse := func(s string) *config.Config {
		cfg, err := config.Parse([]byte(head + s))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	srv, err := New(parse(guarded + open))
	if err != nil {
		t.Fatal(err)
	}
	routes := func() (guarded, open *route, shared any) {
		st := srv.state.Load()
		return st.snap.routes.at(0), st.snap.routes.at(1), st.snap.shared["auth"]
	}
	g0, o0, v0 := routes()
	if !g0.prepared || o0.prepared || v0 == nil {
		t.Fatalf("prepared: guarded %v, open %v; verifier %v", g0.prepared, o0.prepared, v0)
	}
	added := "  - {id: added, prefix: /n/, upstream: a}\n"
	spliced, err := srv.state.Load().cfg.WithRoutes([]string{"guarded", "open", "added"}, parse(added))
	if err != nil {
		t.Fatal(err)
	}
	c, err := srv.Compile(spliced)
	if err != nil {
		t.Fatal(err)
	}
	if c.snap.routes.at(0).chain != g0.chain || c.snap.routes.at(1).chain != o0.chain || c.snap.shared["auth"] != v0 {
		t.Fatal("an API write's compile rebuilt what the running version shares")
	}
	if _, err := srv.ReloadWith(spliced, ReloadOptions{}); err != nil {
		t.Fatal(err)
	}
	g1, o1, v1 := routes()
	if v1 == v0 || g1.chain == g0.chain {
		t.Fatal("a reload kept the verifier, or the chain built on it")
	}
	if o1.chain != o0.chain || o1.metrics != o0.metrics || g1.metrics != g0.metrics {
		t.Fatal("a reload rebuilt a route that uses no shared object, or a route's metrics")
	}
}

// A route that only moved to another path or host (config.RouteTwins)
// keeps its compiled state, as a shared one does; one whose upstream,
// filters or limits changed is built again.
func TestCompileKeepsMovedRoutes(t *testing.T) {
	const head = "listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\nupstreams:\n" +
		"  - {name: a, nodes: [\"127.0.0.1:9\"]}\n  - {name: b, nodes: [\"127.0.0.1:10\"]}\nroutes:\n"
	parse := func(s string) *config.Config {
		cfg, err := config.Parse([]byte(head + s))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	srv, err := New(parse("  - {id: r, path: /a, upstream: a, limits: {max_body_bytes: 512}}\n  - {id: s, path: /s, upstream: a}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		line string
		kept bool
	}{
		{"  - {id: r, path: /b, upstream: a, limits: {max_body_bytes: 512}}\n", true},
		{"  - {id: r, prefix: /c/, host: x.example.com, upstream: a, limits: {max_body_bytes: 512}}\n", true},
		{"  - {id: r, path: /b, upstream: b, limits: {max_body_bytes: 512}}\n", false},
		{"  - {id: r, path: /b, upstream: b, limits: {max_body_bytes: 256}}\n", false},
		{"  - {id: r, path: /b, upstream: b, limits: {max_body_bytes: 256}, disable_filters: [forwarded]}\n", false},
		{"  - {id: r, path: /b, upstream: b, limits: {max_body_bytes: 256}, disable_filters: [forwarded], response_timeout: 2s}\n", false},
	} {
		before := *srv.state.Load().snap.routes.at(0)
		spliced, err := srv.state.Load().cfg.WithRoutes([]string{"r", "s"}, parse(tc.line))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := srv.Apply(mustCompile(t, srv, spliced)); err != nil {
			t.Fatal(err)
		}
		after := *srv.state.Load().snap.routes.at(0)
		if kept := after.chain == before.chain; kept != tc.kept {
			t.Fatalf("%s: chain kept %v, want %v", tc.line, kept, tc.kept)
		}
		whole, err := compile(parse(tc.line+"  - {id: s, path: /s, upstream: a}\n"), 1, &srv.durable, nil, nil, false)
		if err != nil {
			t.Fatal(err)
		}
		w := whole.routes.at(0)
		if srv.state.Load().snap.upstreams[after.upstream].name != whole.upstreams[w.upstream].name || after.maxBody != w.maxBody || after.responseTimeout != w.responseTimeout ||
			chainNames(&after) != chainNames(w) || after.metrics != w.metrics {
			t.Fatalf("%s: route %+v, want %+v", tc.line, after, *w)
		}
	}
}

func mustCompile(t *testing.T, srv *Server, cfg *config.Config) *Compiled {
	t.Helper()
	c, err := srv.Compile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A write that keeps a route's chunk of compiled routes still starts the
// route's isolation cold start over (docs/resilience.md: no window shrinks
// a limit before cold_start calls after a start or a reload): a slow
// window judged by the first call after the write keeps the limit.
func TestApplyRestartsKeptRoutesColdStart(t *testing.T) {
	const head = "listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\n" +
		"isolation: {limit: 12, floor: 2, step: 5, slow_call: 100ms, window: 100ms, min_samples: 5, slow_ratio: 30, cold_start: 5}\n" +
		"upstreams:\n  - {name: a, nodes: [\"127.0.0.1:9\"]}\nroutes:\n"
	n := routeChunk + 10
	var all strings.Builder
	all.WriteString(head)
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprint("r", i)
		fmt.Fprintf(&all, "  - {id: r%d, path: /r%d, upstream: a}\n", i, i)
	}
	cfg, err := config.Parse([]byte(all.String()))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	running := srv.state.Load()
	rt := running.snap.routes.at(0)
	iso := rt.limiter()
	s := rt.isolationCfg
	now := loopstat.Now()
	for range 5 { // past the cold start, then a slow half window
		iso.Release(s, 0, now)
	}
	for range 5 {
		iso.Release(s, int64(time.Second), now)
	}
	changed, err := config.Parse([]byte(head + fmt.Sprintf("  - {id: r%d, path: /moved, upstream: a}\n", n-1)))
	if err != nil {
		t.Fatal(err)
	}
	spliced, err := running.cfg.WithRoutes(ids, changed)
	if err != nil {
		t.Fatal(err)
	}
	c, err := srv.Compile(spliced)
	if err != nil {
		t.Fatal(err)
	}
	if &c.snap.routes.chunks[0][0] != &running.snap.routes.chunks[0][0] {
		t.Fatal("the write built r0's chunk again: the test needs it kept")
	}
	if _, err := srv.Apply(c); err != nil {
		t.Fatal(err)
	}
	iso.Release(s, int64(time.Second), now+int64(time.Second)) // ends the slow window: 6 of 11 slow
	if l := iso.State(s).Limit; l != 12 {
		t.Fatalf("limit %d after a slow window within the write's cold start, want 12", l)
	}
}
