// The quick way of a routes-only write (parseChange's splice) against the
// whole parse, over random edits.

package admin

import (
	"fmt"
	"math/rand"
	"path/filepath"
	"reflect"
	"testing"
	"unsafe"

	"github.com/loopgate/loopgate/engine"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/confstore"
)

const spliceBase = `listen: 127.0.0.1:0
upstreams:
  - {name: a, nodes: ["127.0.0.1:9"], connect_timeout: 2s}
  - {name: b, nodes: ["127.0.0.1:10", "127.0.0.1:11"]}
routes:
`

// randomRoute is a route the config accepts, mostly, and sometimes one it
// refuses: an unknown upstream, a path another route has, a bad filter
// value.
func randomRoute(rng *rand.Rand, id string, n int) map[string]any {
	r := map[string]any{"id": id, "path": fmt.Sprintf("/p%d/%d", rng.Intn(n*2), rng.Intn(3)), "upstream": []string{"a", "b"}[rng.Intn(2)]}
	switch rng.Intn(12) {
	case 0:
		r["upstream"] = "nosuch"
	case 1:
		r["rate_limits"] = []any{map[string]any{"key": "ip", "rate": 5, "burst": 5}}
	case 2:
		r["limits"] = map[string]any{"max_body_bytes": 1024}
	case 3:
		r["response_timeout"] = "3s"
	case 4:
		r["limits"] = map[string]any{"max_body_bytes": -1}
	case 5:
		r["methods"] = []any{"GET", "POST"}
		r["prefix"], r["path"] = fmt.Sprintf("/pre%d/", rng.Intn(n)), nil
		delete(r, "path")
	case 6:
		r["host"] = []string{"example.com", "a.example.com:8080", "bad host"}[rng.Intn(3)]
	case 7:
		r["escaped_slashes"] = []string{"keep", "reject", "sometimes"}[rng.Intn(3)]
	case 8:
		r["filters"] = []any{[]string{"request_id", "nosuch", "cors"}[rng.Intn(3)]}
	case 9:
		r["disable_filters"] = []any{"forwarded"}
		r["methods"] = []any{}
	case 10:
		r["path"] = []any{"/p/*/x", "/p/**", "p", 12.0}[rng.Intn(4)]
	}
	return r
}

// parseModes are the two ways a splice parses the changed routes: all of
// them written into the document for the YAML decoder, and the plain ones
// handed to config.ParseWithRoutes as they are.
var parseModes = []struct {
	name string
	opts ControlOptions
}{
	{"yaml", ControlOptions{Parse: config.Parse}},
	{"plain", ControlOptions{Parse: config.Parse, ParseWithRoutes: config.ParseWithRoutes}},
}

func TestSpliceMatchesWholeParse(t *testing.T) {
	for _, mode := range parseModes {
		t.Run(mode.name, func(t *testing.T) { testSpliceMatchesWholeParse(t, mode.opts) })
	}
}

func testSpliceMatchesWholeParse(t *testing.T, opts ControlOptions) {
	rng := rand.New(rand.NewSource(1))
	const n = 40
	var b []byte
	b = append(b, spliceBase...)
	for i := 0; i < n; i++ {
		b = fmt.Appendf(b, "  - {id: r%d, path: /r%d, upstream: %s}\n", i, i, []string{"a", "b"}[i%2])
	}
	c, _, err := NewControl(opts, b)
	if err != nil {
		t.Fatal(err)
	}
	spliced, refused := 0, 0
	for step := 0; step < 400; step++ {
		next := confstore.Copy(c.cur)
		routes, _ := next[confstore.Routes].([]any)
		switch k := rng.Intn(10); {
		case k < 2 || len(routes) == 0: // add
			id := fmt.Sprintf("new%d", step)
			confstore.Set(next, confstore.Routes, id, randomRoute(rng, id, n))
		case k < 3: // delete, the last route half the time (the router table is edited then)
			at := rng.Intn(len(routes))
			if rng.Intn(2) == 0 {
				at = len(routes) - 1
			}
			id := routes[at].(map[string]any)["id"].(string)
			confstore.Set(next, confstore.Routes, id, nil)
		case k < 4: // two routes at once
			for j := 0; j < 2; j++ {
				id := routes[rng.Intn(len(routes))].(map[string]any)["id"].(string)
				confstore.Set(next, confstore.Routes, id, randomRoute(rng, id, n))
			}
		case k < 5: // an upstream's nodes: not routes alone, parsed whole
			nodes := []any{fmt.Sprintf("127.0.0.1:%d", 20+rng.Intn(5))}
			confstore.Set(next, confstore.Upstreams, "b", map[string]any{"name": "b", "nodes": nodes})
		default: // replace
			id := routes[rng.Intn(len(routes))].(map[string]any)["id"].(string)
			confstore.Set(next, confstore.Routes, id, randomRoute(rng, id, n))
		}
		diff := confstore.Diff(c.cur, next)
		if len(diff) == 0 {
			continue
		}
		whole, wholeErr := c.parseWhole(next)
		got, gotErr := c.parseChange(next, diff)
		if fmt.Sprint(wholeErr) != fmt.Sprint(gotErr) {
			t.Fatalf("step %d: whole parse: %v; parseChange: %v", step, wholeErr, gotErr)
		}
		if wholeErr != nil {
			refused++
			continue
		}
		if !sameConfig(t, whole, got) {
			t.Fatalf("step %d: parseChange's config differs from the whole parse's (%v)", step, diff)
		}
		if c.spliceRoutes(next, diff) != nil {
			spliced++
		}
		c.cur, c.cfg = next, got
	}
	// The edits must have exercised both ways, and refusals.
	if spliced < 100 || refused < 20 {
		t.Fatalf("spliced %d, refused %d of 400 edits", spliced, refused)
	}
	t.Logf("spliced %d, refused %d", spliced, refused)
}

