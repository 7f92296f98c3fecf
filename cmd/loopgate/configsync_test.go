// One config for a cluster: two (then three) loopgate processes sharing
// the API's changes and the versions through a real redis-server
// (admin.cluster: redis).

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

// startClusterNode runs a gateway with admin.cluster: redis against
// redisAddr, named id.
func startClusterNode(t *testing.T, id, redisAddr, up string) *apiGateway {
	t.Helper()
	return startClusterNodeWith(t, id, fmt.Sprintf("redis: {addrs: [%q], call_timeout: 2s}\n", redisAddr), up)
}

// startClusterNodeWith is startClusterNode with redisYAML as the redis
// section.
func startClusterNodeWith(t *testing.T, id, redisYAML, up string) *apiGateway {
	t.Helper()
	dir := t.TempDir()
	g := &apiGateway{dir: dir, listen: freeAddr(t), admin: freeAddr(t)}
	g.config = filepath.Join(dir, "loopgate.yaml")
	// The routes come last, so a test can append one.
	text := redisYAML + fmt.Sprintf("cluster: {node_id: %s}\n", id) +
		apiConfig(g.listen, g.admin, filepath.Join(dir, "state.json"), up, "  cluster: redis\n")
	if err := os.WriteFile(g.config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	return g
}

// servesWithin polls path on g until it answers want, failing after d.
func servesWithin(t *testing.T, g *apiGateway, path string, want int, d time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		if code, _, err := adminGet(g.listen, path); err == nil && code == want {
			return time.Since(start)
		}
		if time.Since(start) > d {
			t.Fatalf("%s: GET %s did not answer %d within %s; output:\n%s", g.listen, path, want, d, g.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestClusterConfigSync(t *testing.T) {
	r := redistest.Start(t)
	up := pathUpstream(t)
	a := startClusterNode(t, "a", r.Addr(), up)
	b := startClusterNode(t, "b", r.Addr(), up)

	// A write on a is served by b, within a poll (1 s) or at once by the
	// announcement; the test allows 10 s for a loaded machine.
	if status, body, _ := call(t, a.admin, writeToken, "PUT", "/config/routes/one", `{"path": "/one", "upstream": "backend"}`); status != 201 {
		t.Fatalf("PUT on a: %d %v", status, body)
	}
	t.Logf("b serves a's write after %s", servesWithin(t, b, "/one", 200, 10*time.Second))
	_, body, _ := call(t, b.admin, readToken, "GET", "/config/versions", "")
	if v := body["versions"].([]any)[0].(map[string]any); v["source"] != "cluster" || v["token"] != "ops" || v["action"] != "PUT /config/routes/one on a" {
		t.Errorf("b's latest version: %v", v)
	}

	// Writers on both nodes, each with If-Match, lose nothing.
	var wg sync.WaitGroup
	const each = 4
	for w, g := range []*apiGateway{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				for attempt := 0; ; attempt++ {
					_, body, etag := call(t, g.admin, readToken, "GET", "/config/upstreams/backend", "")
					nodes := append(body["nodes"].([]any), fmt.Sprintf("127.0.0.9:%d", 2000+100*w+i))
					data, _ := json.Marshal(map[string]any{"nodes": nodes})
					status, resp, _ := call(t, g.admin, writeToken, "PUT", "/config/upstreams/backend/nodes", string(data), "If-Match", etag)
					if status == 200 {
						break
					}
					if status != 409 || attempt > 50 {
						t.Errorf("PUT nodes on %s: %d %v", g.admin, status, resp)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, g := range []*apiGateway{a, b} {
		waitUntil(t, "both writers' nodes", g.exited, g.logs, func() bool {
			_, body, _ := call(t, g.admin, readToken, "GET", "/config/upstreams/backend", "")
			return len(body["nodes"].([]any)) == 1+2*each
		})
	}

	// Redis killed: both keep serving, writes answer 503.
	// (backend now lists the writers' eight nodes, which nothing listens
	// on, so a proxied request may get a 502 after its one retry: what
	// counts is that the route is still there.)
	r.Kill()
	for _, g := range []*apiGateway{a, b} {
		if code, _ := get(t, g.listen, "/one"); code == 404 || code == 0 {
			t.Fatalf("%s with Redis down: GET /one %d", g.listen, code)
		}
		if status, body, _ := call(t, g.admin, writeToken, "PUT", "/config/routes/two", `{"path": "/two", "upstream": "backend"}`); status != 503 {
			t.Fatalf("a write with Redis down: %d %v", status, body)
		}
	}
	if code, _ := get(t, a.listen, "/two"); code != 404 {
		t.Fatalf("a refused write serves")
	}
	// Redis back, empty: a node seeds it with its version, and a write on
	// b reaches a again.
	r.Restart()
	waitUntil(t, "a write after Redis came back", b.exited, b.logs, func() bool {
		status, _, _ := call(t, b.admin, writeToken, "PUT", "/config/routes/two", `{"path": "/two", "upstream": "backend"}`)
		return status == 201 || status == 200
	})
	servesWithin(t, a, "/two", 200, 10*time.Second)
	if status, body, _ := call(t, a.admin, readToken, "GET", "/config/routes/one", ""); status != 200 {
		t.Fatalf("a lost /one when Redis came back empty: %d %v", status, body)
	}
	// Converged: both nodes on Redis's version, with the same config.
	waitUntil(t, "both nodes on Redis's version", a.exited, a.logs, func() bool {
		want, err := r.Do("GET", "loopgate:config:version").ToString()
		if err != nil {
			return false
		}
		for _, g := range []*apiGateway{a, b} {
			if _, body, _ := call(t, g.admin, readToken, "GET", "/config/versions", ""); fmt.Sprint(body["latest"]) != want {
				return false
			}
		}
		return true
	})
	_, ca, _ := call(t, a.admin, readToken, "GET", "/config/routes", "")
	_, cb, _ := call(t, b.admin, readToken, "GET", "/config/routes", "")
	if fmt.Sprint(ca) != fmt.Sprint(cb) {
		t.Fatalf("the nodes' routes differ after Redis came back:\na %v\nb %v", ca, cb)
	}

	// A rollback on a, served by b; and a node that starts later takes
	// the latest version.
	_, body, _ = call(t, a.admin, readToken, "GET", "/config/versions", "")
	latest := body["latest"].(float64)
	if status, body, _ := call(t, a.admin, writeToken, "POST", "/config/rollback", fmt.Sprintf(`{"version": %d}`, int(latest)-1)); status != 200 {
		t.Fatalf("rollback on a: %d %v", status, body)
	}
	servesWithin(t, b, "/two", 404, 10*time.Second)
	c := startClusterNode(t, "c", r.Addr(), up)
	if code, _ := get(t, c.listen, "/one"); code != 200 {
		t.Fatalf("a node started later does not serve /one: %d", code)
	}
	if code, _ := get(t, c.listen, "/two"); code != 404 {
		t.Fatalf("a node started later serves the rolled-back /two")
	}

	// A reload of c's own file changes c alone, and is no cluster version.
	_, body, _ = call(t, c.admin, readToken, "GET", "/config/versions", "")
	before := body["latest"]
	text, _ := os.ReadFile(c.config)
	os.WriteFile(c.config, append(text, "  - {id: local, path: /local, upstream: backend}\n"...), 0o600)
	c.cmd.Process.Signal(syscall.SIGHUP)
	servesWithin(t, c, "/local", 200, 10*time.Second)
	_, body, _ = call(t, c.admin, readToken, "GET", "/config/versions", "")
	if body["latest"] != before {
		t.Errorf("c's file reload made version %v (was %v)", body["latest"], before)
	}
	if code, _ := get(t, a.listen, "/local"); code != 404 {
		t.Errorf("c's file reload reached a")
	}
	if code, _ := get(t, c.listen, "/one"); code != 200 {
		t.Errorf("c lost the cluster's /one on its reload")
	}
}
