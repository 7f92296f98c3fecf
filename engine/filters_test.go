// Filters through the real data plane: auth, external auth, request IDs,
// forwarded headers, header edits, rewrite, gray, hash, IP access, limits.

package engine_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// hs256 signs claims with secret as a compact JWT.
func hs256(t testing.TB, secret string, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	h := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signing := h + "." + enc.EncodeToString(c)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// headerEcho answers with the request's path and headers as JSON.
func headerEcho(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Upstream-Internal", "secret")
	json.NewEncoder(w).Encode(map[string]any{"path": r.URL.RequestURI(), "headers": r.Header, "host": r.Host})
}

type echoed struct {
	Path    string              `json:"path"`
	Host    string              `json:"host"`
	Headers map[string][]string `json:"headers"`
}

// get sends a GET with headers and decodes the echo when the status is 200.
func get(t *testing.T, g *gateway, path string, headers map[string]string) (*http.Response, echoed, []byte) {
	t.Helper()
	req, _ := http.NewRequest("GET", g.url(path), nil)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var e echoed
	if resp.StatusCode == 200 && len(body) > 0 && body[0] == '{' {
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("bad echo %q: %v", body, err)
		}
	}
	return resp, e, body
}

func TestFilterAuthJWTAndAPIKey(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(headerEcho))
	g := startGateway(t, `
auth:
  jwt: {hs256_secret: s3cret, issuer: lg, audience: api}
  api_keys:
    - {key: k-123, consumer: alice, roles: [admin]}
    - {key: k-456, consumer: bob, roles: [viewer]}
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: admin, prefix: /admin/, upstream: backend, auth: required, roles: [admin]}
  - {id: open, prefix: /, upstream: backend}
`, up)
	now := time.Now().Unix()
	good := hs256(t, "s3cret", map[string]any{"sub": "u1", "iss": "lg", "aud": "api", "exp": now + 60, "roles": []string{"admin"}})
	// good's own claims under "alg": "none" with no signature: only the
	// algorithm can be why it is refused.
	algNone := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + strings.Split(good, ".")[1] + "."
	cases := []struct {
		name   string
		auth   string
		status int
		code   int
	}{
		{"missing", "", 401, 40101},
		{"jwt ok", "Bearer " + good, 200, 0},
		{"wrong signature", "Bearer " + hs256(t, "other", map[string]any{"sub": "u1", "iss": "lg", "aud": "api", "exp": now + 60, "roles": []string{"admin"}}), 401, 40102},
		{"expired", "Bearer " + hs256(t, "s3cret", map[string]any{"sub": "u1", "iss": "lg", "aud": "api", "exp": now - 60, "roles": []string{"admin"}}), 401, 40102},
		{"wrong audience", "Bearer " + hs256(t, "s3cret", map[string]any{"sub": "u1", "iss": "lg", "aud": "web", "exp": now + 60, "roles": []string{"admin"}}), 401, 40102},
		{"alg none", "Bearer " + algNone, 401, 40102},
		{"missing role", "Bearer " + hs256(t, "s3cret", map[string]any{"sub": "u1", "iss": "lg", "aud": "api", "exp": now + 60, "roles": []string{"viewer"}}), 403, 40301},
		{"api key ok", "k-123", 200, 0},
		{"api key wrong role", "k-456", 403, 40301},
		{"api key unknown", "k-999", 401, 40102},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := map[string]string{}
			if c.auth != "" {
				h["Authorization"] = c.auth
			}
			resp, _, body := get(t, g, "/admin/x", h)
			if c.status == 200 {
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, body)
				}
				return
			}
			expectError(t, resp, body, c.status, c.code)
			if c.status == 401 && resp.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	// Revocation reaches every loop, cache hits included.
	g.srv.Verifier().Revoke(good, time.Now().Add(time.Hour))
	for i := 0; i < 4; i++ {
		resp, _, body := get(t, g, "/admin/x", map[string]string{"Authorization": "Bearer " + good})
		expectError(t, resp, body, 401, 40102)
	}
	// A revoked API key is refused too.
	g.srv.Verifier().RevokeKey("k-123")
	resp, _, body := get(t, g, "/admin/x", map[string]string{"Authorization": "k-123"})
	expectError(t, resp, body, 401, 40102)
	// Routes without auth stay open.
	if resp, _, _ := get(t, g, "/open", nil); resp.StatusCode != 200 {
		t.Fatalf("open route: %d", resp.StatusCode)
	}
}

