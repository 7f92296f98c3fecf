// Auth integrity through the real data plane: the external-auth deadline,
// revoked ES256 tokens in their malleated form, duplicate credentials, the
// verified identity headers the upstream sees, and strip_prefix matching
// as routes match.

package engine_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// An auth service that answers at once but drips its body (one byte per
// 100 ms, each read inside the per-read timeout) cannot hold the request
// past auth.external.timeout: the deadline covers the whole call.
func TestAuthExternalDeadlineIsTotal(t *testing.T) {
	var hits atomic.Int64
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "upstream")
	}))
	const body = 50 // 5 s of dripping
	authSrv := startRawUpstream(t, func(c net.Conn) {
		buf := make([]byte, 4096)
		if _, err := c.Read(buf); err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nX-User-Id: u-1\r\nContent-Length: %d\r\n\r\n", body)
		for i := 0; i < body; i++ {
			time.Sleep(100 * time.Millisecond)
			if _, err := c.Write([]byte("x")); err != nil {
				return // the gateway gave up on us
			}
		}
	})
	g := startGateway(t, `
auth:
  external: {upstream: authsvc, timeout: 300ms}
upstreams:
  - {name: backend, nodes: ["%s"]}
  - {name: authsvc, nodes: ["%s"]}
routes:
  - {id: ext, prefix: /, upstream: backend, external_auth: true}
`, up, authSrv)
	start := time.Now()
	resp, _, b := get(t, g, "/x", map[string]string{"Authorization": "Bearer t"})
	elapsed := time.Since(start)
	expectError(t, resp, b, 503, 50301)
	if elapsed > 3*time.Second {
		t.Fatalf("answered after %v: the 300ms deadline was re-armed by the dripped bytes", elapsed)
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the upstream was reached %d times", n)
	}
}

// es256Key is a P-256 key and its public half as PEM, for the gateway.
func es256Key(t *testing.T) (*ecdsa.PrivateKey, string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return k, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// es256Sign signs claims as a compact JWS with the low S Loopgate takes;
// signing is randomised, so two calls give two valid tokens of one content.
func es256Sign(t *testing.T, k *ecdsa.PrivateKey, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signing := enc.EncodeToString([]byte(`{"alg":"ES256","typ":"JWT"}`)) + "." + enc.EncodeToString(c)
	d := sha256.Sum256([]byte(signing))
	r, s, err := ecdsa.Sign(rand.Reader, k, d[:])
	if err != nil {
		t.Fatal(err)
	}
	n := elliptic.P256().Params().N
	if s.Cmp(new(big.Int).Rsh(n, 1)) > 0 {
		s.Sub(n, s)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return signing + "." + enc.EncodeToString(sig)
}

// es256Twin is tok with S replaced by n-S: the same signature, malleated,
// which plain ECDSA verification accepts.
func es256Twin(t *testing.T, tok string) string {
	t.Helper()
	i := strings.LastIndexByte(tok, '.')
	sig, err := base64.RawURLEncoding.DecodeString(tok[i+1:])
	if err != nil || len(sig) != 64 {
		t.Fatalf("not an ES256 token: %v", err)
	}
	s := new(big.Int).SetBytes(sig[32:])
	s.Sub(elliptic.P256().Params().N, s)
	s.FillBytes(sig[32:])
	return tok[:i+1] + base64.RawURLEncoding.EncodeToString(sig)
}

// A revoked ES256 token stays refused when re-sent with its high-S twin
// signature, or re-signed, on every loop and from the cache.
func TestAuthRevokedES256Malleated(t *testing.T) {
	up := startUpstream(t, okHandler)
	k, pub := es256Key(t)
	g := startGateway(t, `
auth:
  jwt:
    es256_public_key: |
%s
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: api, prefix: /, upstream: backend, auth: required}
`, indent(pub, "      "), up)
	claims := map[string]any{"sub": "carol", "exp": time.Now().Add(time.Hour).Unix()}
	tok := es256Sign(t, k, claims)
	resigned := es256Sign(t, k, claims)
	for _, cred := range []string{tok, resigned} {
		for range 4 { // both loops, and their caches
			if resp, _, b := get(t, g, "/x", map[string]string{"Authorization": "Bearer " + cred}); resp.StatusCode != 200 {
				t.Fatalf("valid token: %d %s", resp.StatusCode, b)
			}
		}
	}
	g.srv.Verifier().Revoke(tok, time.Time{})
	for name, cred := range map[string]string{"revoked": tok, "high-S twin": es256Twin(t, tok), "re-signed (cached)": resigned, "re-signed twin": es256Twin(t, resigned)} {
		for range 4 {
			resp, _, b := get(t, g, "/x", map[string]string{"Authorization": "Bearer " + cred})
			expectError(t, resp, b, 401, 40102)
			if name == "revoked" && !strings.Contains(string(b), "revoked") {
				t.Fatalf("%s: %s", name, b)
			}
		}
	}
}

// indent prefixes every line of s, for block scalars in the test YAML.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}

// Two Authorization fields are refused with 400 on routes running auth or
// external_auth, and neither the upstream nor the auth service sees them.
func TestAuthDuplicateCredentialHeader(t *testing.T) {
	var upHits, authHits atomic.Int64
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upHits.Add(1)
		io.WriteString(w, "upstream")
	}))
	authSrv := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { authHits.Add(1) }))
	g := startGateway(t, `
auth:
  api_keys: [{key: k-1, consumer: alice}]
  external: {upstream: authsvc, timeout: 2s}
upstreams:
  - {name: backend, nodes: ["%s"]}
  - {name: authsvc, nodes: ["%s"]}
routes:
  - {id: auth, prefix: /auth/, upstream: backend, auth: required}
  - {id: ext, prefix: /ext/, upstream: backend, external_auth: true}
  - {id: open, prefix: /, upstream: backend}
`, up, authSrv)
	for _, path := range []string{"/auth/x", "/ext/x"} {
		resp, b := g.rawExchange(t, "GET "+path+" HTTP/1.1\r\nHost: a\r\nAuthorization: k-1\r\nauthorization: k-2\r\n\r\n")
		expectError(t, resp, b, 400, 40001)
		if !strings.Contains(string(b), "more than one Authorization header") {
			t.Fatalf("%s: %s", path, b)
		}
	}
	if n, m := upHits.Load(), authHits.Load(); n != 0 || m != 0 {
		t.Fatalf("upstream reached %d times, auth service %d times", n, m)
	}
	// One field passes, and routes without auth filters are not judged.
	if resp, _, b := get(t, g, "/auth/x", map[string]string{"Authorization": "k-1"}); resp.StatusCode != 200 {
		t.Fatalf("one field: %d %s", resp.StatusCode, b)
	}
	if resp, b := g.rawExchange(t, "GET /open HTTP/1.1\r\nHost: a\r\nAuthorization: a\r\nAuthorization: b\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("route without auth: %d %s", resp.StatusCode, b)
	}
}

