// The loopgate command as a process: -check, the admin health endpoints,
// and a SIGTERM that drains in-flight requests before exiting.

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// binary is the loopgate command built once for every test.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "loopgate-cmd-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "loopgate")
	args := []string{"build", "-o", binary}
	if raceEnabled() { // share the race build of the packages the test already compiled
		args = append(args, "-race")
	}
	build := exec.Command(goTool(), append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building loopgate:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// raceEnabled reports whether this test binary was built with -race.
func raceEnabled() bool {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "-race" {
				return s.Value == "true"
			}
		}
	}
	return false
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// freeAddr returns a loopback address with a port that was free a moment
// ago. main logs the configured listen address, not a port 0 resolved, so
// the test picks the ports itself.
func freeAddr(t *testing.T) string {
	t.Helper()
	// Below the kernel's ephemeral range: a port from 127.0.0.1:0 is free
	// now, but until the process under test binds it, any outbound
	// connection of the tests running alongside may take it as its source
	// port ("address already in use"). Ports under the range are never
	// handed out that way.
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > 11000 {
				low = n
			}
		}
	}
	for range 100 {
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(10000+rand.IntN(low-10000)))
		if ln, err := net.Listen("tcp", addr); err == nil {
			ln.Close()
			return addr
		}
	}
	t.Fatal("no free port below the ephemeral range")
	return ""
}

// writeConfig writes a YAML config file for one test.
func writeConfig(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "loopgate.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runCommand runs the binary to completion (for -check) and returns its exit code
// and output.
func runCommand(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("loopgate %v did not exit", args)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

func TestCheckFlag(t *testing.T) {
	good := writeConfig(t, `
listen: 127.0.0.1:0
admin: "off"
upstreams:
  - {name: backend, nodes: ["127.0.0.1:1"]}
routes:
  - {id: all, prefix: /, upstream: backend}
`)
	if code, out, errOut := runCommand(t, "-check", "-config", good); code != 0 || strings.TrimSpace(out) != "config ok" {
		t.Fatalf("-check on a valid config: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	for _, tc := range []struct{ yaml, field string }{
		{"upstreams:\n  - {name: backend, nodes: [\"127.0.0.1:1\"]}\nroutes:\n  - {id: r, prefix: /, upstream: nosuch}\n", `line 6: routes[0] (id "r").upstream`},
		{"timeouts: {idle: -1s}\n", "timeouts.idle"},
		{"limits: {max_header_bytes: lots}\n", "max_header_bytes"},
	} {
		bad := writeConfig(t, "listen: 127.0.0.1:0\nadmin: \"off\"\n"+tc.yaml)
		code, out, errOut := runCommand(t, "-check", "-config", bad)
		if code == 0 || !strings.Contains(errOut, tc.field) || strings.Contains(out, "config ok") {
			t.Errorf("-check on a config with a bad %s: exit %d, stdout %q, stderr %q", tc.field, code, out, errOut)
		}
	}
	if code, _, errOut := runCommand(t, "-check", "-config", filepath.Join(t.TempDir(), "missing.yaml")); code == 0 || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("-check on a missing file: exit %d, stderr %q", code, errOut)
	}
}

// syncBuffer collects a process's output while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// adminGet GETs an admin endpoint and returns the status and body.
func adminGet(addr, path string) (int, string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), err
}

// waitUntil polls cond (a process's observable state) until it holds.
func waitUntil(t *testing.T, what string, exited <-chan struct{}, logs *syncBuffer, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		select {
		case <-exited:
			t.Fatalf("loopgate exited while waiting for %s; output:\n%s", what, logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; output:\n%s", what, logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// serveUpstream runs an HTTP upstream for one test and returns its address.
func serveUpstream(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// startServing runs the binary on routes (YAML with one %s for the
// upstream address, given as up) on one loop and free ports, and waits
// until /readyz answers 200.
func startServing(t *testing.T, routes, up string) (g *gateway, listen, adminAddr string) {
	t.Helper()
	listen, adminAddr = freeAddr(t), freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("listen: %s\nadmin: %s\nloops: 1\n", listen, adminAddr)+fmt.Sprintf(routes, up))
	g = startProcess(t, "-config", cfg)
	waitUntil(t, "/readyz to answer 200", g.exited, g.logs, func() bool {
		code, _, err := adminGet(adminAddr, "/readyz")
		return err == nil && code == 200
	})
	return g, listen, adminAddr
}

// SIGTERM with a request in flight: /readyz turns 503 at once, new
// connections are refused, the request completes, and the process exits 0.
func TestSIGTERMDrainsInFlight(t *testing.T) {
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	up := serveUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "done "+r.URL.Path)
	})
	g, listen, adminAddr := startServing(t, `
timeouts: {drain: 20s}
upstreams:
  - {name: backend, nodes: ["%s"], response_timeout: 20s}
routes:
  - {id: all, prefix: /, upstream: backend}
`, up)
	cmd, logs, exited := g.cmd, g.logs, g.exited
	if code, body, err := adminGet(adminAddr, "/healthz"); err != nil || code != 200 || body != "ok" {
		t.Fatalf("/healthz: %d %q %v", code, body, err)
	}

	c, err := net.DialTimeout("tcp", listen, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	if _, err := io.WriteString(c, "GET /fast HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.ReadResponse(br, nil); err != nil || resp.StatusCode != 200 {
		t.Fatalf("request through the gateway: %v %v", resp, err)
	} else {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if _, err := io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatalf("the request never reached the upstream; output:\n%s", logs)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "/readyz to report draining", exited, logs, func() bool {
		code, body, err := adminGet(adminAddr, "/readyz")
		return err == nil && code == http.StatusServiceUnavailable && body == "draining"
	})
	// The listener is closed first: a new client is refused by the kernel,
	// not accepted and then closed.
	waitUntil(t, "a new connection to be refused", exited, logs, func() bool {
		nc, err := net.DialTimeout("tcp", listen, 5*time.Second)
		if err == nil {
			nc.Close()
		}
		return errors.Is(err, syscall.ECONNREFUSED)
	})
	select {
	case <-exited:
		t.Fatalf("loopgate exited with a request in flight; output:\n%s", logs)
	default:
	}

	releaseOnce.Do(func() { close(release) })
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("in-flight request during drain: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || string(body) != "done /slow" || !resp.Close {
		t.Fatalf("in-flight request during drain: %d %q close=%v %v", resp.StatusCode, body, resp.Close, err)
	}

	select {
	case <-exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("loopgate did not exit after draining; output:\n%s", logs)
	}
	if cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("exit code %d; output:\n%s", cmd.ProcessState.ExitCode(), logs)
	}
	if out := logs.String(); !strings.Contains(out, "draining") || !strings.Contains(out, "loopgate: stopped") {
		t.Errorf("logs lack the drain and stop lines:\n%s", out)
	}
}
