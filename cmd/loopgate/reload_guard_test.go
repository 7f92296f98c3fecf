// What a reload refuses on a real process: a file cut short before
// routes:, an empty file, a change to a section only a restart can make;
// and a reloaded health_check interval rescheduling the probe queued.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
)

const twoRoutes = `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: api, prefix: /api/, upstream: backend}
  - {id: other, prefix: /, upstream: backend}
`

// postReload POSTs /reload with query and returns the status and the
// decoded body.
func postReloadQuery(t *testing.T, admin, query string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", "http://"+admin+"/reload"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Loopgate-Admin", "1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("POST /reload%s: %d, body not JSON: %v", query, resp.StatusCode, err)
	}
	return resp.StatusCode, body
}

// The defect: the file was cut just before routes: and SIGHUP
// sent, and every request got 404 until the next reload. Now the reload
// is refused, naming the routes it would remove, and requests keep being
// served; the operator applies such a file on purpose with
// POST /reload?allow_empty=1.
func TestReloadOfAFileCutBeforeRoutesIsRefused(t *testing.T) {
	g := startReloadable(t, twoRoutes, okUpstream(t))
	g.expectServing(t)
	body, err := os.ReadFile(g.config)
	if err != nil {
		t.Fatal(err)
	}
	cut := string(body)[:strings.Index(string(body), "routes:")]
	g.rewrite(t, cut)
	g.cmd.Process.Signal(syscall.SIGHUP)
	line := g.waitReloadLine(t, 1)
	if msg := fmt.Sprint(line["error"]); line["level"] != "error" || !strings.Contains(msg, "removes every route (api, other)") ||
		!strings.Contains(msg, "allow_empty") || !strings.Contains(msg, "still serving config v1") {
		t.Fatalf("reload line for a file cut before routes: %v", line)
	}
	g.expectServing(t)

	code, res := postReloadQuery(t, g.admin, "")
	if code != 409 || !strings.Contains(fmt.Sprint(res["message"]), "every route") {
		t.Fatalf("POST /reload of the cut file: %d %v, want 409 naming every route", code, res)
	}
	g.expectServing(t)

	code, res = postReloadQuery(t, g.admin, "?allow_empty=1")
	if code != 200 || !strings.Contains(fmt.Sprint(res["changes"]), "routes removed [api, other]") {
		t.Fatalf("POST /reload?allow_empty=1: %d %v", code, res)
	}
	if line := g.waitReloadLine(t, 3); line["trigger"] != "POST /reload?allow_empty=1" {
		t.Errorf("the allowed reload's line: %v", line)
	}
	if code, _, err := adminGet(g.listen, "/still"); err != nil || code != 404 {
		t.Fatalf("after an allowed empty reload: %d %v, want 404", code, err)
	}
}

// A file emptied (truncated to nothing) is refused as a file, on reload
// (422) and by -check, rather than serving the defaults with no routes.
func TestEmptyConfigFileIsRefused(t *testing.T) {
	g := startReloadable(t, okRoute, okUpstream(t))
	g.rewrite(t, "")
	code, res := postReloadQuery(t, g.admin, "")
	if code != 422 || !strings.Contains(fmt.Sprint(res["message"]), "sets nothing") {
		t.Fatalf("POST /reload of an empty file: %d %v, want 422", code, res)
	}
	g.expectServing(t)

	for _, text := range []string{"", "# to do\n"} {
		code, out, errOut := runCommand(t, "-check", "-config", writeConfig(t, text))
		if code != 1 || strings.Contains(out, "config ok") || !strings.Contains(errOut, "sets nothing") ||
			!strings.Contains(errOut, "127.0.0.1:8080 with no routes") {
			t.Errorf("-check on %q: exit %d, stdout %q, stderr %q; want exit 1 saying it sets nothing", text, code, out, errOut)
		}
	}
}

// A refused reload names the field of a fixed section that changed, with
// the values as written, not Go's {/path 4096}.
func TestRefusedReloadNamesFixedFieldsAsWritten(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.log"), filepath.Join(dir, "b.log")
	up := okUpstream(t)
	g := startReloadable(t, fmt.Sprintf("access_log: {path: %s}\n", a)+okRoute, up)
	g.rewrite(t, g.head()+fmt.Sprintf("access_log: {path: %s}\n", b)+fmt.Sprintf(okRoute, up))
	code, res := postReloadQuery(t, g.admin, "")
	msg := fmt.Sprint(res["message"])
	if want := "access_log.path " + a + " -> " + b; code != 409 || !strings.Contains(msg, want) || strings.Contains(msg, "{") {
		t.Fatalf("POST /reload changing access_log: %d %q, want 409 with %q", code, msg, want)
	}
}

// The defect: health_check.interval reloaded from 2 minutes to 1
// second kept the 2-minute wait already queued, so a broken node went
// unnoticed for a minute. Here the first interval is a day, so the first
// probe is queued hours away; after the reload to 1s a probe arrives
// within seconds.
func TestReloadedHealthCheckIntervalReschedulesTheQueuedProbe(t *testing.T) {
	var probes atomic.Int32
	up := serveUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			probes.Add(1)
		}
		io.WriteString(w, "ok")
	})
	const checked = `
upstreams:
  - name: backend
    nodes: ["%%s"]
    health_check: {path: /health, interval: %s}
routes:
  - {id: all, prefix: /, upstream: backend}
`
	g := startReloadable(t, fmt.Sprintf(checked, "24h"), up)
	g.expectServing(t)
	g.rewrite(t, g.head()+fmt.Sprintf(fmt.Sprintf(checked, "1s"), up))
	g.cmd.Process.Signal(syscall.SIGHUP)
	if line := g.waitReloadLine(t, 1); line["level"] != "info" || !strings.Contains(fmt.Sprint(line["changes"]), "upstreams changed [backend]") {
		t.Fatalf("reload line: %v", line)
	}
	waitUntil(t, "a health probe after the interval went from 24h to 1s", g.exited, g.logs, func() bool {
		return probes.Load() > 0
	})
}
