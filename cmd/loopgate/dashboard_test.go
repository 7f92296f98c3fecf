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

// TestDashboardInBrowser: the page loads from the binary, the running
// config's routes appear, a breaker that opens shows OPEN within 2 s, and
// the live route's requests per second rise above 0. It skips only when
// chromium (or node, which drives it) is not installed; DASHBOARD_SCREENSHOT
// names a file to keep the page's screenshot in (docs/dashboard.png).
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
	g, listen, admin := startServing(t, fmt.Sprintf(`
upstreams:
  - {name: gone, nodes: ["%s"]}
  - {name: backend, nodes: ["%%s"]}
routes:
  - id: dead
    prefix: /dead/
    upstream: gone
    retry: {attempts: 1}
    circuit_breaker: {window: 2, min_calls: 2, open_for: 1m}
  - {id: live, prefix: /, upstream: backend}
`, freeAddr(t)), up) // nothing listens at a freeAddr: every call fails to connect
	shot := os.Getenv("DASHBOARD_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "dashboard.png")
	}
	cmd := exec.Command(node, "dashboard.js", "http://"+admin, "http://"+listen, shot)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
	timer := time.AfterFunc(60*time.Second, func() { cmd.Process.Kill() }) // a hung browser fails the test, not the suite
	defer timer.Stop()
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err != nil {
		t.Fatalf("dashboard check: %v\ngateway output:\n%s", err, g.logs)
	}
}