func TestFilterExternalAuth(t *testing.T) {
	var mode atomic.Value // "allow", "deny", "hang"
	mode.Store("allow")
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	authSrv := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch mode.Load() {
		case "allow":
			if r.Header.Get("Authorization") != "Bearer t" || r.Header.Get("X-Forwarded-Uri") != "/ext/x?y=1" {
				w.WriteHeader(400)
				return
			}
			w.Header().Set("X-User-Id", "u-42")
			w.Header().Set("X-User-Roles", "admin,dev")
			w.Header().Set("X-Not-Copied", "1")
		case "deny":
			w.WriteHeader(401)
		case "forbid":
			w.WriteHeader(403)
		case "hang":
			<-release
		}
	}))
	up := startUpstream(t, http.HandlerFunc(headerEcho))
	cfg := `
auth:
  external: {upstream: authsvc, path: /check, timeout: 2s%s}
upstreams:
  - {name: backend, nodes: ["%s"]}
  - {name: authsvc, nodes: ["%s"]}
routes:
  - {id: ext, prefix: /ext/, upstream: backend, external_auth: true}
`
	g := startGateway(t, cfg, "", up, authSrv)
	h := map[string]string{"Authorization": "Bearer t", "X-User-Id": "spoofed"}
	resp, e, body := get(t, g, "/ext/x?y=1", h)
	if resp.StatusCode != 200 {
		t.Fatalf("allow: %d %s", resp.StatusCode, body)
	}
	if got := e.Headers["X-User-Id"]; len(got) != 1 || got[0] != "u-42" {
		t.Fatalf("X-User-Id at upstream %q, want the auth service's u-42", got)
	}
	if _, ok := e.Headers["X-Not-Copied"]; ok {
		t.Fatal("a header not in copy_headers reached the upstream")
	}
	mode.Store("deny")
	resp, _, body = get(t, g, "/ext/x?y=1", h)
	expectError(t, resp, body, 401, 40102)
	mode.Store("forbid")
	resp, _, body = get(t, g, "/ext/x?y=1", h)
	expectError(t, resp, body, 403, 40301)
	mode.Store("hang")
	resp, _, body = get(t, g, "/ext/x?y=1", h)
	expectError(t, resp, body, 503, 50301)
	once.Do(func() { close(release) })
	mode.Store("allow")
	if resp, _, body := get(t, g, "/ext/x?y=1", h); resp.StatusCode != 200 {
		t.Fatalf("after the auth service recovered: %d %s", resp.StatusCode, body)
	}

	// Without fail_open a service that is down is a 503 too (with it, the
	// request passes without identity: TestAuthFailOpenDropsForgedIdentity).
	g2 := startGateway(t, cfg, "", up, closedPort(t))
	resp, _, body = get(t, g2, "/ext/x?y=1", h)
	expectError(t, resp, body, 503, 50301)
}

func TestFilterTransformations(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(headerEcho))
	g := startGateway(t, `
trusted_proxies: ["127.0.0.1/32"]
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - id: api
    prefix: /api/
    upstream: backend
    request_headers: {set: {X-Env: prod}, add: {X-Tag: a}, remove: [X-Drop]}
    response_headers: {set: {X-Served-By: loopgate}, remove: [X-Upstream-Internal]}
    rewrite: {strip_prefix: /api, add_prefix: /v2}
`, up)
	resp, e, body := get(t, g, "/api/users?id=7", map[string]string{
		"X-Drop": "1", "X-Forwarded-For": "203.0.113.9", "X-Request-Id": "abc-123"})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if e.Path != "/v2/users?id=7" {
		t.Errorf("upstream path %q, want /v2/users?id=7", e.Path)
	}
	if e.Headers["X-Env"][0] != "prod" || e.Headers["X-Tag"][0] != "a" || e.Headers["X-Drop"] != nil {
		t.Errorf("request header edits not applied: %v", e.Headers)
	}
	if got := e.Headers["X-Forwarded-For"]; len(got) != 1 || got[0] != "203.0.113.9, 127.0.0.1" {
		t.Errorf("X-Forwarded-For %q", got)
	}
	if got := e.Headers["X-Real-Ip"]; len(got) != 1 || got[0] != "203.0.113.9" {
		t.Errorf("X-Real-IP %q (trusted proxy 127.0.0.1 reported 203.0.113.9)", got)
	}
	if got := e.Headers["X-Request-Id"]; len(got) != 1 || got[0] != "abc-123" {
		t.Errorf("X-Request-Id upstream %q", got)
	}
	if resp.Header.Get("X-Request-Id") != "abc-123" || resp.Header.Get("X-Served-By") != "loopgate" || resp.Header.Get("X-Upstream-Internal") != "" {
		t.Errorf("response header edits not applied: %v", resp.Header)
	}
	// A generated ID when the client sends none, echoed and forwarded.
	resp, e, _ = get(t, g, "/api/x", nil)
	id := resp.Header.Get("X-Request-Id")
	if id == "" || len(e.Headers["X-Request-Id"]) != 1 || e.Headers["X-Request-Id"][0] != id {
		t.Errorf("generated request ID %q, upstream saw %q", id, e.Headers["X-Request-Id"])
	}
}

