// The config API through the binary: tokens, resource writes that serve at
// once, If-Match, versions and rollback, the state file across restarts
// and kill -9, and how the file and the API's changes combine.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	writeToken = "write-token-0123456789"
	readToken  = "read-token-0123456789"
)

// apiGateway is a gateway with admin tokens and a state file.
type apiGateway struct {
	*gateway
	dir, config, listen, admin string
}

// apiConfig is the config of an apiGateway; extra goes under admin.
func apiConfig(listen, admin, state, up, extra string) string {
	return fmt.Sprintf(`listen: %s
admin:
  address: %s
  state: %s
  tokens:
    - {name: ops, role: write, token: %s}
    - {name: viewer, role: read, token: %s}
  open_reads: [/readyz]
%sloops: 1
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: base, path: /base, upstream: backend}
`, listen, admin, state, writeToken, readToken, extra, up)
}

func startAPI(t *testing.T, up string) *apiGateway {
	t.Helper()
	dir := t.TempDir()
	g := &apiGateway{dir: dir, listen: freeAddr(t), admin: freeAddr(t)}
	g.config = filepath.Join(dir, "loopgate.yaml")
	if err := os.WriteFile(g.config, []byte(apiConfig(g.listen, g.admin, filepath.Join(dir, "state.json"), up, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	return g
}

// start runs (or runs again) the binary on g's config and waits until it
// is ready.
func (g *apiGateway) start(t *testing.T) {
	t.Helper()
	g.gateway = startProcess(t, "-config", g.config)
	waitUntil(t, "/readyz to answer 200", g.exited, g.logs, func() bool {
		code, _, err := adminGet(g.admin, "/readyz")
		return err == nil && code == 200
	})
}

// call sends one admin request with token ("" for none) and a JSON body
// ("" for none), and returns the status, the decoded body and the ETag.
func call(t *testing.T, admin, token, method, path, body string, headers ...string) (int, map[string]any, string) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+admin+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var m map[string]any
	json.Unmarshal(data, &m)
	if m == nil {
		m = map[string]any{"raw": string(data)}
	}
	return resp.StatusCode, m, resp.Header.Get("ETag")
}

// get requests path on the client port and returns the status and body.
func get(t *testing.T, listen, path string) (int, string) {
	t.Helper()
	code, body, err := adminGet(listen, path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return code, body
}

// pathUpstream answers every request with its path.
func pathUpstream(t *testing.T) string {
	return serveUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up:"+r.URL.Path) })
}

// The refusals: no token, a read token, a cross-site form, a
// wrong token; and what a read token and open_reads may still do.
func TestAdminAPIRefusesWritesWithoutAWriteToken(t *testing.T) {
	g := startAPI(t, pathUpstream(t))
	route := `{"path": "/new", "upstream": "backend"}`
	for _, c := range []struct {
		name    string
		token   string
		headers []string
		status  int
		code    float64
	}{
		{"no token", "", nil, 401, 40101},
		{"a token that matches none", "write-token-0123456788", nil, 401, 40102},
		{"a read token", readToken, nil, 403, 40301},
		{"a cross-site page with the write token", writeToken, []string{"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 403, 40303},
		// A page's form can carry no bearer token.
		{"a form post", "", []string{"Content-Type", "application/x-www-form-urlencoded"}, 403, 40304},
	} {
		if status, body, _ := call(t, g.admin, c.token, "PUT", "/config/routes/new", route, c.headers...); status != c.status || body["code"] != c.code {
			t.Errorf("%s: %d %v, want %d with code %v", c.name, status, body, c.status, c.code)
		}
	}
	if code, body := get(t, g.listen, "/new"); code != 404 || !strings.Contains(body, "40401") {
		t.Fatalf("a refused write was applied: GET /new %d %s", code, body)
	}
	for _, c := range []struct {
		token, path string
		status      int
	}{
		{"", "/readyz", 200}, // open_reads
		{"", "/metrics", 401},
		{"", "/config", 401},
		{readToken, "/config", 200},
		{readToken, "/metrics", 200},
	} {
		if status, _, _ := call(t, g.admin, c.token, "GET", c.path, ""); status != c.status {
			t.Errorf("GET %s with token %q: %d, want %d", c.path, c.token, status, c.status)
		}
	}
	if status, body, _ := call(t, g.admin, writeToken, "PUT", "/config/routes/new", route); status != 201 {
		t.Fatalf("the write token: %d %v", status, body)
	}
	if code, body := get(t, g.listen, "/new"); code != 200 || body != "up:/new" {
		t.Fatalf("GET /new after the write: %d %q", code, body)
	}
}

// The admin port beyond loopback with no token does not start, and says
// why; with a token from an environment variable it does.
func TestAdminBeyondLoopbackNeedsAToken(t *testing.T) {
	exposed := writeConfig(t, "listen: 127.0.0.1:0\nadmin: 0.0.0.0:0\nloops: 1\n")
	for _, args := range [][]string{{"-config", exposed}, {"-config", exposed, "-check"}} {
		code, _, stderr := runCommand(t, args...)
		if code != 1 || !strings.Contains(stderr, "is not loopback, and admin.tokens is empty") {
			t.Fatalf("%v: exit %d, stderr %q; want 1 and the reason", args, code, stderr)
		}
	}

	cfg := writeConfig(t, "listen: 127.0.0.1:0\nadmin:\n  address: 0.0.0.0:0\n  tokens: [{name: ops, role: write, token_env: LG_TEST_TOKEN}]\nloops: 1\n")
	code, _, stderr := runCommand(t, "-config", cfg, "-check")
	if code != 1 || !strings.Contains(stderr, "admin.tokens[0].token_env: the environment variable LG_TEST_TOKEN is unset or empty") {
		t.Fatalf("unset token_env: exit %d, stderr %q", code, stderr)
	}
	t.Setenv("LG_TEST_TOKEN", writeToken)
	g := startProcess(t, "-config", cfg)
	_, admin := g.serving(t)
	_, port, _ := net.SplitHostPort(admin)
	admin = "127.0.0.1:" + port
	if c, err := net.Dial("tcp", "[::1]:"+port); err == nil { // 0.0.0.0 binds IPv4 only
		c.Close()
		t.Errorf("admin: 0.0.0.0 accepted a connection on [::1]")
	}
	if status, _, _ := call(t, admin, "", "GET", "/config", ""); status != 401 {
		t.Errorf("GET /config without the token: %d", status)
	}
	if status, body, _ := call(t, admin, writeToken, "GET", "/config", ""); status != 200 {
		t.Errorf("GET /config with the token from the environment: %d %v", status, body)
	} else if tok := body["config"].(map[string]any)["admin"].(map[string]any)["tokens"].([]any)[0].(map[string]any); tok["token_env"] != "LG_TEST_TOKEN" || tok["token"] != nil {
		t.Errorf("GET /config shows the token as %v", tok)
	}
}

// Writes serve at once, the config refuses what it refuses with the field
// named, GET /config is the effective config with secrets redacted, every
// write is a version with a diff and an audit line, and a rollback restores
// the old routes as a new version.
func TestAdminAPIWritesVersionsAndRollback(t *testing.T) {
	g := startAPI(t, pathUpstream(t))
	status, body, etag := call(t, g.admin, writeToken, "POST", "/config/routes", `{"id": "users", "path": "/users", "upstream": "backend"}`)
	if status != 201 || body["version"] != 2.0 || etag != `"2"` || body["changes"] != "routes added users" {
		t.Fatalf("POST /config/routes: %d %v %s", status, body, etag)
	}
	if code, body := get(t, g.listen, "/users"); code != 200 || body != "up:/users" {
		t.Fatalf("GET /users: %d %q", code, body)
	}
	// The config's own checks, with the field named.
	status, body, _ = call(t, g.admin, writeToken, "PUT", "/config/routes/bad", `{"path": "/bad", "upstream": "nowhere"}`)
	if status != 422 || body["code"] != 42201.0 || !strings.Contains(fmt.Sprint(body["errors"]), `routes[2] (id "bad").upstream: unknown upstream "nowhere"`) {
		t.Fatalf("a route to an unknown upstream: %d %v", status, body)
	}
	status, body, _ = call(t, g.admin, writeToken, "PATCH", "/config/upstreams/backend", `{"connect_timeout": "fast"}`)
	if status != 422 || !strings.Contains(fmt.Sprint(body["errors"]), `upstreams[0].connect_timeout`) {
		t.Fatalf("a bad duration: %d %v", status, body)
	}
	if status, body, _ = call(t, g.admin, writeToken, "PUT", "/config/routes/x", `{"id": "y", "path": "/x", "upstream": "backend"}`); status != 400 || !strings.HasPrefix(body["message"].(string), "id: ") {
		t.Fatalf("an id that differs from the path: %d %v", status, body)
	}
	if status, body, _ = call(t, g.admin, writeToken, "PUT", "/config/routes/x", `{"path": `); status != 400 {
		t.Fatalf("a body that is not JSON: %d %v", status, body)
	}
	// The new route moves to its own upstream, with two weighted nodes.
	other := serveUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "other:"+r.URL.Path) })
	if status, body, _ = call(t, g.admin, writeToken, "PUT", "/config/upstreams/other", fmt.Sprintf(`{"nodes": [{"addr": %q, "weight": 3}]}`, other)); status != 201 {
		t.Fatalf("PUT /config/upstreams/other: %d %v", status, body)
	}
	if status, body, _ = call(t, g.admin, writeToken, "PATCH", "/config/routes/users", `{"upstream": "other"}`); status != 200 || body["version"] != 4.0 {
		t.Fatalf("PATCH /config/routes/users: %d %v", status, body)
	}
	if code, body := get(t, g.listen, "/users"); code != 200 || body != "other:/users" {
		t.Fatalf("GET /users after the patch: %d %q", code, body)
	}
	if status, body, _ = call(t, g.admin, readToken, "GET", "/config/routes/users", ""); status != 200 || body["upstream"] != "other" {
		t.Fatalf("GET /config/routes/users: %d %v", status, body)
	}
	// The effective config: defaults filled in, tokens redacted.
	status, body, _ = call(t, g.admin, readToken, "GET", "/config", "")
	cfg, _ := body["config"].(map[string]any)
	if status != 200 || cfg == nil {
		t.Fatalf("GET /config: %d %v", status, body)
	}
	ups := cfg["upstreams"].([]any)
	if u := ups[1].(map[string]any); u["name"] != "other" || u["connect_timeout"] != "1s" || u["balancer"] != "weighted_round_robin" {
		t.Errorf("GET /config upstream other: %v, want defaults filled in", u)
	}
	if tok := cfg["admin"].(map[string]any)["tokens"].([]any)[0].(map[string]any)["token"]; tok != "<redacted>" {
		t.Errorf("GET /config shows a token as %v", tok)
	}
	// Versions, their diffs, the audit lines.
	status, body, _ = call(t, g.admin, readToken, "GET", "/config/versions", "")
	vs := body["versions"].([]any)
	if status != 200 || len(vs) != 4 || vs[0].(map[string]any)["token"] != "ops" || vs[3].(map[string]any)["source"] != "file" {
		t.Fatalf("GET /config/versions: %d %v", status, body)
	}
	status, body, _ = call(t, g.admin, readToken, "GET", "/config/versions/4/diff", "")
	ch := body["changes"].([]any)[0].(map[string]any)
	if status != 200 || ch["op"] != "changed" || ch["before"].(map[string]any)["upstream"] != "backend" || ch["after"].(map[string]any)["upstream"] != "other" {
		t.Fatalf("GET /config/versions/4/diff: %d %v", status, body)
	}
	waitUntil(t, "the audit lines", g.exited, g.logs, func() bool { return len(logEvents(g.logs.String(), "admin_write")) == 3 })
	if a := logEvents(g.logs.String(), "admin_write")[2]; a["token"] != "ops" || a["from_version"] != 3.0 || a["to_version"] != 4.0 ||
		a["trigger"] != "PATCH /config/routes/users" || a["changes"] != "routes changed users" {
		t.Errorf("audit line %v", a)
	}
	// Rollback to version 2: /users on backend again, the other upstream
	// gone; the rollback is version 5.
	if status, body, _ = call(t, g.admin, writeToken, "POST", "/config/rollback", `{"version": 2}`); status != 200 || body["version"] != 5.0 {
		t.Fatalf("POST /config/rollback: %d %v", status, body)
	}
	if code, body := get(t, g.listen, "/users"); code != 200 || body != "up:/users" {
		t.Fatalf("GET /users after the rollback: %d %q", code, body)
	}
	if status, _, _ = call(t, g.admin, readToken, "GET", "/config/upstreams/other", ""); status != 404 {
		t.Errorf("upstream other after the rollback: %d", status)
	}
	status, body, _ = call(t, g.admin, readToken, "GET", "/config/versions/5", "")
	if v := body["version"].(map[string]any); status != 200 || v["action"] != "rollback to 2" || v["changes"] != "routes changed users; upstreams removed other" {
		t.Fatalf("GET /config/versions/5: %d %v", status, body)
	}
	// A route's rate limits on their own: one request, then 429.
	if status, body, _ = call(t, g.admin, writeToken, "PUT", "/config/routes/users/rate_limits",
		`{"rate_limits": [{"key": "route", "rate": 0.001, "burst": 1}]}`); status != 200 || body["version"] != 6.0 {
		t.Fatalf("PUT rate_limits: %d %v", status, body)
	}
	if code, _ := get(t, g.listen, "/users"); code != 200 {
		t.Fatalf("the first request under the new limit: %d", code)
	}
	if code, body := get(t, g.listen, "/users"); code != 429 || !strings.Contains(body, "42902") {
		t.Fatalf("the second request under the new limit: %d %s", code, body)
	}
	if status, body, _ = call(t, g.admin, readToken, "GET", "/config/routes/users/rate_limits", ""); status != 200 || len(body["rate_limits"].([]any)) != 1 {
		t.Fatalf("GET rate_limits: %d %v", status, body)
	}
	if status, body, _ = call(t, g.admin, writeToken, "DELETE", "/config/routes/users/rate_limits", ""); status != 200 || body["version"] != 7.0 {
		t.Fatalf("DELETE rate_limits: %d %v", status, body)
	}
	if code, _ := get(t, g.listen, "/users"); code != 200 {
		t.Fatalf("a request after the limit was deleted: %d", code)
	}
	// Deleting.
	if status, body, _ = call(t, g.admin, writeToken, "DELETE", "/config/routes/users", ""); status != 200 || body["version"] != 8.0 {
		t.Fatalf("DELETE: %d %v", status, body)
	}
	if code, _ := get(t, g.listen, "/users"); code != 404 {
		t.Fatalf("GET /users after the delete: %d", code)
	}
	if status, _, _ = call(t, g.admin, writeToken, "DELETE", "/config/routes/users", ""); status != 404 {
		t.Fatalf("DELETE again: %d", status)
	}
}

// logEvents are the error log's JSON lines of one event.
func logEvents(logs, event string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(logs, "\n") {
		var m map[string]any
		if strings.HasPrefix(line, "{") && json.Unmarshal([]byte(line), &m) == nil && m["event"] == event {
			out = append(out, m)
		}
	}
	return out
}

// Writers that each read the version and write with If-Match lose no
// update: a stale one gets 409 and tries again on the new version.
func TestAdminAPIIfMatchLosesNoUpdate(t *testing.T) {
	g := startAPI(t, pathUpstream(t))
	const writers, each = 4, 5
	var wg sync.WaitGroup
	var mu sync.Mutex
	conflicts := 0
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				for {
					// Read-modify-write of one list: the route's methods.
					_, body, etag := call(t, g.admin, readToken, "GET", "/config/upstreams/backend", "")
					nodes := body["nodes"].([]any)
					nodes = append(nodes, map[string]any{"addr": fmt.Sprintf("127.0.0.%d:%d", w+2, 1000+i), "weight": 1})
					data, _ := json.Marshal(map[string]any{"nodes": nodes})
					status, resp, _ := call(t, g.admin, writeToken, "PUT", "/config/upstreams/backend/nodes", string(data), "If-Match", etag)
					if status == 409 {
						mu.Lock()
						conflicts++
						mu.Unlock()
						continue
					}
					if status != 200 {
						t.Errorf("PUT nodes: %d %v", status, resp)
						return
					}
					break
				}
			}
		}()
	}
	wg.Wait()
	_, body, _ := call(t, g.admin, readToken, "GET", "/config/upstreams/backend", "")
	if n := len(body["nodes"].([]any)); n != 1+writers*each {
		t.Fatalf("%d nodes after %d writes, want %d: an update was lost (%d conflicts)", n, writers*each, 1+writers*each, conflicts)
	}
	t.Logf("%d conflicts answered 409 and retried", conflicts)
}

