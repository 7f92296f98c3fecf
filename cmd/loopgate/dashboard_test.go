// The dashboard in a real browser: Debian's chromium, headless, driven by
// puppeteer-core (testdata/browser, installed by `make browser`).

package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestDashboardInBrowser: the page loads from the binary and, without a
// token, asks for one; with it the running config's routes appear, a
// breaker that opens shows OPEN at a refresh, the live route's requests per
// second rise above 0, its isolation limit shows against its base and its
// queue, a rate limit shows what it admitted and refused, and a rollback
// from the page restores the old routes. It skips only when chromium (or
// node, which drives it) is not installed. DASHBOARD_SCREENSHOTS names a
// directory to keep the screenshots in (`make screenshots` writes
// docs/dashboard*.png); by default they go to a temporary one.
func TestDashboardInBrowser(t *testing.T) {
	chromium := os.Getenv("CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		t.Skipf("no chromium at %s (make browser installs it): %v", chromium, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node to drive chromium (make browser installs it)")
	}
	dir, _ := filepath.Abs("testdata/browser")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "puppeteer-core")); err != nil {
		t.Fatalf("puppeteer-core is not installed: run `make browser` (npm ci in %s)", dir)
	}
	up := serveUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	listen, admin := freeAddr(t), freeAddr(t)
	const token = "dashboard-test-token-0123"
	routes := fmt.Sprintf(`listen: %s
admin:
  address: %s
  tokens: [{name: ui, role: write, token: %s}]
  state: %s
loops: 1
upstreams:
  - {name: gone, nodes: ["%s"]}
  - {name: backend, nodes: ["%s"]}
routes:
  - id: dead
    prefix: /dead/
    upstream: gone
    retry: {attempts: 1}
    circuit_breaker: {window: 2, min_calls: 2, open_for: 1m}
  - {id: limited, prefix: /limited/, upstream: backend, rate_limits: [{key: route, rate: 1, burst: 2}]}
  - {id: live, prefix: /, upstream: backend, isolation: {limit: 40, queue: 8}}
`, listen, admin, token, filepath.Join(t.TempDir(), "state.json"), freeAddr(t), up) // nothing listens at a freeAddr: every call fails to connect
	cfg := writeConfig(t, routes)
	g := startProcess(t, "-config", cfg)
	waitUntil(t, "/readyz to answer 401", g.exited, g.logs, func() bool {
		code, _, err := adminGet(admin, "/readyz")
		return err == nil && code == 401
	})
	// Version 2 adds a route; the page rolls back to version 1.
	if err := os.WriteFile(cfg, []byte(routes+"  - {id: extra, prefix: /extra/, upstream: backend}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", "http://"+admin+"/reload", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("X-Loopgate-Admin", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST /reload: %v %v\n%s", resp, err, g.logs)
	}
	resp.Body.Close()
	shots := os.Getenv("DASHBOARD_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	cmd := exec.Command(node, "dashboard.js", "http://"+admin, "http://"+listen, token, shots)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() }) // a hung browser fails the test, not the suite
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("dashboard check: %v\ngateway output:\n%s", err, g.logs)
	}
}