// The upstream of an auth route sees the verified identity in the identity
// headers, each exactly once, whatever the client sent under those names.
func TestAuthIdentityHeadersReachUpstream(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(headerEcho))
	g := startGateway(t, `
auth:
  jwt: {hs256_secret: 0123456789abcdef0123456789abcdef}
  api_keys: [{key: k-1, consumer: svc-billing, roles: [svc]}]
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: api, prefix: /, upstream: backend, auth: required}
`, up)
	tok := hs256(t, "0123456789abcdef0123456789abcdef", map[string]any{"sub": "alice", "tenant": "acme", "roles": []string{"reader", "writer"}})
	forged := "X-User-Id: root\r\nx-user-id: root2\r\nX-User-Tenant: evil\r\nX-User-Roles: admin\r\nX-Auth-Kind: api_key\r\n"
	for _, c := range []struct {
		cred string
		want map[string]string // "" = absent
	}{
		{"Bearer " + tok, map[string]string{"X-User-Id": "alice", "X-User-Tenant": "acme", "X-User-Roles": "reader,writer", "X-Auth-Kind": "jwt"}},
		{"k-1", map[string]string{"X-User-Id": "svc-billing", "X-User-Tenant": "", "X-User-Roles": "svc", "X-Auth-Kind": "api_key"}},
	} {
		resp, b := g.rawExchange(t, "GET /x HTTP/1.1\r\nHost: a\r\n"+forged+"Authorization: "+c.cred+"\r\n\r\n")
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		var e echoed
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("bad echo %q: %v", b, err)
		}
		for name, want := range c.want {
			got := e.Headers[name]
			if want == "" && len(got) != 0 || want != "" && (len(got) != 1 || got[0] != want) {
				t.Errorf("%s: upstream saw %s = %q, want %q", c.cred[:3], name, got, want)
			}
		}
	}
}

// With fail_open, an unavailable auth service lets the request through
// without identity: the client's own identity headers do not reach the
// upstream.
func TestAuthFailOpenDropsForgedIdentity(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(headerEcho))
	g := startGateway(t, `
auth:
  external: {upstream: authsvc, timeout: 500ms, fail_open: true}
upstreams:
  - {name: backend, nodes: ["%s"]}
  - {name: authsvc, nodes: ["%s"]}
routes:
  - {id: ext, prefix: /, upstream: backend, external_auth: true}
`, up, closedPort(t))
	resp, e, b := get(t, g, "/x", map[string]string{"X-User-Id": "forged", "X-User-Roles": "admin", "X-User-Name": "eve", "X-Other": "kept"})
	if resp.StatusCode != 200 {
		t.Fatalf("fail_open: %d %s", resp.StatusCode, b)
	}
	for _, name := range []string{"X-User-Id", "X-User-Roles", "X-User-Name"} {
		if got, ok := e.Headers[name]; ok {
			t.Errorf("upstream received %s = %q from the client", name, got)
		}
	}
	if got := e.Headers["X-Other"]; len(got) != 1 || got[0] != "kept" {
		t.Errorf("an unrelated header was touched: %q", got)
	}
}

// strip_prefix matches as routes do: ASCII case-insensitively and on whole
// segments, given with or without its trailing slash.
func TestAuthRewriteStripPrefixLikeRoutes(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(headerEcho))
	g := startGateway(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: rw, prefix: /rw/, upstream: backend, rewrite: {strip_prefix: /rw, add_prefix: /internal}}
  - {id: slash, prefix: /sl/, upstream: backend, rewrite: {strip_prefix: /SL/, add_prefix: /internal}}
  - {id: other, prefix: /, upstream: backend, rewrite: {strip_prefix: /rw, add_prefix: /internal}}
`, up)
	for path, want := range map[string]string{
		"/RW/v1/users":  "/internal/v1/users",
		"/rw/v1/users":  "/internal/v1/users",
		"/Rw":           "/internal",
		"/sl/v1?q=1":    "/internal/v1?q=1",
		"/rwx/v1/users": "/internal/rwx/v1/users", // /rw is not a segment of /rwx
	} {
		resp, e, b := get(t, g, path, nil)
		if resp.StatusCode != 200 || e.Path != want {
			t.Errorf("%s: %d, upstream path %q, want %q (%s)", path, resp.StatusCode, e.Path, want, b)
		}
	}
}