// The API's changes survive a restart. The file is the base: a SIGHUP
// after the file changed applies the file's change and keeps the API's;
// the API's resource wins over the file's of the same id; POST
// /config/reset goes back to the file alone.
func TestAdminAPIStateSurvivesRestartAndOverlaysTheFile(t *testing.T) {
	up := pathUpstream(t)
	g := startAPI(t, up)
	if status, body, _ := call(t, g.admin, writeToken, "PUT", "/config/routes/api", `{"path": "/api", "upstream": "backend"}`); status != 201 {
		t.Fatalf("PUT: %d %v", status, body)
	}
	// The API replaces the file's route base: it now serves /base2.
	if status, body, _ := call(t, g.admin, writeToken, "PATCH", "/config/routes/base", `{"path": "/base2"}`); status != 200 {
		t.Fatalf("PATCH: %d %v", status, body)
	}
	g.stop(t)
	g.start(t)
	if code, body := get(t, g.listen, "/api"); code != 200 || body != "up:/api" {
		t.Fatalf("GET /api after a restart: %d %q; output:\n%s", code, body, g.logs)
	}
	if code, _ := get(t, g.listen, "/base2"); code != 200 {
		t.Fatalf("GET /base2 after a restart: %d", code)
	}
	_, body, _ := call(t, g.admin, readToken, "GET", "/config/versions", "")
	if body["latest"] != 3.0 {
		t.Fatalf("versions after a restart: %v", body)
	}
	// The file gains a route: a SIGHUP applies it, over the API's changes.
	text, _ := os.ReadFile(g.config)
	os.WriteFile(g.config, append(text, "  - {id: filed, path: /filed, upstream: backend}\n"...), 0o600)
	g.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, "the reload", g.exited, g.logs, func() bool { c, _, _ := adminGet(g.listen, "/filed"); return c == 200 })
	if code, _ := get(t, g.listen, "/api"); code != 200 {
		t.Fatalf("GET /api after the SIGHUP: %d", code)
	}
	if code, _ := get(t, g.listen, "/base2"); code != 200 {
		t.Fatalf("GET /base2 after the SIGHUP: the API's route lost to the file's")
	}
	_, body, _ = call(t, g.admin, readToken, "GET", "/config/versions", "")
	if v := body["versions"].([]any)[0].(map[string]any); v["number"] != 4.0 || v["source"] != "file" || v["changes"] != "routes added filed" {
		t.Fatalf("the reload's version: %v", v)
	}
	// Reset: the file alone.
	if status, body, _ := call(t, g.admin, writeToken, "POST", "/config/reset", `{}`); status != 200 || body["version"] != 5.0 {
		t.Fatalf("reset: %d %v", status, body)
	}
	for path, want := range map[string]int{"/api": 404, "/base2": 404, "/base": 200, "/filed": 200} {
		if code, _ := get(t, g.listen, path); code != want {
			t.Errorf("GET %s after the reset: %d, want %d", path, code, want)
		}
	}
	g.stop(t)
	g.start(t)
	if code, _ := get(t, g.listen, "/api"); code != 404 {
		t.Errorf("GET /api after the reset and a restart: %d", code)
	}
}

