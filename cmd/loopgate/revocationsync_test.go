// Revocations for a cluster: a credential revoked through one node's
// admin API is refused on every node, through a real redis-server
// (admin.cluster: redis), and stays on its node without the cluster.

package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/admin"
	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

const revocationSecret = "0123456789abcdef0123456789abcdef"

// startAuthNode runs a gateway on redisAddr's redis section, with the
// admin lines adminExtra and a route /keyed behind auth: a JWT signed
// with revocationSecret or the API key k-0123456789.
func startAuthNode(t *testing.T, id, redisAddr, up, adminExtra string) *apiGateway {
	t.Helper()
	dir := t.TempDir()
	g := &apiGateway{dir: dir, listen: freeAddr(t), admin: freeAddr(t)}
	g.config = filepath.Join(dir, "loopgate.yaml")
	text := fmt.Sprintf("redis: {addrs: [%q], call_timeout: 2s}\ncluster: {node_id: %s}\n", redisAddr, id) +
		apiConfig(g.listen, g.admin, filepath.Join(dir, "state.json"), up, adminExtra) +
		"  - {id: keyed, path: /keyed, upstream: backend, auth: required}\n" +
		fmt.Sprintf("auth:\n  jwt: {hs256_secret: %q}\n  api_keys: [{key: k-0123456789, consumer: ci}]\n", revocationSecret)
	if err := os.WriteFile(g.config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	return g
}

// hs256 signs claims with revocationSecret.
func hs256(t *testing.T, claims map[string]any) string {
	t.Helper()
	enc := base64.RawURLEncoding
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	signed := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString(payload)
	mac := hmac.New(sha256.New, []byte(revocationSecret))
	mac.Write([]byte(signed))
	return signed + "." + enc.EncodeToString(mac.Sum(nil))
}

// keyedStatus is the status of GET /keyed on g with credential.
func keyedStatus(t *testing.T, g *apiGateway, credential string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+g.listen+"/keyed", nil)
	req.Header.Set("Authorization", credential)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// answersWithin polls GET /keyed on g with credential until it answers
// want, failing after d, and returns how long it took.
func answersWithin(t *testing.T, g *apiGateway, credential string, want int, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for keyedStatus(t, g, credential) != want {
		if time.Since(start) > d {
			t.Fatalf("%s: /keyed did not answer %d within %s; output:\n%s", g.listen, want, d, g.logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

// A JWT admitted and cached on b, revoked on a, is refused on b at once
// (the test allows 10 s for a loaded machine, and logs the time): the
// announcement carries it, as the poll is an hour. Lifted on b, it
// is admitted on a again; an API key goes the same way. Past
// MaxRevocations a revocation is refused with 409, and while Redis is
// down with 503.
func TestClusterRevocation(t *testing.T) {
	r := redistest.Start(t)
	up := pathUpstream(t)
	extra := "  cluster: redis\n  cluster_poll: 1h\n"
	a := startAuthNode(t, "a", r.Addr(), up, extra)
	b := startAuthNode(t, "b", r.Addr(), up, extra)

	tok := "Bearer " + hs256(t, map[string]any{"sub": "alice", "jti": "tok-1", "exp": time.Now().Add(time.Hour).Unix()})
	for _, g := range []*apiGateway{a, b} {
		if code := keyedStatus(t, g, tok); code != 200 {
			t.Fatalf("%s: the token before its revocation: %d", g.listen, code)
		}
	}
	if code := keyedStatus(t, b, tok); code != 200 { // from b's cache now
		t.Fatalf("the cached token: %d", code)
	}
	body, _ := json.Marshal(map[string]string{"credential": tok})
	if status, resp, _ := call(t, a.admin, writeToken, "POST", "/revocations", string(body)); status != 200 || resp["revocations"] != 1.0 {
		t.Fatalf("POST /revocations on a: %d %v", status, resp)
	}
	if code := keyedStatus(t, a, tok); code != 401 {
		t.Fatalf("a, where it was revoked, when the API answered: %d", code)
	}
	t.Logf("b refuses the token %s after a's revocation", answersWithin(t, b, tok, 401, 10*time.Second))
	// Redis keeps it no longer than the token lives.
	score, err := r.Do("ZSCORE", "loopgate:config:revocations", jtiKey("tok-1")).ToString()
	if err != nil || score == "inf" {
		t.Errorf("the revocation's end in Redis: %q %v, want the token's exp", score, err)
	}

	if status, resp, _ := call(t, b.admin, writeToken, "DELETE", "/revocations", string(body)); status != 200 || resp["revocations"] != 0.0 {
		t.Fatalf("DELETE /revocations on b: %d %v", status, resp)
	}
	answersWithin(t, a, tok, 200, 10*time.Second)

	if status, resp, _ := call(t, b.admin, writeToken, "POST", "/revocations", `{"api_key": "k-0123456789"}`); status != 200 {
		t.Fatalf("POST /revocations of an API key on b: %d %v", status, resp)
	}
	answersWithin(t, a, "k-0123456789", 401, 10*time.Second)

	fill := "for i = 1, tonumber(ARGV[1]) do redis.call('ZADD', KEYS[1], '+inf', string.format('%032x', i)) end return 1"
	if err := r.Do("EVAL", fill, "1", "loopgate:config:revocations", strconv.Itoa(admin.MaxRevocations)).Error(); err != nil {
		t.Fatal(err)
	}
	other, _ := json.Marshal(map[string]string{"credential": "Bearer " + hs256(t, map[string]any{"sub": "x", "jti": "tok-9"})})
	if status, resp, _ := call(t, a.admin, writeToken, "POST", "/revocations", string(other)); status != 409 || resp["code"] != 40901.0 {
		t.Fatalf("a revocation past the bound: %d %v", status, resp)
	}
	r.Kill()
	if status, resp, _ := call(t, a.admin, writeToken, "POST", "/revocations", string(other)); status != 503 || resp["code"] != 50301.0 {
		t.Fatalf("a revocation while Redis is down: %d %v", status, resp)
	}
	if code := keyedStatus(t, b, "k-0123456789"); code != 401 {
		t.Fatalf("b keeps its revocations while Redis is down: %d", code)
	}
}

// jtiKey is the member a revocation of the jti is kept under in Redis
// (auth's revocationKeyOf, in hex).
func jtiKey(jti string) string {
	sum := sha256.Sum256([]byte("loopgate jti\x00" + jti))
	return hex.EncodeToString(sum[:16])
}

// A revocation whose announcement a node missed (written straight into
// Redis, never published) reaches it at its next poll; a node that takes
// a revocation by the poll refuses the cached token too. A Redis that
// comes back empty gets the node's revocations back.
func TestClusterRevocationHeals(t *testing.T) {
	r := redistest.Start(t)
	up := pathUpstream(t)
	b := startAuthNode(t, "b", r.Addr(), up, "  cluster: redis\n  cluster_poll: 200ms\n")
	tok := "Bearer " + hs256(t, map[string]any{"sub": "bob", "jti": "tok-2"})
	if code := keyedStatus(t, b, tok); code != 200 {
		t.Fatalf("the token before its revocation: %d", code)
	}
	if err := r.Do("ZADD", "loopgate:config:revocations", "+inf", jtiKey("tok-2")).Error(); err != nil {
		t.Fatal(err)
	}
	if err := r.Do("INCR", "loopgate:config:revocations:version").Error(); err != nil {
		t.Fatal(err)
	}
	t.Logf("b refuses the token %s after the unannounced revocation", answersWithin(t, b, tok, 401, 10*time.Second))

	r.Kill()
	r.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for {
		if score, err := r.Do("ZSCORE", "loopgate:config:revocations", jtiKey("tok-2")).ToString(); err == nil && score == "inf" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Redis, restarted empty, was not given b's revocation; output:\n%s", b.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if code := keyedStatus(t, b, tok); code != 401 {
		t.Fatalf("b after Redis came back: %d", code)
	}
}

// Without admin.cluster, a revocation stays on its node even with a redis
// section: Redis holds nothing of it and the other node admits the token.
func TestRevocationLocalWithoutCluster(t *testing.T) {
	r := redistest.Start(t)
	up := pathUpstream(t)
	a := startAuthNode(t, "a", r.Addr(), up, "")
	b := startAuthNode(t, "b", r.Addr(), up, "")
	tok := "Bearer " + hs256(t, map[string]any{"sub": "carol", "jti": "tok-3"})
	body, _ := json.Marshal(map[string]string{"credential": tok})
	if status, resp, _ := call(t, a.admin, writeToken, "POST", "/revocations", string(body)); status != 200 || resp["revocations"] != 1.0 {
		t.Fatalf("POST /revocations on a: %d %v", status, resp)
	}
	if code := keyedStatus(t, a, tok); code != 401 {
		t.Fatalf("a: %d", code)
	}
	if code := keyedStatus(t, b, tok); code != 200 {
		t.Fatalf("b, without the cluster: %d", code)
	}
	if n, err := r.Do("EXISTS", "loopgate:config:revocations").AsInt64(); err != nil || n != 0 {
		t.Errorf("Redis holds revocations without the cluster: %d %v", n, err)
	}
}

// A user revoked through a's API is refused on b (the test allows 10 s
// for a loaded machine), by a token b had cached and by one it never saw,
// while another user's token passes; lifted on b, the user is admitted on
// a again. Without the cluster a user's revocation stays on its node.
func TestClusterRevokeUser(t *testing.T) {
	r := redistest.Start(t)
	up := pathUpstream(t)
	extra := "  cluster: redis\n  cluster_poll: 1h\n"
	a := startAuthNode(t, "a", r.Addr(), up, extra)
	b := startAuthNode(t, "b", r.Addr(), up, extra)
	cached := "Bearer " + hs256(t, map[string]any{"sub": "dave", "jti": "tok-5"})
	fresh := "Bearer " + hs256(t, map[string]any{"sub": "dave", "jti": "tok-6"})
	other := "Bearer " + hs256(t, map[string]any{"sub": "erin"})
	if code := keyedStatus(t, b, cached); code != 200 {
		t.Fatalf("before: %d", code)
	}
	if status, resp, _ := call(t, a.admin, writeToken, "POST", "/revocations", `{"user": "dave"}`); status != 200 || resp["revocations"] != 1.0 {
		t.Fatalf("POST /revocations of a user on a: %d %v", status, resp)
	}
	t.Logf("b refuses the user's cached token %s after a's revocation", answersWithin(t, b, cached, 401, 10*time.Second))
	for cred, want := range map[string]int{fresh: 401, other: 200} {
		if code := keyedStatus(t, b, cred); code != want {
			t.Errorf("b: %d, want %d", code, want)
		}
	}
	if status, resp, _ := call(t, b.admin, writeToken, "DELETE", "/revocations", `{"user": "dave"}`); status != 200 || resp["revocations"] != 0.0 {
		t.Fatalf("DELETE /revocations of a user on b: %d %v", status, resp)
	}
	answersWithin(t, a, fresh, 200, 10*time.Second)
	if status, resp, _ := call(t, a.admin, writeToken, "POST", "/revocations", `{"user": "dave", "api_key": "k-0123456789"}`); status != 400 {
		t.Fatalf("two names at once: %d %v", status, resp)
	}

	local := startAuthNode(t, "c", r.Addr(), up, "")
	if status, resp, _ := call(t, local.admin, writeToken, "POST", "/revocations", `{"user": "erin"}`); status != 200 || resp["revocations"] != 1.0 {
		t.Fatalf("POST /revocations of a user without the cluster: %d %v", status, resp)
	}
	if code := keyedStatus(t, local, other); code != 401 {
		t.Fatalf("the node that revoked the user: %d", code)
	}
	if code := keyedStatus(t, a, other); code != 200 {
		t.Fatalf("another node, the revocation local: %d", code)
	}
}
