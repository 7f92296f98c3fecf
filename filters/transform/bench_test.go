// Benchmarks for the per-request paths; each must report 0 allocs/op.

package transform

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
	"github.com/loopgate/loopgate/filters/transform/otlp"
	"github.com/loopgate/loopgate/pool/units"
)

// benchRequest is a typical proxied API request behind one trusted proxy.
var benchRequest = []string{
	"GET /api/v1/users/42?fields=name HTTP/1.1",
	"Host: api.example.com",
	"User-Agent: bench/1.0",
	"Accept: application/json",
	"X-Request-Id: 3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f",
	"X-Forwarded-For: 203.0.113.7",
	"Cookie: session=abc123; canary=no",
}

// benchFilter runs f's phases on a fresh-per-iteration exchange, the way
// the engine reuses one exchange per connection.
func benchFilter(b *testing.B, f filters.Filter, peer string) {
	req, _ := request(b, benchRequest...)
	p := netip.MustParseAddr(peer)
	id := []byte("0a1b2c3d4e5f000000000001")
	x := &filters.Exchange{}
	b.ReportAllocs()
	for b.Loop() {
		x.Reset(req, id, p, 0, nil)
		if f.Request(x) != filters.Continue {
			b.Fatal("not continued")
		}
		f.Response(x)
	}
}

func BenchmarkRequestID(b *testing.B) { benchFilter(b, NewRequestID(100), "10.0.0.1") }

func BenchmarkForwarded(b *testing.B) {
	trusted, _ := access.ParsePrefixes([]string{"10.0.0.0/8"})
	benchFilter(b, NewForwarded(800, trusted, 1), "10.0.0.1")
}

func BenchmarkForwardedUntrusted(b *testing.B) {
	benchFilter(b, NewForwarded(800, nil, 1), "198.51.100.9")
}

func BenchmarkHeaders(b *testing.B) {
	f := newHeaders(b,
		&HeaderOps{Set: map[string]string{"X-Env": "prod"}, Add: map[string]string{"X-Via": "loopgate"}, Remove: []string{"Cookie"}},
		&HeaderOps{Set: map[string]string{"Cache-Control": "no-store"}})
	benchFilter(b, f, "10.0.0.1")
}

func BenchmarkRewriteStripAdd(b *testing.B) {
	benchFilter(b, newRewrite(b, &Rewrite{StripPrefix: "/api", AddPrefix: "/internal"}), "10.0.0.1")
}

// BenchmarkRewriteRegex shows the documented cost of a regex step.
func BenchmarkRewriteRegex(b *testing.B) {
	benchFilter(b, newRewrite(b, &Rewrite{Regex: `^/api/v(\d+)/`, Replacement: "/v$1/"}), "10.0.0.1")
}

func BenchmarkGray(b *testing.B) {
	benchFilter(b, NewGray(600, &Gray{Cookie: "canary", Value: "yes", Weight: 10}, 1), "10.0.0.1")
}

func BenchmarkHash(b *testing.B) {
	benchFilter(b, NewHash(700, &Hash{Cookie: "session"}), "10.0.0.1")
}

// BenchmarkDefaultChainNoAuth is the default chain plus IP access, run as
// the engine runs it: client IP, then both phases through a filters.Chain.
func BenchmarkDefaultChainNoAuth(b *testing.B) {
	trusted, _ := access.ParsePrefixes([]string{"10.0.0.0/8"})
	allow, _ := access.ParsePrefixes([]string{"203.0.113.0/24", "198.51.100.0/24", "192.0.2.0/24"})
	chain, err := filters.NewChain([]filters.Filter{
		NewRequestID(100),
		access.NewIPFilter(200, allow, nil, nil, nil, access.NewBans(0)),
		NewForwarded(800, trusted, 1),
	}, 1)
	if err != nil {
		b.Fatal(err)
	}
	req, _ := request(b, benchRequest...)
	peer := netip.MustParseAddr("10.0.0.1")
	id := []byte("0a1b2c3d4e5f000000000001")
	x := &filters.Exchange{}
	b.ReportAllocs()
	for b.Loop() {
		x.Reset(req, id, peer, 0, nil)
		x.ClientIP = access.ClientIP(peer, req.Headers, trusted)
		if chain.RunRequest(x) != filters.Continue {
			b.Fatalf("rejected: %+v", x.Rejection)
		}
		x.Status = 200
		chain.RunResponse(x)
	}
}

// BenchmarkTraceContextStart is trace_context for a request without a
// traceparent: a new trace, two header edits.
func BenchmarkTraceContextStart(b *testing.B) {
	benchFilter(b, newTrace(b, 100, ""), "10.0.0.1")
}

// BenchmarkTraceContextExport adds the gateway's span: a client's sampled
// traceparent rewritten, and the span recorded at the done phase into the
// loop's ring. The config's first span, before the timer, wakes the sender
// to a collector on loopback; after it the sender idles (batch and interval
// are never reached, and a full ring drops, which costs the same), so what
// is counted is the loop's side.
func BenchmarkTraceContextExport(b *testing.B) {
	posted := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		select {
		case posted <- struct{}{}:
		default:
		}
	}))
	defer srv.Close()
	g := &TraceContextGlobal{TraceContext: &TraceContext{OTLP: &OTLP{Endpoint: srv.URL, BatchSize: 1 << 16, FlushInterval: units.Duration(time.Hour)}}}
	g.Provision()
	exp := otlp.New()
	exp.Start(1, 4096)
	defer exp.Close()
	f := NewTraceContext(110, 1, g.TraceContext, exp)
	req, _ := request(b, append(benchRequest, "traceparent: "+validTP)...)
	x := &filters.Exchange{}
	run := func() {
		x.Reset(req, x.RequestID, x.Peer, 0, nil)
		f.Request(x)
		x.Req = nil
		f.Done(x)
	}
	run()
	<-posted
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
}