// kill -9 while writes are under way, again and again: the state always
// loads on the next start, and holds every write that was answered.
func TestAdminStateSurvivesKill9DuringWrites(t *testing.T) {
	g := startAPI(t, pathUpstream(t))
	acked := 0
	for round := range 6 {
		stop := make(chan struct{})
		done := make(chan int)
		go func() {
			n := 0
			defer func() { done <- n }()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest("PUT", fmt.Sprintf("http://%s/config/routes/r%d-%d", g.admin, round, i),
					strings.NewReader(fmt.Sprintf(`{"path": "/r%d-%d", "upstream": "backend"}`, round, i)))
				req.Header.Set("Authorization", "Bearer "+writeToken)
				req.Header.Set("Content-Type", "application/json")
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // killed
				}
				resp.Body.Close()
				if resp.StatusCode == 201 {
					n++
				}
			}
		}()
		// Let some writes land, then kill -9 whatever is in flight.
		waitUntil(t, "writes", g.exited, g.logs, func() bool { return len(logEvents(g.logs.String(), "admin_write")) >= 3+round%3 })
		g.cmd.Process.Signal(syscall.SIGKILL)
		<-g.exited
		close(stop)
		acked += <-done
		g.start(t)
		_, body, _ := call(t, g.admin, readToken, "GET", "/config/routes", "")
		routes := body["routes"].([]any)
		if len(routes) < 1+acked {
			t.Fatalf("round %d: %d routes after kill -9, but %d writes were answered", round, len(routes), acked)
		}
		acked = len(routes) - 1 // a write applied but killed before its answer counts too
		// A temporary file a kill left is removed at start.
		entries, _ := os.ReadDir(g.dir)
		for _, e := range entries {
			if strings.Contains(e.Name(), ".tmp-") {
				t.Errorf("round %d: %s left after the restart", round, e.Name())
			}
		}
	}
}

