// Reload triggers (SIGHUP, POST /reload), the error log's reload lines, and
// SIGUSR1 reopening the access log, on a real process.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// reloadable is a gateway process whose config file the test rewrites.
type reloadable struct {
	*gateway
	config, listen, admin string
}

// startReloadable runs the binary on body (YAML after listen, admin and
// loops; one %s for the upstream address).
func startReloadable(t *testing.T, body, up string) *reloadable {
	t.Helper()
	g := &reloadable{listen: freeAddr(t), admin: freeAddr(t)}
	g.config = writeConfig(t, g.head()+fmt.Sprintf(body, up))
	g.gateway = startProcess(t, "-config", g.config)
	waitUntil(t, "/readyz to answer 200", g.exited, g.logs, func() bool {
		code, _, err := adminGet(g.admin, "/readyz")
		return err == nil && code == 200
	})
	return g
}

func (g *reloadable) head() string {
	return fmt.Sprintf("listen: %s\nadmin: %s\nloops: 1\n", g.listen, g.admin)
}

// rewrite replaces the config file's contents.
func (g *reloadable) rewrite(t *testing.T, text string) {
	t.Helper()
	if err := os.WriteFile(g.config, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}

// reloadLines returns the error log's reload lines so far.
func (g *reloadable) reloadLines() []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(g.logs.String(), "\n") {
		if !strings.HasPrefix(line, "{") {
			continue // the process's own text lines
		}
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["event"] == "reload" {
			out = append(out, m)
		}
	}
	return out
}

// waitReloadLine waits for the n-th reload line and returns it.
func (g *reloadable) waitReloadLine(t *testing.T, n int) map[string]any {
	t.Helper()
	var lines []map[string]any
	waitUntil(t, fmt.Sprintf("reload line %d", n), g.exited, g.logs, func() bool {
		lines = g.reloadLines()
		return len(lines) >= n
	})
	return lines[n-1]
}

// expectServing asserts the gateway still proxies a request.
func (g *reloadable) expectServing(t *testing.T) {
	t.Helper()
	if code, body, err := adminGet(g.listen, "/still"); err != nil || code != 200 || body != "ok" {
		t.Fatalf("gateway after a reload: %d %q %v; output:\n%s", code, body, err, g.logs)
	}
}

const okRoute = `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: all, prefix: /, upstream: backend}
`

func okUpstream(t *testing.T) string {
	return serveUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
}

// SIGHUP no longer is ignored: it re-reads the config file, and the
// attempt gets one error-log line saying what came of it. A file that does
// not parse is refused with its line number, and the process keeps
// serving on the config it has.
func TestSIGHUPReloads(t *testing.T) {
	g := startReloadable(t, okRoute, okUpstream(t))
	g.cmd.Process.Signal(syscall.SIGHUP)
	first := g.waitReloadLine(t, 1)
	if first["trigger"] != "SIGHUP" || first["triggers"] != 1.0 || first["level"] != "info" ||
		!strings.Contains(fmt.Sprint(first["changes"]), "no changes") {
		t.Errorf("reload line after SIGHUP on the same file: %v", first)
	}
	g.expectServing(t)

	body, _ := os.ReadFile(g.config)
	g.rewrite(t, string(body)+"  - {id: two, path: /two, upstream: backend}\n")
	g.cmd.Process.Signal(syscall.SIGHUP)
	if added := g.waitReloadLine(t, 2); added["level"] != "info" || !strings.Contains(fmt.Sprint(added["changes"]), "routes added [two]") {
		t.Errorf("reload line after adding a route: %v", added)
	}

	g.rewrite(t, g.head()+"routes:\n  - {id: all, prefix: /, upstream: nosuch}\n")
	g.cmd.Process.Signal(syscall.SIGHUP)
	bad := g.waitReloadLine(t, 3)
	if bad["level"] != "error" || !strings.Contains(fmt.Sprint(bad["error"]), `line 5: routes[0] (id "all").upstream`) {
		t.Errorf("reload line for a bad file: %v", bad)
	}
	g.expectServing(t)
}

