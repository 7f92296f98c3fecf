// Test helpers: exchanges built from raw request heads, and edit lookups.

package transform

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/filterstest"
)

// request parses a head given as lines (CRLFs added). It returns the raw
// buffer too, so tests can overwrite it to prove values were copied.
func request(t testing.TB, lines ...string) (*codec.Request, []byte) {
	t.Helper()
	raw := []byte(strings.Join(lines, "\r\n") + "\r\n\r\n")
	req := &codec.Request{}
	n, err := codec.ParseRequest(raw, req, nil)
	if err != nil || n != len(raw) {
		t.Fatalf("parse %q: n=%d err=%v", raw, n, err)
	}
	return req, raw
}

// exchange returns a fresh exchange for req from peer (client IP = peer).
func exchange(req *codec.Request, peer string) *filters.Exchange {
	x := &filters.Exchange{}
	var p netip.Addr
	if peer != "" {
		p = netip.MustParseAddr(peer)
	}
	x.Reset(req, []byte("gen-0001"), p, 0, nil)
	return x
}

// setValue returns the value queued with AddSet for name, and whether one was.
func setValue(e *filters.HeaderEdits, name string) (string, bool) {
	for _, h := range e.Set {
		if strings.EqualFold(h.Name, name) {
			return string(h.Value), true
		}
	}
	return "", false
}

func removes(e *filters.HeaderEdits, name string) bool {
	for _, n := range e.Remove {
		if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

// scribble overwrites buf, so any value still pointing into it shows.
func scribble(buf []byte) {
	for i := range buf {
		buf[i] = '#'
	}
}

// checked provisions and validates a route config as engine/config would,
// on a route to upstream "main" with an upstream "canary" configured, and
// fails the test on any problem.
func checked[T filterstest.Config](t testing.TB, cfg T) T {
	t.Helper()
	env := &filterstest.Env{Upstreams: []string{"main", "canary"}}
	if p := filterstest.Check(cfg, env, &filters.RouteInfo{ID: "r", Upstream: "main"}); len(p) > 0 {
		t.Fatalf("config refused: %q", p)
	}
	return cfg
}

// newHeaders builds the headers filter from checked edit lists.
func newHeaders(t testing.TB, req, resp *HeaderOps) filters.Filter {
	t.Helper()
	f, err := NewHeaders(400, checked(t, &HeadersRoute{Request: req, Response: resp}))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// newRewrite builds the rewrite filter from a checked section.
func newRewrite(t testing.TB, cfg *Rewrite) filters.Filter {
	t.Helper()
	f, err := NewRewrite(500, checked(t, &RewriteRoute{Rewrite: cfg}).Rewrite)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
