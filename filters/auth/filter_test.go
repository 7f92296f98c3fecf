// Tests and benchmark of the "auth" route filter.

package auth

import (
	"slices"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool/pooltest"
)

func TestFilter(t *testing.T) {
	cfg := baseConfig()
	cfg.APIKeys = []APIKey{{Key: "k-ops", Consumer: "ops", Roles: []string{"ops"}}}
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
		if got != c.verdict || r.Status != c.status || r.Code != c.code || string(r.Header("WWW-Authenticate")) != c.header {
			t.Errorf("%s: %v %+v, want %v %d %d %q", c.name, got, r, c.verdict, c.status, c.code, c.header)
		}
		if n := len(r.Headers()); c.header != "" && n != 1 || c.header == "" && n != 0 {
			t.Errorf("%s: %d rejection headers", c.name, n)
		}
		if string(x.Identity.Subject) != c.subject || x.Identity.Authenticated != (c.subject != "") {
			t.Errorf("%s: identity %+v, want subject %q", c.name, x.Identity, c.subject)
		}
	}
}

func TestFilterCustomHeader(t *testing.T) {
	cfg := baseConfig()
	cfg.Header = "X-Api-Key"
	cfg.APIKeys = []APIKey{{Key: "k1", Consumer: "c1"}}
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

// again readies x for the same request once more, as the engine does for
// each request: the edit lists keep their capacity.
func again(x *filters.Exchange) *filters.Exchange {
	x.Reset(x.Req, x.RequestID, x.Peer, x.Loop, nil)
	return x
}

// A warm cache hit, role check and identity headers included, allocates
// nothing: the headers' values were built when the token was verified.
func TestFilterWarmCacheAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	v, _ := newVerifier(t, baseConfig(), 1)
	f := NewFilter(v, 300, []string{"admin"})
	x, _ := exchange(t, withAuth("Bearer "+benchToken(t)), 0)
	v.Revoke("some-other-token", t0.Add(1e12)) // make the revocation check do a lookup
	if f.Request(x) != filters.Continue {
		t.Fatal(x.Rejection)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if f.Request(again(x)) != filters.Continue {
			t.Fatal(x.Rejection)
		}
	})
	if allocs != 0 {
		t.Fatalf("warm cache: %.1f allocs per request, want 0", allocs)
	}
	if got, _ := setEdit(x, "X-User-Roles"); got != "user,admin" {
		t.Fatalf("roles header %q: the measured path did not set the identity headers", got)
	}
}

func TestFilterAPIKeyAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	cfg := baseConfig()
	cfg.APIKeys = []APIKey{{Key: "k-ops", Consumer: "ops", Roles: []string{"ops", "dev"}}}
	v, _ := newVerifier(t, cfg, 1)
	f := NewFilter(v, 300, nil)
	x, _ := exchange(t, withAuth("k-ops"), 0)
	if f.Request(x) != filters.Continue {
		t.Fatal(x.Rejection)
	}
	if allocs := testing.AllocsPerRun(100, func() { f.Request(again(x)) }); allocs != 0 {
		t.Fatalf("API key: %.1f allocs per request, want 0", allocs)
	}
	if got, _ := setEdit(x, "X-User-Roles"); got != "ops,dev" {
		t.Fatalf("roles header %q", got)
	}
}

// setEdit returns the value the edits set for name, and how many set edits
// name it.
func setEdit(x *filters.Exchange, name string) (string, int) {
	var v string
	n := 0
	for _, h := range x.ReqEdits.Set {
		if strings.EqualFold(h.Name, name) {
			v, n = string(h.Value), n+1
		}
	}
	return v, n
}

// The verified identity goes upstream in the identity headers, set (so
// replacing whatever the client sent under those names), with an empty
// value removed rather than left to the client.
func TestFilterIdentityHeaders(t *testing.T) {
	cfg := baseConfig()
	cfg.APIKeys = []APIKey{{Key: "k-billing", Consumer: "billing", Roles: []string{"svc"}}}
	v, _ := newVerifier(t, cfg, 1)
	f := NewFilter(v, 300, nil)
	forged := "X-User-Id: root\r\nX-User-Tenant: evil\r\nX-User-Roles: admin\r\nX-Auth-Kind: api_key\r\n"

	tok := hsToken(t, m{"sub": "alice", "tenant": "acme", "roles": []string{"reader", "writer"}})
	x, _ := exchange(t, get(forged+"Authorization: Bearer "+tok+"\r\n"), 0)
	if f.Request(x) != filters.Continue {
		t.Fatal(x.Rejection)
	}
	for name, want := range map[string]string{"X-User-Id": "alice", "X-User-Tenant": "acme", "X-User-Roles": "reader,writer", "X-Auth-Kind": "jwt"} {
		if got, n := setEdit(x, name); got != want || n != 1 {
			t.Errorf("%s: set %q (%d edits), want %q once", name, got, n, want)
		}
	}
	if len(x.ReqEdits.Remove) != 0 {
		t.Errorf("removals %v with every value present", x.ReqEdits.Remove)
	}

	// An API key without a tenant: the tenant header goes, the rest is set.
	x, _ = exchange(t, get(forged+"Authorization: k-billing\r\n"), 0)
	if f.Request(x) != filters.Continue {
		t.Fatal(x.Rejection)
	}
	for name, want := range map[string]string{"X-User-Id": "billing", "X-User-Roles": "svc", "X-Auth-Kind": "api_key"} {
		if got, n := setEdit(x, name); got != want || n != 1 {
			t.Errorf("api key %s: set %q (%d edits), want %q once", name, got, n, want)
		}
	}
	if _, n := setEdit(x, "X-User-Tenant"); n != 0 || !slices.Contains(x.ReqEdits.Remove, "X-User-Tenant") {
		t.Errorf("api key without tenant: set %d, removals %v; the client's X-User-Tenant must go", n, x.ReqEdits.Remove)
	}

	// Refused requests get no identity headers.
	x, _ = exchange(t, get(forged+"Authorization: k-nope\r\n"), 0)
	if f.Request(x) != filters.Respond || len(x.ReqEdits.Set)+len(x.ReqEdits.Remove) != 0 {
		t.Errorf("refused request: edits %+v", x.ReqEdits)
	}
}