// Under load on an unchanged route, 100 API writes (and a rollback) fail
// no request.
func TestAdminAPIWritesUnderLoadFailNoRequest(t *testing.T) {
	g := startAPI(t, pathUpstream(t))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var served int
	var failures []string
	for range 64 { // as wrk -c64: 64 keep-alive connections
		wg.Add(1)
		go func() {
			defer wg.Done()
			client := &http.Client{Timeout: 10 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := client.Get("http://" + g.listen + "/base")
				var body []byte
				if err == nil {
					body, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				mu.Lock()
				if err != nil || resp.StatusCode != 200 || string(body) != "up:/base" {
					failures = append(failures, fmt.Sprintf("%v %v %q", err, resp, body))
				}
				served++
				mu.Unlock()
			}
		}()
	}
	for i := range 100 {
		if status, body, _ := call(t, g.admin, writeToken, "PUT", fmt.Sprintf("/config/routes/w%d", i%10),
			fmt.Sprintf(`{"path": "/w%d", "upstream": "backend", "response_timeout": "%ds"}`, i%10, 1+i)); status != 200 && status != 201 {
			t.Fatalf("write %d: %d %v", i, status, body)
		}
	}
	// Version 1 is gone (50 are kept); the oldest kept one has every
	// w route but w0.
	_, body, _ := call(t, g.admin, readToken, "GET", "/config/versions", "")
	vs := body["versions"].([]any)
	if len(vs) != 50 {
		t.Fatalf("%d versions kept, want 50", len(vs))
	}
	if status, body, _ := call(t, g.admin, writeToken, "POST", "/config/rollback", `{"version": 1}`); status != 404 {
		t.Fatalf("rollback to a version no longer kept: %d %v", status, body)
	}
	oldest := vs[49].(map[string]any)["number"].(float64)
	if status, body, _ := call(t, g.admin, writeToken, "POST", "/config/rollback", fmt.Sprintf(`{"version": %d}`, int(oldest))); status != 200 {
		t.Fatalf("rollback: %d %v", status, body)
	}
	// A route created and deleted again under the load: the delete of the
	// last route edits the router table rather than compiling it whole.
	for i := range 10 {
		id := fmt.Sprintf("d%d", i)
		if status, body, _ := call(t, g.admin, writeToken, "POST", "/config/routes", fmt.Sprintf(`{"id": %q, "path": "/%s", "upstream": "backend"}`, id, id)); status != 201 {
			t.Fatalf("create %s: %d %v", id, status, body)
		}
		if code, body := get(t, g.listen, "/"+id); code != 200 || body != "up:/"+id {
			t.Fatalf("GET /%s: %d %q", id, code, body)
		}
		if status, body, _ := call(t, g.admin, writeToken, "DELETE", "/config/routes/"+id, ""); status != 200 {
			t.Fatalf("delete %s: %d %v", id, status, body)
		}
		if code, _ := get(t, g.listen, "/"+id); code != 404 {
			t.Fatalf("GET /%s after its delete: %d", id, code)
		}
	}
	close(stop)
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d of %d requests failed across the writes; first: %s", len(failures), served, failures[0])
	}
	t.Logf("%d requests served across 100 writes, a rollback, 10 creates and 10 deletes", served)
}