func TestFilterGrayAndHash(t *testing.T) {
	stable := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "stable") }))
	canary := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "canary") }))
	var hits [3]atomic.Int64
	nodes := make([]string, 3)
	for i := range nodes {
		i := i
		nodes[i] = startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits[i].Add(1)
			fmt.Fprint(w, i)
		}))
	}
	g := startGateway(t, `
upstreams:
  - {name: stable, nodes: ["%s"]}
  - {name: canary, nodes: ["%s"]}
  - {name: many, nodes: ["%s", "%s", "%s"]}
routes:
  - {id: gray, prefix: /gray/, upstream: stable, gray: {header: X-Gray, value: "true", upstream: canary}}
  - {id: graycookie, prefix: /graycookie/, upstream: stable, gray: {cookie: canary, value: "yes", upstream: canary}}
  - {id: sticky, prefix: /sticky/, upstream: many, hash: {header: X-User}}
`, stable, canary, nodes[0], nodes[1], nodes[2])
	body := func(path string, h map[string]string) string {
		_, _, b := get(t, g, path, h)
		return string(b)
	}
	if b := body("/gray/x", map[string]string{"X-Gray": "true"}); b != "canary" {
		t.Errorf("X-Gray: true went to %q", b)
	}
	if b := body("/gray/x", nil); b != "stable" {
		t.Errorf("plain request went to %q", b)
	}
	if b := body("/graycookie/x", map[string]string{"Cookie": "a=1; canary=yes"}); b != "canary" {
		t.Errorf("canary cookie went to %q", b)
	}
	if b := body("/graycookie/x", map[string]string{"Cookie": "canary=no"}); b != "stable" {
		t.Errorf("other cookie value went to %q", b)
	}
	for _, user := range []string{"alice", "bob", "carol", "dave"} {
		first := body("/sticky/x", map[string]string{"X-User": user})
		for i := 0; i < 5; i++ {
			if b := body("/sticky/x", map[string]string{"X-User": user}); b != first {
				t.Fatalf("user %s moved from node %s to %s", user, first, b)
			}
		}
	}
}

func TestFilterIPAccessAndLimits(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: denied, prefix: /denied/, upstream: backend, ip_deny: ["127.0.0.0/8"]}
  - {id: small, prefix: /small/, upstream: backend, limits: {max_uri_bytes: 64, max_body_bytes: 10, max_header_count: 4}}
  - {id: all, prefix: /, upstream: backend}
`, up)
	resp, _, body := get(t, g, "/denied/x", nil)
	expectError(t, resp, body, 403, 40302)
	resp, _, body = get(t, g, "/small/"+strings.Repeat("a", 80), nil)
	expectError(t, resp, body, 414, 41401)
	r2, b2 := g.rawExchange(t, "POST /small/x HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\nhello world")
	expectError(t, r2, b2, 413, 41301)
	r3, b3 := g.rawExchange(t, "GET /small/x HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n")
	expectError(t, r3, b3, 431, 43101)
	// A chunked body over the route's limit is cut at the limit.
	r4, b4 := g.rawExchange(t, "POST /small/x HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nb\r\nhello world\r\n0\r\n\r\n")
	expectError(t, r4, b4, 413, 41301)
	// Runtime bans apply to routes running ip_access.
	g.expectServing(t)
}

// The ban API reaches loops without a restart.
func TestFilterGlobalAllowList(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, `
ip_allow: ["10.0.0.0/8"]
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up)
	resp, _, body := get(t, g, "/x", nil)
	expectError(t, resp, body, 403, 40302)
}

func TestFilterBans(t *testing.T) {
	up := startUpstream(t, okHandler)
	g := startGateway(t, `
filters: [request_id, ip_access]
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up)
	g.expectServing(t)
	if err := g.srv.Bans().Ban(netip.MustParsePrefix("127.0.0.1/32"), time.Hour); err != nil {
		t.Fatal(err)
	}
	resp, body := g.client(t).get("/")
	expectError(t, resp, body, 403, 40302)
}

// A request parked on an external auth call keeps its body, and a client
// that leaves while parked costs nothing: the sub-request is cancelled and
// no buffer leaks (the harness checks at cleanup).
func TestFilterExternalAuthParkedRequests(t *testing.T) {
	hold := make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(hold) }) }
	t.Cleanup(unblock)
	var calls atomic.Int64
	arrived := make(chan struct{})
	authSrv := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			close(arrived)
			<-hold // the first call waits until the test lets it go
		}
		w.Header().Set("X-User-Id", "u-1")
	}))
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s", r.Header.Get("X-User-Id"), b)
	}))
	g := startGateway(t, `
loops: 1
auth:
  external: {upstream: authsvc, timeout: 5s}
upstreams:
  - {name: backend, nodes: ["%s"]}
  - {name: authsvc, nodes: ["%s"]}
routes:
  - {id: ext, prefix: /, upstream: backend, external_auth: true}
`, up, authSrv)

	// The first client leaves while its request is parked.
	c := g.client(t)
	c.send("POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
	<-arrived
	c.Close()
	unblock()

	// A parked POST keeps its body, pipelined behind nothing.
	resp, err := testClient.Post(g.url("/y"), "text/plain", strings.NewReader("body-after-auth"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "u-1 body-after-auth" {
		t.Fatalf("got %d %q", resp.StatusCode, b)
	}
}
