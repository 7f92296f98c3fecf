// The load test as written: wrk -c64 on an unchanged route while
// 100 API writes and a rollback apply, and not one request fails.

package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestAdminAPIWritesUnderWrkLoseNoRequest(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not installed")
	}
	g := startAPI(t, pathUpstream(t))
	var out bytes.Buffer
	// Stopped by SIGINT once the writes are done, when it prints its
	// summary; the duration is only a bound. A generous timeout: the race
	// build is slow, and a slow answer is not a lost one.
	wrk := exec.Command("wrk", "-t2", "-c64", "-d120s", "--timeout", "10s", "http://"+g.listen+"/base")
	wrk.Stdout, wrk.Stderr = &out, &out
	if err := wrk.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- wrk.Wait() }()
	t.Cleanup(func() { wrk.Process.Kill() })
	for i := range 100 {
		if status, body, _ := call(t, g.admin, writeToken, "PUT", fmt.Sprintf("/config/routes/w%d", i%10),
			fmt.Sprintf(`{"path": "/w%d", "upstream": "backend", "response_timeout": "%ds"}`, i%10, 1+i)); status != 200 && status != 201 {
			t.Fatalf("write %d: %d %v", i, status, body)
		}
	}
	_, body, _ := call(t, g.admin, readToken, "GET", "/config/versions", "")
	latest := int(body["latest"].(float64))
	if status, body, _ := call(t, g.admin, writeToken, "POST", "/config/rollback", fmt.Sprintf(`{"version": %d}`, latest-10)); status != 200 {
		t.Fatalf("rollback: %d %v", status, body)
	}
	wrk.Process.Signal(syscall.SIGINT)
	<-done
	summary := out.String()
	if !strings.Contains(summary, "requests in") {
		t.Fatalf("no wrk summary:\n%s", summary)
	}
	// wrk prints these lines only when there is something to count.
	if strings.Contains(summary, "Non-2xx") || strings.Contains(summary, "Socket errors") {
		t.Fatalf("requests failed across 100 writes and a rollback:\n%s\ngateway output:\n%s", summary, g.logs)
	}
	for _, l := range strings.Split(summary, "\n") {
		if strings.Contains(l, "requests in") {
			t.Logf("wrk: %s", strings.TrimSpace(l))
		}
	}
}