// POST /reload answers with the reload's result: a file that does not load
// is a 422 naming the line, in the gateway's JSON error form.
func TestPOSTReload(t *testing.T) {
	up := okUpstream(t)
	g := startReloadable(t, okRoute, up)
	g.rewrite(t, g.head()+"timeouts: {idle: soon}\n")
	resp, err := postReload(g.admin)
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Code      int    `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 422 || e.Code != 42201 || !strings.Contains(e.Message, "line 4") || e.RequestID == "" {
		t.Fatalf("POST /reload with a bad file: %d %+v %v", resp.StatusCode, e, err)
	}
	if line := g.waitReloadLine(t, 1); line["trigger"] != "POST /reload" || line["level"] != "error" {
		t.Errorf("reload line: %v", line)
	}
	g.expectServing(t)

	// A file that loads but changes what only a restart can is refused
	// with 409, and the running config keeps serving. The message reads
	// as the docs show it: "->", not the HTML-escaped "-\u003e".
	g.rewrite(t, strings.Replace(g.head(), "loops: 1", "loops: 2", 1)+fmt.Sprintf(okRoute, up))
	resp, err = postReload(g.admin)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil {
		err = json.Unmarshal(raw, &e)
	}
	if err != nil || resp.StatusCode != 409 || e.Code != 40901 || !strings.Contains(string(raw), `reload refused: loops 1 -> 2 cannot change`) {
		t.Fatalf("POST /reload changing loops: %d %s %v", resp.StatusCode, raw, err)
	}
	g.expectServing(t)
}

// Concurrent triggers are debounced: every POST gets an answer, and the
// reload lines account for every trigger, each reload serving one or more.
func TestReloadTriggersAreCoalesced(t *testing.T) {
	g := startReloadable(t, okRoute, okUpstream(t))
	const posts = 6
	var wg sync.WaitGroup
	codes := make([]int, posts)
	for i := range posts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := postReload(g.admin)
			if err == nil {
				codes[i] = resp.StatusCode
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	for i, c := range codes {
		if c == 0 {
			t.Fatalf("POST %d got no answer", i)
		}
	}
	var served float64
	waitUntil(t, "reload lines for every trigger", g.exited, g.logs, func() bool {
		served = 0
		for _, l := range g.reloadLines() {
			served += l["triggers"].(float64)
		}
		return served >= posts
	})
	if n := len(g.reloadLines()); served != posts || n > posts {
		t.Errorf("%d reload lines served %v triggers, want %d in at most %d", n, served, posts, posts)
	}
}

// SIGUSR1 reopens the access log at its path, as logrotate expects after
// moving the old file away.
func TestSIGUSR1ReopensAccessLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	g := startReloadable(t, fmt.Sprintf("access_log: {path: %q}\n", path)+okRoute, okUpstream(t))
	g.expectServing(t)
	waitUntil(t, "the first access line", g.exited, g.logs, func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), `"path":"/still"`)
	})
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	g.cmd.Process.Signal(syscall.SIGUSR1)
	waitUntil(t, "the access log to be reopened", g.exited, g.logs, func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
	if code, _, err := adminGet(g.listen, "/after"); err != nil || code != 200 {
		t.Fatalf("request after reopening: %d %v", code, err)
	}
	waitUntil(t, "the second access line in the new file", g.exited, g.logs, func() bool {
		b, _ := os.ReadFile(path)
		return strings.Contains(string(b), `"path":"/after"`)
	})
	if old, _ := os.ReadFile(path + ".1"); strings.Contains(string(old), "/after") {
		t.Errorf("a line went to the rotated file: %s", old)
	}
}

// postReload POSTs /reload as a program does: with the header that tells
// the admin port the request was meant (a page cannot send it).
func postReload(admin string) (*http.Response, error) {
	req, err := http.NewRequest("POST", "http://"+admin+"/reload", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("X-Loopgate-Admin", "1")
	return http.DefaultClient.Do(req)
}