// identity_headers names are configurable, and "" turns one off.
func TestFilterIdentityHeaderNames(t *testing.T) {
	cfg := baseConfig()
	cfg.IdentityHeaders = IdentityHeaders{Subject: ptr("X-Sub"), Tenant: ptr(""), Roles: ptr("X-Groups"), Kind: ptr("")}
	v, _ := newVerifier(t, cfg, 1)
	x, _ := exchange(t, withAuth("Bearer "+hsToken(t, m{"sub": "alice", "roles": "a b"})), 0)
	if NewFilter(v, 300, nil).Request(x) != filters.Continue {
		t.Fatal(x.Rejection)
	}
	if got, _ := setEdit(x, "X-Sub"); got != "alice" {
		t.Errorf("X-Sub %q", got)
	}
	if got, _ := setEdit(x, "X-Groups"); got != "a,b" {
		t.Errorf("X-Groups %q", got)
	}
	if len(x.ReqEdits.Set) != 2 || len(x.ReqEdits.Remove) != 0 {
		t.Errorf("disabled headers still edited: %+v", x.ReqEdits)
	}
}

// Two fields of the credential header are refused before any verification:
// which one counts would be a guess another proxy could make differently.
func TestFilterDuplicateCredential(t *testing.T) {
	cfg := baseConfig()
	cfg.APIKeys = []APIKey{{Key: "k1", Consumer: "c1"}}
	v, _ := newVerifier(t, cfg, 1)
	f := NewFilter(v, 300, nil)
	good := "Bearer " + hsToken(t, m{"sub": "alice"})
	for name, raw := range map[string]string{
		"two valid":         get("Authorization: " + good + "\r\nAuthorization: " + good + "\r\n"),
		"valid and other":   get("Authorization: " + good + "\r\nauthorization: k1\r\n"),
		"empty then valid":  get("Authorization:\r\nAuthorization: " + good + "\r\n"),
		"apart from others": get("Authorization: k1\r\nX-Other: 1\r\nAUTHORIZATION: k1\r\n"),
	} {
		x, _ := exchange(t, raw, 0)
		r := &x.Rejection
		if got := f.Request(x); got != filters.Respond || r.Status != 400 || r.Code != 40001 || r.Message != "more than one Authorization header" || len(r.Headers()) != 0 {
			t.Errorf("%s: %v %+v", name, got, *r)
		}
		if x.Identity.Authenticated {
			t.Errorf("%s: identity set", name)
		}
	}
	// The configured header is the one counted, and named.
	cfg.Header = "X-Api-Key"
	v, _ = newVerifier(t, cfg, 1)
	x, _ := exchange(t, get("X-Api-Key: k1\r\nX-Api-Key: k1\r\n"), 0)
	if NewFilter(v, 300, nil).Request(x) != filters.Respond || x.Rejection.Message != "more than one X-Api-Key header" {
		t.Errorf("custom header: %+v", x.Rejection)
	}
	x, _ = exchange(t, get("X-Api-Key: k1\r\nAuthorization: a\r\nAuthorization: b\r\n"), 0)
	if NewFilter(v, 300, nil).Request(x) != filters.Continue {
		t.Errorf("two fields of another header refused: %+v", x.Rejection)
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
		if f.Request(again(x)) != filters.Continue {
			b.Fatal(x.Rejection)
		}
	}
}

func BenchmarkAuthAPIKey(b *testing.B) {
	cfg := baseConfig()
	cfg.APIKeys = []APIKey{{Key: strings.Repeat("k", 40), Consumer: "c"}}
	v, _ := newVerifier(b, cfg, 1)
	f := NewFilter(v, 300, nil)
	x, _ := exchange(b, withAuth(strings.Repeat("k", 40)), 0)
	b.ReportAllocs()
	for b.Loop() {
		if f.Request(again(x)) != filters.Continue {
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
		if f.Request(again(x)) != filters.Continue {
			b.Fatal(x.Rejection)
		}
	}
}