// loopgate config get|apply|diff|rollback against a running gateway.
func TestConfigCommand(t *testing.T) {
	g := startAPI(t, pathUpstream(t))
	t.Setenv("LOOPGATE_ADMIN_TOKEN", writeToken)
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		return runCommand(t, append([]string{"config", "-admin", "http://" + g.admin}, args...)...)
	}
	file := writeConfig(t, `
routes:
  - {id: a, path: /a, upstream: backend}
  - {id: b, path: /b, upstream: backend}
`)
	if code, out, errOut := cli("apply", "-f", file); code != 0 || !strings.Contains(out, `"changes": "routes added a, b"`) || !strings.Contains(out, `"version": 2`) {
		t.Fatalf("apply: %d %q %q", code, out, errOut)
	}
	for _, p := range []string{"/a", "/b", "/base"} {
		if code, _ := get(t, g.listen, p); code != 200 {
			t.Fatalf("GET %s after apply: %d", p, code)
		}
	}
	// -prune: the file is the whole set of routes, so base goes.
	if code, out, errOut := cli("apply", "-prune", "-f", file); code != 0 || !strings.Contains(out, "routes removed base") {
		t.Fatalf("apply -prune: %d %q %q", code, out, errOut)
	}
	if code, _ := get(t, g.listen, "/base"); code != 404 {
		t.Fatalf("GET /base after apply -prune: %d", code)
	}
	if code, out, _ := cli("diff"); code != 0 || !strings.Contains(out, "version 3: 1 change(s)\n- routes base\n") {
		t.Fatalf("diff: %d %q", code, out)
	}
	if code, out, _ := cli("get", "routes/a"); code != 0 || !strings.Contains(out, `"path": "/a"`) {
		t.Fatalf("get routes/a: %d %q", code, out)
	}
	if code, out, errOut := cli("rollback", "1"); code != 0 || !strings.Contains(out, `"version": 4`) {
		t.Fatalf("rollback: %d %q %q", code, out, errOut)
	}
	if code, _ := get(t, g.listen, "/a"); code != 404 {
		t.Fatalf("GET /a after the rollback: %d", code)
	}
	// A refusal: the admin port's message, exit status 1; no token: 401.
	if code, _, errOut := cli("rollback", "99"); code != 1 || !strings.Contains(errOut, "404: that version is not kept") {
		t.Fatalf("rollback 99: %d %q", code, errOut)
	}
	t.Setenv("LOOPGATE_ADMIN_TOKEN", "")
	if code, _, errOut := cli("get"); code != 1 || !strings.Contains(errOut, "401: this needs an admin token") {
		t.Fatalf("get without a token: %d %q", code, errOut)
	}
	if code, _, errOut := cli("frobnicate"); code != 2 || !strings.Contains(errOut, `unknown command "frobnicate"`) {
		t.Fatalf("an unknown command: %d %q", code, errOut)
	}
}

