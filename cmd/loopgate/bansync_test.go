// Bans and revocations beyond one process's life: without a cluster they
// survive a restart (and a kill -9) in the runtime state file beside
// admin.state; with admin.cluster: redis a ban on one node is enforced on
// every node, through a real redis-server.

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/admin"
	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

func TestAdminBansAndRevocationsSurviveARestart(t *testing.T) {
	dir := t.TempDir()
	listen, adminAddr := freeAddr(t), freeAddr(t)
	state := filepath.Join(dir, "state.json")
	cfg := apiConfig(listen, adminAddr, state, pathUpstream(t), "") +
		"  - {id: keyed, path: /keyed, upstream: backend, auth: required}\n" +
		"auth:\n  api_keys: [{key: k-0123456789, consumer: ci}, {key: k-other-0123, consumer: ci2}]\n"
	g := &apiGateway{dir: dir, listen: listen, admin: adminAddr, config: writeConfig(t, cfg)}
	g.start(t)
	for _, w := range []struct{ path, body string }{
		{"/bans", `{"prefix": "127.0.0.0/8", "ttl": "1h"}`},
		{"/bans", `{"prefix": "2001:db8::/32", "ttl": "1h"}`},
		{"/revocations", `{"api_key": "k-0123456789"}`},
		{"/revocations", `{"api_key": "k-other-0123"}`},
	} {
		if status, body, _ := call(t, g.admin, writeToken, "POST", w.path, w.body); status != 200 {
			t.Fatalf("POST %s: %d %v", w.path, status, body)
		}
	}
	if status, body, _ := call(t, g.admin, writeToken, "DELETE", "/revocations", `{"api_key": "k-other-0123"}`); status != 200 {
		t.Fatalf("DELETE /revocations: %d %v", status, body)
	}
	if _, err := os.Stat(admin.RuntimePath(state)); err != nil {
		t.Fatalf("no runtime state file: %v", err)
	}
	// kill -9: every answered write is on disk already.
	g.cmd.Process.Kill()
	<-g.exited
	g.start(t)
	if code, body := get(t, g.listen, "/base"); code != 403 || !strings.Contains(body, "40302") {
		t.Fatalf("the ban after a restart: %d %s", code, body)
	}
	_, body, _ := call(t, g.admin, readToken, "GET", "/bans", "")
	if bans := body["bans"].([]any); len(bans) != 2 {
		t.Fatalf("bans after a restart: %v", bans)
	}
	_, body, _ = call(t, g.admin, readToken, "GET", "/revocations", "")
	if body["revocations"] != 1.0 {
		t.Fatalf("revocations after a restart: %v (want the one not lifted)", body)
	}
	if status, body, _ := call(t, g.admin, writeToken, "DELETE", "/bans/127.0.0.0/8", ""); status != 200 {
		t.Fatalf("DELETE /bans: %d %v", status, body)
	}
	if code := keyedStatusAt(t, g.listen, "k-0123456789"); code != 401 {
		t.Fatalf("the revoked key after a restart: %d", code)
	}
	if code := keyedStatusAt(t, g.listen, "k-other-0123"); code != 200 {
		t.Fatalf("the key whose revocation was lifted, after a restart: %d", code)
	}
	// A runtime state file that does not decode stops the start, by name.
	g.stop(t)
	os.WriteFile(admin.RuntimePath(state), []byte("{broken"), 0o600)
	code, _, stderr := runCommand(t, "-config", g.config)
	if code == 0 || !strings.Contains(stderr, admin.RuntimePath(state)) {
		t.Fatalf("a broken runtime state file: exit %d, %s", code, stderr)
	}
}

// keyedStatusAt is GET /keyed on listen with credential.
func keyedStatusAt(t *testing.T, listen, credential string) int {
	return keyedStatus(t, &apiGateway{listen: listen}, credential)
}

// A ban on a is enforced on b at once (the announcement carries it; the
// poll is an hour; the test allows 10 s for a loaded machine), lifted on
// b it is lifted on a; while Redis is down the nodes keep their bans and a
// ban answers 503; Redis back empty gets the nodes' bans again.
func TestClusterBans(t *testing.T) {
	r := redistest.Start(t)
	up := pathUpstream(t)
	extra := "  cluster: redis\n  cluster_poll: 1h\n"
	a := startAuthNode(t, "a", r.Addr(), up, extra)
	b := startAuthNode(t, "b", r.Addr(), up, extra)
	banned := func(g *apiGateway) bool { code, _, _ := adminGet(g.listen, "/base"); return code == 403 }
	within := func(g *apiGateway, want bool) time.Duration {
		t.Helper()
		start := time.Now()
		for banned(g) != want {
			if time.Since(start) > 10*time.Second {
				t.Fatalf("%s: banned %v, want %v after 10s; output:\n%s", g.listen, !want, want, g.logs)
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}
	if status, body, _ := call(t, a.admin, writeToken, "POST", "/bans", `{"prefix": "127.0.0.1/8", "ttl": "1h"}`); status != 200 || body["banned"] != "127.0.0.0/8" {
		t.Fatalf("POST /bans on a: %d %v", status, body)
	}
	if !banned(a) {
		t.Fatal("a, where the ban was made, when the API answered: not banned")
	}
	t.Logf("b bans after %s", within(b, true))
	_, body, _ := call(t, b.admin, readToken, "GET", "/bans", "")
	if bans := body["bans"].([]any); len(bans) != 1 || bans[0].(map[string]any)["prefix"] != "127.0.0.0/8" {
		t.Fatalf("b's bans: %v", bans)
	}
	if status, body, _ := call(t, b.admin, writeToken, "DELETE", "/bans/127.0.0.0/8", ""); status != 200 {
		t.Fatalf("DELETE /bans on b: %d %v", status, body)
	}
	within(a, false)
	if status, _, _ := call(t, b.admin, writeToken, "DELETE", "/bans/127.0.0.0/8", ""); status != 404 {
		t.Fatalf("a second unban: %d", status)
	}

	if status, body, _ := call(t, b.admin, writeToken, "POST", "/bans", `{"prefix": "127.0.0.0/8", "ttl": "1h"}`); status != 200 {
		t.Fatalf("POST /bans on b: %d %v", status, body)
	}
	within(a, true)
	r.Kill()
	if status, body, _ := call(t, a.admin, writeToken, "POST", "/bans", `{"prefix": "10.0.0.0/8", "ttl": "1h"}`); status != 503 || body["code"] != 50301.0 {
		t.Fatalf("a ban while Redis is down: %d %v", status, body)
	}
	if !banned(a) || !banned(b) {
		t.Fatal("a node lost its bans while Redis is down")
	}
	// Back, empty: the first node to sync seeds it, and a write goes
	// through again.
	r.Restart()
	waitUntil(t, "a ban after Redis came back", a.exited, a.logs, func() bool {
		status, _, _ := call(t, a.admin, writeToken, "POST", "/bans", `{"prefix": "10.0.0.0/8", "ttl": "1h"}`)
		return status == 200
	})
	if n, err := r.Do("ZCARD", "loopgate:config:bans").AsInt64(); err != nil || n != 2 {
		t.Fatalf("Redis holds %d bans (%v), want the seeded one and the new one", n, err)
	}
	if !banned(a) || !banned(b) {
		t.Fatal("a node lost its bans when Redis came back empty")
	}
}