// sameConfig reports whether a and b are equal configs: equal in every
// field, the router table aside, and with tables that route every probe
// alike. A table an API write edited (router.Table.With) routes as the
// whole parse's does, but it may number its slots otherwise.
func sameConfig(t *testing.T, a, b *config.Config) bool {
	ta, erra := a.RouterTable()
	tb, errb := b.RouterTable()
	if erra != nil || errb != nil {
		t.Fatalf("router tables: %v, %v", erra, errb)
	}
	if !reflect.DeepEqual(withoutTable(a), withoutTable(b)) {
		return false
	}
	scratch := make([]byte, 0, 256)
	for _, r := range a.Routes {
		for _, p := range []string{r.Path, r.Prefix, r.Prefix + "x", r.Prefix + "/x", r.Path + "/x"} {
			for _, host := range []string{"", r.Host, "example.com", "other.test"} {
				for _, method := range []string{"GET", "HEAD", "POST", "PUT"} {
					if p == "" {
						continue
					}
					x := ta.MatchIndex([]byte(host), []byte(method), []byte(p), scratch)
					y := tb.MatchIndex([]byte(host), []byte(method), []byte(p), scratch)
					if x != y {
						t.Logf("%s %s host %q: %+v against %+v", method, p, host, x, y)
						return false
					}
				}
			}
		}
	}
	return true
}

// withoutTable is a copy of c with its unexported router table nil.
func withoutTable(c *config.Config) config.Config {
	out := *c
	f := reflect.ValueOf(&out).Elem().FieldByName("table")
	reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().SetZero()
	return out
}

// A write's config shares the *config.Route values of the routes it keeps
// with the config before it (config.WithRoutes), so nothing may modify a
// route once parsed: after random writes through the Control and a real
// engine (parse, splice, compile, apply), every config that ran before
// still equals the whole parse of its own document.
func TestWritesLeaveEarlierConfigsRoutes(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	const n = 40
	b := []byte(spliceBase)
	for i := 0; i < n; i++ {
		b = fmt.Appendf(b, "  - {id: r%d, path: /r%d, upstream: %s}\n", i, i, []string{"a", "b"}[i%2])
	}
	c, cfg, err := NewControl(ControlOptions{Parse: config.Parse, ParseWithRoutes: config.ParseWithRoutes,
		StatePath: filepath.Join(t.TempDir(), "state.json")}, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Flush)
	srv, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Bind(serverEngine{srv}, nil)
	type ran struct {
		cfg   *config.Config
		whole *config.Config // its document parsed whole, after the write
	}
	var earlier []ran
	shared := 0
	for step := 0; step < 150; step++ {
		old := c.cfg
		whole, err := c.parseWhole(c.cur)
		if err != nil {
			t.Fatal(err)
		}
		earlier = append(earlier, ran{old, whole})
		routes, _ := c.cur[confstore.Routes].([]any)
		id := fmt.Sprintf("new%d", step)
		if rng.Intn(3) > 0 && len(routes) > 0 {
			id = routes[rng.Intn(len(routes))].(map[string]any)["id"].(string)
		}
		var v any = randomRoute(rng, id, n)
		if rng.Intn(6) == 0 {
			v = nil // a delete
		}
		if _, err := c.change(writer{action: "PUT /config/routes/" + id}, func(d confstore.Doc) error {
			confstore.Set(d, confstore.Routes, id, v)
			return nil
		}); err != nil {
			continue // refused: randomRoute makes some bad routes
		}
		if old != c.cfg && len(old.Routes) > 1 && len(c.cfg.Routes) > 1 && old.Routes[1] == c.cfg.Routes[1] {
			shared++
		}
	}
	if shared < 50 {
		t.Fatalf("only %d writes shared their routes with the config before: the test checks nothing", shared)
	}
	for i, r := range earlier {
		if !reflect.DeepEqual(withoutTable(r.cfg), withoutTable(r.whole)) {
			t.Fatalf("the config before write %d changed after later writes: %s", i, firstRouteDiff(r.cfg, r.whole))
		}
	}
}

// firstRouteDiff names the first route a and b differ in.
func firstRouteDiff(a, b *config.Config) string {
	for i := range min(len(a.Routes), len(b.Routes)) {
		if !reflect.DeepEqual(a.Routes[i], b.Routes[i]) {
			return fmt.Sprintf("route %d: %+v, want %+v", i, *a.Routes[i], *b.Routes[i])
		}
	}
	return fmt.Sprintf("%d routes, want %d, or the settings", len(a.Routes), len(b.Routes))
}
