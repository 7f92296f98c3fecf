// Memory across full reloads at scale, on a real process: what the
// running config and its history hold after a reload that changed every
// route, against before it.

package main

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

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
	_, page, err := adminGet(admin, "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatal("no go_memstats_heap_inuse_bytes on the metrics page")
	return 0
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
	file := func(prefix string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "listen: %s\nadmin: {address: %s, state: %s, pprof: true}\nloops: 1\n", g.listen, g.admin, filepath.Join(dir, "state.json"))
		b.WriteString("upstreams:\n  - {name: backend, nodes: [\"127.0.0.1:9\"]}\nroutes:\n")
		for i := 0; i < 30_000; i++ {
			fmt.Fprintf(&b, "  - {id: r%d, path: /%s%d, upstream: backend}\n", i, prefix, i)
		}
		return b.String()
	}
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
