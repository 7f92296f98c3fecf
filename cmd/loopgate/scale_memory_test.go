// Memory across full reloads at scale, on a real process: what the
// running config and its history hold after a reload that changed every
// route, against before it.

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// metricValue is name's value on the admin /metrics page, read as it is
// (no collection first).
func metricValue(t *testing.T, admin, name string) float64 {
	t.Helper()
	_, page, err := adminGet(admin, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("no %s on the metrics page", name)
	return 0
}

// heapInUse is the process's heap in use right after two collections
// (GET /debug/pprof/heap?gc=1 runs one; a sync.Pool's contents, the JSON
// encoder's buffers among them, outlive the first), in bytes: what the
// live data takes, whatever the machine's load or the collector's timing.
func heapInUse(t *testing.T, admin string) float64 {
	t.Helper()
	for range 2 {
		if code, _, err := adminGet(admin, "/debug/pprof/heap?gc=1"); err != nil || code != 200 {
			t.Fatalf("GET /debug/pprof/heap: %d %v", code, err)
		}
	}
	return metricValue(t, admin, "go_memstats_heap_inuse_bytes")
}

// routesFile is a config of n exact routes /<prefix>i and no other, on
// listen and admin, its state file in dir.
func routesFile(listen, admin, dir, prefix string, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: %s\nadmin: {address: %s, state: %s, pprof: true}\nloops: 1\n", listen, admin, filepath.Join(dir, "state.json"))
	b.WriteString("upstreams:\n  - {name: backend, nodes: [\"127.0.0.1:9\"]}\nroutes:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "  - {id: r%d, path: /%s%d, upstream: backend}\n", i, prefix, i)
	}
	return b.String()
}

// With 30,000 routes, the gateway serves with the start's parse and
// compile scratch already handed back (returnStartScratch): the heap in
// use as it first answers is the live data's, not a third more of
// garbage the first collection would find (59.6 against 47.9 MB), which
// VmRSS would keep for minutes.
func TestStartAt30kServesWithoutTheCompileScratch(t *testing.T) {
	if testing.Short() {
		t.Skip("30,000 routes")
	}
	g := &reloadable{listen: freeAddr(t), admin: freeAddr(t)}
	g.config = writeConfig(t, routesFile(g.listen, g.admin, t.TempDir(), "r", 30_000))
	// GOGC=off: no collection of the collector's own choosing can do the
	// return's work, so the heap in use tells whether the gateway did it.
	cmd := exec.Command(binary, "-config", g.config)
	cmd.Env = append(os.Environ(), "GOGC=off")
	g.gateway = startCommand(t, cmd)
	waitUntil(t, "/readyz to answer 200", g.exited, g.logs, func() bool {
		code, _, err := adminGet(g.admin, "/readyz")
		return err == nil && code == 200
	})
	first := metricValue(t, g.admin, "go_memstats_heap_inuse_bytes")
	live := heapInUse(t, g.admin)
	t.Logf("heap in use at start %.1f MB, live %.1f MB (%.2fx)", first/1e6, live/1e6, first/live)
	if first > 1.1*live {
		t.Fatalf("the gateway served with %.1f MB of heap in use against %.1f MB live (%.2fx): the start's scratch was not returned", first/1e6, live/1e6, first/live)
	}
}

// With 30,000 routes, a reload of a file that changed every route leaves
// the heap at most 1.2 times what it was before: the replaced config is
// not kept (the command kept its start config alive while serving, 1.35
// times), and the version it adds keeps its changes encoded (a version
// of 30,000 changed routes held every old route's value, 15 MB). A
// second such reload adds no more than the first.
func TestFullReloadAt30kKeepsTheHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("30,000 routes")
	}
	g := &reloadable{listen: freeAddr(t), admin: freeAddr(t)}
	dir := t.TempDir()
	file := func(prefix string) string { return routesFile(g.listen, g.admin, dir, prefix, 30_000) }
	g.config = writeConfig(t, file("r"))
	g.gateway = startProcess(t, "-config", g.config)
	waitUntil(t, "/readyz to answer 200", g.exited, g.logs, func() bool {
		code, _, err := adminGet(g.admin, "/readyz")
		return err == nil && code == 200
	})
	before := heapInUse(t, g.admin)
	for _, prefix := range []string{"v", "w"} {
		g.rewrite(t, file(prefix))
		if code, body := postReloadQuery(t, g.admin, ""); code != 200 || body["result"] != "applied" {
			t.Fatalf("reload: %d %v", code, body)
		}
		// The version is saved, and then kept compact, after the reload
		// answered: the heap settles once the save is done.
		deadline := time.Now().Add(30 * time.Second)
		after := heapInUse(t, g.admin)
		for after > 1.2*before && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
			after = heapInUse(t, g.admin)
		}
		t.Logf("full reload to /%s...: heap in use %.1f -> %.1f MB (%.2fx)", prefix, before/1e6, after/1e6, after/before)
		if after > 1.2*before {
			t.Fatalf("a full reload took the heap in use from %.1f MB to %.1f MB (%.2fx) for 30 s, want at most 1.2x", before/1e6, after/1e6, after/before)
		}
		before = after
	}
}
