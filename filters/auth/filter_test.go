// Tests and benchmark of the "auth" route filter.

package auth

import (
	"strings"
	"testing"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
)

func TestFilter(t *testing.T) {
	cfg := baseConfig()
	cfg.APIKeys = []config.APIKey{{Key: "k-ops", Consumer: "ops", Roles: []string{"ops"}}}
	v, _ := newVerifier(t, cfg, 1)
	open := NewFilter(v, 300, nil)
	admins := NewFilter(v, 300, []string{"admin", "root"})
	if open.Name() != "auth" || open.Order() != 300 {
		t.Fatalf("name %q order %d", open.Name(), open.Order())
	}
	admin := "Bearer " + hsToken(t, m{"sub": "alice", "roles": "user admin"})
	user := "Bearer " + hsToken(t, m{"sub": "bob", "roles": []string{"user"}})

	cases := []struct {
		name    string
		f       filters.Filter
		raw     string
		verdict filters.Verdict
		status  int
		code    int
		header  string
		subject string
	}{
		{"missing", open, get(""), filters.Respond, 401, 40101, `Bearer realm="loopgate"`, ""},
		{"empty bearer", open, withAuth("Bearer"), filters.Respond, 401, 40101, `Bearer realm="loopgate"`, ""},
		{"bad token", open, withAuth("Bearer a.b.c"), filters.Respond, 401, 40102, `Bearer error="invalid_token"`, ""},
		{"bad key", open, withAuth("k-nope"), filters.Respond, 401, 40102, `Bearer error="invalid_token"`, ""},
		{"jwt", open, withAuth(user), filters.Continue, 0, 0, "", "bob"},
		{"api key", open, withAuth("k-ops"), filters.Continue, 0, 0, "", "ops"},
		{"role ok", admins, withAuth(admin), filters.Continue, 0, 0, "", "alice"},
		{"role missing", admins, withAuth(user), filters.Respond, 403, 40301, "", "bob"},
		{"key role missing", admins, withAuth("k-ops"), filters.Respond, 403, 40301, "", "ops"},
		{"other header name case", open, get("authorization: " + user + "\r\n"), filters.Continue, 0, 0, "", "bob"},
	}
	for _, c := range cases {
		x, _ := exchange(t, c.raw, 0)
		got := c.f.Request(x)
		r := x.Rejection
		if got != c.verdict || r.Status != c.status || r.Code != c.code || r.HeaderValue != c.header {
			t.Errorf("%s: %v %+v, want %v %d %d %q", c.name, got, r, c.verdict, c.status, c.code, c.header)
		}
		if c.header != "" && r.HeaderName != "WWW-Authenticate" {
			t.Errorf("%s: header name %q", c.name, r.HeaderName)
		}
		if string(x.Identity.Subject) != c.subject || x.Identity.Authenticated != (c.subject != "") {
			t.Errorf("%s: identity %+v, want subject %q", c.name, x.Identity, c.subject)
		}
	}
}

func TestFilterCustomHeader(t *testing.T) {
	cfg := baseConfig()
	cfg.Header = "X-Api-Key"
	cfg.APIKeys = []config.APIKey{{Key: "k1", Consumer: "c1"}}
	v, _ := newVerifier(t, cfg, 1)
	f := NewFilter(v, 300, nil)
	x, _ := exchange(t, get("Authorization: k1\r\nX-Api-Key: k1\r\n"), 0)
	if got := f.Request(x); got != filters.Continue || string(x.Identity.Subject) != "c1" {
		t.Fatalf("%v %+v", got, x.Identity)
	}
	x, _ = exchange(t, withAuth("k1"), 0)
	if got := f.Request(x); got != filters.Respond || x.Rejection.Code != 40101 {
		t.Fatalf("credential in the wrong header: %v %+v", got, x.Rejection)
	}
}

// benchToken is an HS256 token of about 200 bytes.
func benchToken(t testing.TB) string {
	tok := hsToken(t, m{"sub": "user-1234567", "tenant": "acme", "roles": []string{"user", "admin"}, "iss": "loopgate", "exp": t0.Unix() + 3600})
	if n := len(tok); n < 180 || n > 240 {
		t.Fatalf("bench token is %d bytes", n)
	}
	return tok
}

func TestFilterWarmCacheAllocs(t *testing.T) {
	v, _ := newVerifier(t, baseConfig(), 1)
	f := NewFilter(v, 300, []string{"admin"})
	x, _ := exchange(t, withAuth("Bearer "+benchToken(t)), 0)
	v.Revoke("some-other-token", t0.Add(1e12)) // make the revocation check do a lookup
	if f.Request(x) != filters.Continue {
		t.Fatal(x.Rejection)
	}
	allocs := testing.AllocsPerRun(100, func() {
		x.Identity = filters.Identity{}
		if f.Request(x) != filters.Continue {
			t.Fatal(x.Rejection)
		}
	})
	if allocs != 0 {
		t.Fatalf("warm cache: %.1f allocs per request, want 0", allocs)
	}
}

func BenchmarkAuthWarmCache(b *testing.B) {
	v, _ := newVerifier(b, baseConfig(), 1)
	v.Revoke("some-other-token", t0.Add(1e12))
	f := NewFilter(v, 300, []string{"admin"})
	x, _ := exchange(b, withAuth("Bearer "+benchToken(b)), 0)
	if f.Request(x) != filters.Continue {
		b.Fatal(x.Rejection)
	}
	b.ReportAllocs()
	for b.Loop() {
		if f.Request(x) != filters.Continue {
			b.Fatal(x.Rejection)
		}
	}
}

func BenchmarkAuthAPIKey(b *testing.B) {
	cfg := baseConfig()
	cfg.APIKeys = []config.APIKey{{Key: strings.Repeat("k", 40), Consumer: "c"}}
	v, _ := newVerifier(b, cfg, 1)
	f := NewFilter(v, 300, nil)
	x, _ := exchange(b, withAuth(strings.Repeat("k", 40)), 0)
	b.ReportAllocs()
	for b.Loop() {
		if f.Request(x) != filters.Continue {
			b.Fatal(x.Rejection)
		}
	}
}

// The cost of a cache miss: full HS256 verification and claim decoding.
func BenchmarkAuthColdHS256(b *testing.B) {
	cfg := baseConfig()
	cfg.CacheSize = -1 // no cache
	v, _ := newVerifier(b, cfg, 1)
	f := NewFilter(v, 300, nil)
	x, _ := exchange(b, withAuth("Bearer "+benchToken(b)), 0)
	b.ReportAllocs()
	for b.Loop() {
		if f.Request(x) != filters.Continue {
			b.Fatal(x.Rejection)
		}
	}
}
