// Alerts through the binary: a refused reload is one webhook POST, a
// second refusal in a row is the same episode, and the next applied
// reload resolves it.

package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
)

func TestReloadRefusedAlert(t *testing.T) {
	var mu sync.Mutex
	var got []map[string]any
	hook := serveUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		var m map[string]any
		if json.NewDecoder(r.Body).Decode(&m) != nil {
			w.WriteHeader(400)
			return
		}
		mu.Lock()
		got = append(got, m)
		mu.Unlock()
	})
	alerts := fmt.Sprintf("alerts:\n  webhooks: [{url: \"http://%s/hook\", events: [reload_refused]}]\n", hook)
	g := startReloadable(t, alerts+okRoute, okUpstream(t))
	good, _ := os.ReadFile(g.config)
	received := func() []map[string]any {
		mu.Lock()
		defer mu.Unlock()
		return append([]map[string]any(nil), got...)
	}

	g.rewrite(t, g.head()+alerts+"routes:\n  - {id: all, prefix: /, upstream: nosuch}\n")
	g.cmd.Process.Signal(syscall.SIGHUP)
	g.waitReloadLine(t, 1)
	waitUntil(t, "the firing alert", g.exited, g.logs, func() bool { return len(received()) == 1 })
	if a := received()[0]; a["event"] != "reload_refused" || a["status"] != "firing" || a["subject"] != "config" ||
		!strings.Contains(fmt.Sprint(a["message"]), "upstream") {
		t.Fatalf("alert %v", a)
	}
	g.cmd.Process.Signal(syscall.SIGHUP) // refused again: the same episode
	g.waitReloadLine(t, 2)
	g.rewrite(t, string(good))
	g.cmd.Process.Signal(syscall.SIGHUP)
	g.waitReloadLine(t, 3)
	waitUntil(t, "the resolved alert", g.exited, g.logs, func() bool { return len(received()) >= 2 })
	all := received()
	if len(all) != 2 || all[1]["status"] != "resolved" || all[1]["since"] != all[0]["time"] {
		t.Fatalf("alerts %v, want firing then resolved", all)
	}
	if !strings.Contains(g.logs.String(), "warning: alert reload_refused config firing") {
		t.Errorf("no error-log line for the alert:\n%s", g.logs)
	}
	g.expectServing(t)
}