// /bans and /revocations take effect on the next request, and need a
// write token.
func TestAdminBansAndRevocations(t *testing.T) {
	dir := t.TempDir()
	listen, admin := freeAddr(t), freeAddr(t)
	cfg := apiConfig(listen, admin, filepath.Join(dir, "state.json"), pathUpstream(t), "") +
		"  - {id: keyed, path: /keyed, upstream: backend, auth: required}\n" +
		"auth:\n  api_keys: [{key: k-0123456789, consumer: ci}]\n"
	g := &apiGateway{dir: dir, listen: listen, admin: admin, config: writeConfig(t, cfg)}
	g.start(t)
	if status, _, _ := call(t, g.admin, readToken, "POST", "/bans", `{"prefix": "127.0.0.1", "ttl": "10m"}`); status != 403 {
		t.Fatalf("a ban with a read token: %d", status)
	}
	if status, body, _ := call(t, g.admin, writeToken, "POST", "/bans", `{"prefix": "127.0.0.0/8", "ttl": "1h"}`); status != 200 || body["banned"] != "127.0.0.0/8" {
		t.Fatalf("POST /bans: %d %v", status, body)
	}
	if code, body := get(t, g.listen, "/base"); code != 403 || !strings.Contains(body, "40302") {
		t.Fatalf("a banned client: %d %s", code, body)
	}
	if status, body, _ := call(t, g.admin, readToken, "GET", "/bans", ""); status != 200 || len(body["bans"].([]any)) != 1 {
		t.Fatalf("GET /bans: %d %v", status, body)
	}
	if status, body, _ := call(t, g.admin, writeToken, "DELETE", "/bans/127.0.0.0/8", ""); status != 200 {
		t.Fatalf("DELETE /bans: %d %v", status, body)
	}
	if code, _ := get(t, g.listen, "/base"); code != 200 {
		t.Fatalf("after the unban: %d", code)
	}
	if status, _, _ := call(t, g.admin, writeToken, "POST", "/bans", `{"prefix": "not-an-ip", "ttl": "1h"}`); status != 400 {
		t.Fatalf("a bad prefix: %d", status)
	}
	// An API key revoked is refused at once; lifted, it passes again.
	keyed := func() int {
		req, _ := http.NewRequest("GET", "http://"+g.listen+"/keyed", nil)
		req.Header.Set("Authorization", "k-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := keyed(); code != 200 {
		t.Fatalf("the API key before its revocation: %d", code)
	}
	if status, body, _ := call(t, g.admin, writeToken, "POST", "/revocations", `{"api_key": "k-0123456789"}`); status != 200 || body["revocations"] != 1.0 {
		t.Fatalf("POST /revocations: %d %v", status, body)
	}
	if code := keyed(); code != 401 {
		t.Fatalf("a revoked API key: %d", code)
	}
	if status, body, _ := call(t, g.admin, writeToken, "DELETE", "/revocations", `{"api_key": "k-0123456789"}`); status != 200 || body["revocations"] != 0.0 {
		t.Fatalf("DELETE /revocations: %d %v", status, body)
	}
	if code := keyed(); code != 200 {
		t.Fatalf("the API key after the revocation was lifted: %d", code)
	}
	waitUntil(t, "the audit lines", g.exited, g.logs, func() bool { return len(logEvents(g.logs.String(), "admin_write")) == 4 })
	if a := logEvents(g.logs.String(), "admin_write"); a[0]["token"] != "ops" || a[0]["trigger"] != "POST /bans: ban 127.0.0.0/8 for 1h0m0s" {
		t.Errorf("audit lines %v", a)
	}
}
