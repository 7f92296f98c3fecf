// Test helpers: configs parsed by engine/config, filters compiled through
// the registry against a Store, and exchanges with a fake engine to park
// them.

package limiter_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/ratelimit/limiter"
	"github.com/loopgate/loopgate/pool/pooltest"
)

func TestMain(m *testing.M) { pooltest.Main(m) }

// parse parses a config of routes (and top-level keys) with one upstream
// named backend.
func parse(t testing.TB, yaml string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\nupstreams: [{name: backend, nodes: [\"127.0.0.1:1\"]}]\n" + yaml))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// parseErr parses a config that must be refused and returns the error.
func parseErr(t *testing.T, yaml string) string {
	t.Helper()
	_, err := config.Parse([]byte("listen: 127.0.0.1:0\nupstreams: [{name: backend, nodes: [\"127.0.0.1:1\"]}]\n" + yaml))
	if err == nil {
		t.Fatalf("config accepted:\n%s", yaml)
	}
	return err.Error()
}

// compile builds every route's rate_limit filter of cfg against store, as
// the engine compiles a config: Prepare once, then New per route. Routes
// without limits get nil.
func compile(t testing.TB, cfg *config.Config, store *limiter.Store, loops int) ([]filters.Filter, error) {
	t.Helper()
	reg, ok := filters.Lookup(limiter.Name)
	if !ok {
		t.Fatal("rate_limit is not registered")
	}
	var services filters.Services
	services.Provide(store)
	b := &filters.Build{Name: reg.Name, Order: reg.Order, Loops: loops, Global: cfg.FilterGlobal(reg.Name), Services: &services}
	shared, err := reg.Prepare(b)
	if err != nil {
		return nil, err
	}
	var out []filters.Filter
	for i := range cfg.Routes {
		r := cfg.Routes[i]
		rc := r.FilterConfig(reg.Name)
		if rc == nil || rc.EnabledBy(b.Global) == "" {
			out = append(out, nil)
			continue
		}
		rb := *b
		rb.RouteID, rb.Config, rb.Shared = r.ID, rc, shared
		f, err := reg.New(&rb)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// mustCompile is compile that fails the test on an error.
func mustCompile(t testing.TB, cfg *config.Config, store *limiter.Store) []filters.Filter {
	t.Helper()
	fs, err := compile(t, cfg, store, 1)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// newStore is a Store closed when the test ends.
func newStore(t testing.TB) *limiter.Store {
	s := limiter.NewStore()
	t.Cleanup(s.Close)
	return s
}

// exchange is a request from ip with the given header lines ("Name:
// value"), parked through parker (nil: none).
func exchange(t testing.TB, ip string, parker filters.Parker, headers ...string) *filters.Exchange {
	t.Helper()
	req := &codec.Request{}
	for _, h := range headers {
		name, value, _ := strings.Cut(h, ":")
		req.Headers = append(req.Headers, codec.Header{Name: []byte(name), Value: []byte(strings.TrimSpace(value))})
	}
	x := &filters.Exchange{}
	x.Reset(req, []byte("id"), netip.MustParseAddr(ip), 0, parker)
	return x
}

// fakeEngine parks exchanges and hands each resume to the test, which runs
// it or drops it as an engine would.
type fakeEngine struct {
	gen     uint64
	resumes chan func(*filters.Exchange) filters.Verdict
}

func newFakeEngine() *fakeEngine {
	return &fakeEngine{resumes: make(chan func(*filters.Exchange) filters.Verdict, 16)}
}

func (e *fakeEngine) Park() filters.Ticket { return filters.NewTicket(e, e.gen) }

func (e *fakeEngine) Resume(gen uint64, fn func(*filters.Exchange) filters.Verdict) {
	if gen == e.gen {
		e.resumes <- fn
	}
}

// status returns the store's status of one limit, failing the test when
// it has none.
func status(t testing.TB, s *limiter.Store, name, scope string) limiter.LimitStatus {
	t.Helper()
	for _, l := range s.Status().Limits {
		if l.Name == name && l.Scope == scope {
			return l
		}
	}
	t.Fatalf("no %s limit %q in the status", scope, name)
	return limiter.LimitStatus{}
}
