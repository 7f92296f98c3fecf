package filters_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
	"github.com/loopgate/loopgate/filters/auth"
	"github.com/loopgate/loopgate/filters/transform"
)

// benchJWT is HS256 with secret "bench-secret", exp 2100.
const benchJWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJiZW5jaC11c2VyIiwiaXNzIjoibG9vcGdhdGUtYmVuY2giLCJhdWQiOiJhcGkiLCJleHAiOjQxMDI0NDQ4MDAsInJvbGVzIjpbInVzZXIiXX0.8v9qgL5WcrLLxZFFc8kuCEN-Lc_u_nQVxxwrOYJK170"

func parse(t testing.TB, raw string) *codec.Request {
	t.Helper()
	var req codec.Request
	lim := codec.DefaultLimits()
	if _, err := codec.ParseRequest([]byte(raw), &req, &lim); err != nil {
		t.Fatal(err)
	}
	return &req
}

// defaultChain is request ID, IP allow list, JWT auth and forwarded headers.
func defaultChain(t testing.TB) *filters.Chain {
	t.Helper()
	cfg := config.Default().FilterGlobal(auth.Name).(*auth.Global).Auth // identity headers on, as by default
	cfg.CacheSize = 1000
	cfg.JWT = auth.JWT{HS256Secret: "bench-secret", Issuer: "loopgate-bench", Audience: "api", RolesClaim: "roles", TenantClaim: "tenant"}
	v, err := auth.NewVerifier(&cfg, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	allow, _ := access.ParsePrefixes([]string{"127.0.0.0/8", "10.0.0.0/8", "192.168.0.0/16"})
	trusted, _ := access.ParsePrefixes([]string{"127.0.0.1/32"})
	c, err := filters.NewChain([]filters.Filter{
		transform.NewForwarded(800, trusted, 1),
		auth.NewFilter(v, 300, nil),
		access.NewIPFilter(200, allow, nil, nil, nil, access.NewBans(0)),
		transform.NewRequestID(100),
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestChainOrderTimingsAndVerdicts(t *testing.T) {
	c := defaultChain(t)
	want := []string{"request_id", "ip_access", "auth", "forwarded"}
	for i, name := range want {
		if c.Filter(i).Name() != name {
			t.Fatalf("filter %d is %s, want %s", i, c.Filter(i).Name(), name)
		}
	}
	req := parse(t, "GET /x HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer "+benchJWT+"\r\n\r\n")
	var x filters.Exchange
	x.Reset(req, []byte("id-1"), netip.MustParseAddr("127.0.0.1"), 0, nil)
	if v := c.RunRequest(&x); v != filters.Continue {
		t.Fatalf("verdict %v, rejection %+v", v, x.Rejection)
	}
	if !x.Identity.Authenticated || string(x.Identity.Subject) != "bench-user" {
		t.Fatalf("identity %+v", x.Identity)
	}
	if len(x.ReqEdits.Set) == 0 {
		t.Fatal("no identity headers set: the chain does not run as configured by default")
	}
	x.Status = 200
	c.RunResponse(&x)
	for i := range want {
		tm := x.Timings[i]
		if tm.Self <= 0 || tm.Total < tm.Self {
			t.Fatalf("filter %d timings %+v: self must be positive and within total", i, tm)
		}
	}
	// Earlier filters' total time includes the later ones.
	if x.Timings[0].Total < x.Timings[3].Total {
		t.Fatalf("outer total %v < inner total %v", x.Timings[0].Total, x.Timings[3].Total)
	}
	if calls, _, _ := c.Stats(2).Totals(); calls != 1 {
		t.Fatalf("auth stats calls %d, want 1", calls)
	}

	// A missing token stops the chain at auth: forwarded never runs.
	req = parse(t, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	x.Reset(req, []byte("id-2"), netip.MustParseAddr("127.0.0.1"), 0, nil)
	if v := c.RunRequest(&x); v != filters.Respond || x.Rejection.Code != 40101 {
		t.Fatalf("verdict %v, rejection %+v", v, x.Rejection)
	}
}

func TestChainRejectsDuplicateOrders(t *testing.T) {
	_, err := filters.NewChain([]filters.Filter{transform.NewRequestID(100), transform.NewRequestID(100)}, 1)
	if err == nil {
		t.Fatal("duplicate order accepted")
	}
}

// panicky panics in its request phase, or in its response phase when
// inResponse is set.
type panicky struct {
	filters.Base
	inResponse bool
}

func (p panicky) Request(*filters.Exchange) filters.Verdict {
	if !p.inResponse {
		panic(errors.New("boom"))
	}
	return filters.Continue
}

func (p panicky) Response(*filters.Exchange) {
	if p.inResponse {
		panic(errors.New("boom"))
	}
}

func (p panicky) HasResponseHook() bool { return p.inResponse }

// calls is how many exchanges the i-th filter's stats have recorded: one
// per timing closed by its response phase.
func calls(c *filters.Chain, i int) int64 {
	n, _, _ := c.Stats(i).Totals()
	return n
}

func TestChainRecoversPanics(t *testing.T) {
	chain := func(p panicky) *filters.Chain {
		p.Base = filters.Base{FilterName: "panicky", FilterOrder: 2}
		c, err := filters.NewChain([]filters.Filter{transform.NewRequestID(1), p}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	req := parse(t, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	peer := netip.MustParseAddr("127.0.0.1")

	// A request phase that panics is a 500, and its response phase still
	// runs: every filter's timing is closed and counted.
	c := chain(panicky{})
	var x filters.Exchange
	x.Reset(req, []byte("id"), peer, 0, nil)
	if v := c.RunRequest(&x); v != filters.Respond || x.Rejection.Status != 500 || x.Rejection.Code != 50001 {
		t.Fatalf("verdict %v, rejection %+v", v, x.Rejection)
	}
	x.Status = 500
	c.RunResponse(&x)
	for i := 0; i < c.Len(); i++ {
		if tm := x.Timings[i]; tm.Total <= 0 || tm.Self < 0 || tm.Self > tm.Total {
			t.Errorf("filter %d timings %+v after a request-phase panic: not closed", i, tm)
		}
		if n := calls(c, i); n != 1 {
			t.Errorf("filter %d recorded %d calls, want 1", i, n)
		}
	}

	// A response phase that panics loses only its own work: the filters
	// before it still run theirs and close their timings.
	c = chain(panicky{inResponse: true})
	x.Reset(req, []byte("id"), peer, 0, nil)
	if v := c.RunRequest(&x); v != filters.Continue {
		t.Fatalf("verdict %v, rejection %+v", v, x.Rejection)
	}
	x.Status = 200
	c.RunResponse(&x)
	if tm := x.Timings[0]; tm.Total <= 0 || tm.Self <= 0 || tm.Self > tm.Total || calls(c, 0) != 1 {
		t.Errorf("request_id timings %+v, %d calls, after a later filter's response panic", tm, calls(c, 0))
	}
	if n := calls(c, 1); n != 0 {
		t.Errorf("the panicking response phase recorded %d calls", n)
	}
}

// BenchmarkDefaultChain is the whole default chain, both phases, on a warm
// auth cache: the budget is 1 µs and 0 allocations.
func BenchmarkDefaultChain(b *testing.B) {
	c := defaultChain(b)
	req := parse(b, "GET /api/echo HTTP/1.1\r\nHost: bench\r\nUser-Agent: wrk\r\nAccept: */*\r\nX-Forwarded-For: 203.0.113.7\r\nAuthorization: Bearer "+benchJWT+"\r\n\r\n")
	peer := netip.MustParseAddr("127.0.0.1")
	id := []byte("0123456789abcdef01234567")
	var x filters.Exchange
	run := func() {
		x.Reset(req, id, peer, 0, nil)
		if c.RunRequest(&x) != filters.Continue {
			b.Fatalf("rejected: %+v", x.Rejection)
		}
		x.Status = 200
		c.RunResponse(&x)
	}
	run() // warm the cache
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		run()
	}
}
