package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A second SIGTERM during the drain exits at once, cutting the in-flight
// request, as Envoy does: the operator has decided not to wait.
func TestSecondSIGTERMExitsAtOnce(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	up := serveUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	})
	g, listen, adminAddr := startServing(t, `
timeouts: {drain: 60s}
upstreams:
  - {name: backend, nodes: ["%s"], response_timeout: 60s}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up)
	cmd, logs, exited := g.cmd, g.logs, g.exited
	c, err := net.DialTimeout("tcp", listen, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("the request never reached the upstream; output:\n%s", logs)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	waitUntil(t, "/readyz to report draining", exited, logs, func() bool {
		code, _, err := adminGet(adminAddr, "/readyz")
		return err == nil && code == http.StatusServiceUnavailable
	})
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("a second SIGTERM did not end the drain (60s budget); output:\n%s", logs)
	}
	if code := cmd.ProcessState.ExitCode(); code == 0 {
		t.Fatalf("exit code 0 after cutting a drain short; output:\n%s", logs)
	}
	if !strings.Contains(logs.String(), "again") {
		t.Errorf("no log line for the second signal:\n%s", logs)
	}
}

// GET /metrics on the admin port answers Prometheus text with the
// gateway's series after a request went through.
func TestMetricsEndpoint(t *testing.T) {
	up := serveUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	g, listen, adminAddr := startServing(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up)
	exited, logs := g.exited, g.logs
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + listen + "/x")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	// The exchange is counted just after its last byte is handed to the
	// socket, so the client may read the response a moment before.
	const want = `loopgate_route_requests_total{route="all",code="2xx"} 1`
	var body string
	waitUntil(t, "/metrics to count the request", exited, logs, func() bool {
		code, b, err := adminGet(adminAddr, "/metrics")
		body = b
		return err == nil && code == 200 && strings.Contains(b, want)
	})
	if !strings.Contains(body, "go_gc_duration_seconds") {
		t.Errorf("/metrics lacks the Go runtime series:\n%s", body)
	}
}

// A restart binds the port the last process served on at once, even while
// connections that process closed wait out TIME_WAIT on it (nginx's and
// Go's listeners set SO_REUSEADDR for this; without it the bind fails for
// a minute).
func TestRestartWhileClosedConnectionsLinger(t *testing.T) {
	up := serveUpstream(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	listen := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("listen: %s\nadmin: \"off\"\nloops: 1\nupstreams:\n  - {name: backend, nodes: [%q]}\nroutes:\n  - {id: all, prefix: /, upstream: backend}\n", listen, up))
	first := startProcess(t, "-config", cfg)
	first.serving(t)
	// The gateway closes each of these connections first, so their
	// TIME_WAIT is on its side, on the listening port.
	for i := 0; i < 5; i++ {
		c, err := net.Dial("tcp", listen)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
		if _, err := io.ReadAll(c); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	first.stop(t)
	second := startProcess(t, "-config", cfg)
	second.serving(t)
	second.stop(t)
}
