// The process under its limits: out of file descriptors it keeps serving,
// and event loops that stop unasked are a failed exit.

package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Under `ulimit -n 256`, more idle connections than descriptors: the loops
// pause accepting instead of ending (gnet's acceptor stopped the process
// with status 0 here), and once the connections close, requests are
// served again.
func TestOutOfDescriptorsKeepsServing(t *testing.T) {
	up := serveUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	listen := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf(`listen: %s
admin: "off"
loops: 2
limits: {max_connections: 10000}
upstreams:
  - {name: backend, nodes: [%q]}
routes:
  - {id: all, prefix: /, upstream: backend}
`, listen, up))
	// sh's ulimit sets the soft and the hard limit, so the process cannot
	// raise it back.
	g := startCommand(t, exec.Command("sh", "-c", `ulimit -n 256 && exec "$0" "$@"`, binary, "-config", cfg))
	g.serving(t)
	if out := g.logs.String(); !strings.Contains(out, "max_connections 10000 needs about") || !strings.Contains(out, "RLIMIT_NOFILE is 256") {
		t.Errorf("no warning that max_connections exceeds the descriptor limit:\n%s", out)
	}

	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 300 { // the kernel completes the handshakes the loops cannot accept
		c, err := net.DialTimeout("tcp", listen, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", len(idle), err)
		}
		idle = append(idle, c)
	}
	waitUntil(t, "the loops to pause accepting", g.exited, g.logs, func() bool {
		return strings.Contains(g.logs.String(), "accept: too many open files")
	})
	for _, c := range idle {
		c.Close()
	}
	idle = nil

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	waitUntil(t, "a request to succeed again", g.exited, g.logs, func() bool {
		resp, err := client.Get("http://" + listen + "/")
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode == 200 && string(b) == "ok"
	})
	waitUntil(t, "the resume line", g.exited, g.logs, func() bool {
		return strings.Contains(g.logs.String(), "accepting again after")
	})
	g.stop(t)
}

// The event loops stopping without a SIGTERM is a failed exit, for a
// supervisor to restart the process (it used to be status 0). strace
// makes a loop end the way gnet ends one: its acceptor's accept4 fails
// while it still accepts, which the eventfd the loop's own accept needs
// is delayed to keep open.
func TestLoopsStoppingUnaskedExitNonZero(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace not installed")
	}
	if out, err := exec.Command(strace, "-f", "-o", "/dev/null", "true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here: %v %s", err, out)
	}
	listen := freeAddr(t)
	cfg := writeConfig(t, fmt.Sprintf("listen: %s\nadmin: \"off\"\nloops: 1\nroutes: []\n", listen))
	g := startCommand(t, traced(exec.Command(strace, "-f", "-o", "/dev/null", "-e", "trace=accept4,eventfd2",
		"-e", "inject=eventfd2:delay_enter=1500000", "-e", "inject=accept4:error=EMFILE",
		binary, "-config", cfg)))
	// The listener is bound before the loop starts: connections wait in
	// its queue for gnet's acceptor. Keep connecting until the process ends.
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for exited := false; !exited; {
		if c, err := net.DialTimeout("tcp", listen, time.Second); err == nil {
			conns = append(conns, c)
		}
		select {
		case <-g.exited:
			exited = true
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the process did not exit after its loop failed; output:\n%s", g.logs)
		}
	}
	if code := g.cmd.ProcessState.ExitCode(); code == 0 {
		t.Fatalf("exit status 0 after the loops stopped unasked; output:\n%s", g.logs)
	}
	if !strings.Contains(g.logs.String(), "stopped without a shutdown") {
		t.Errorf("no line says why the process exits:\n%s", g.logs)
	}
}

// accept4 failing with ENFILE (the system's file table) or ENOBUFS
// (socket memory), made to by strace's fault injection on the first
// three calls (of each thread): the loop pauses its listener, tries
// again, and the request that waited in the listen queue is served.
func TestAcceptErrorsPauseAndRecover(t *testing.T) {
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace not installed")
	}
	if out, err := exec.Command(strace, "-f", "-o", "/dev/null", "true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here: %v %s", err, out)
	}
	up := serveUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	for _, tc := range []struct{ errno, logged string }{
		{"ENFILE", "too many open files in system"},
		{"ENOBUFS", "no buffer space available"},
	} {
		t.Run(tc.errno, func(t *testing.T) {
			listen := freeAddr(t)
			cfg := writeConfig(t, fmt.Sprintf("listen: %s\nadmin: \"off\"\nloops: 1\nupstreams:\n  - {name: backend, nodes: [%q]}\nroutes:\n  - {id: all, prefix: /, upstream: backend}\n", listen, up))
			g := startCommand(t, traced(exec.Command(strace, "-f", "-o", "/dev/null", "-e", "trace=accept4",
				"-e", "inject=accept4:error="+tc.errno+":when=1..3", binary, "-config", cfg)))
			g.serving(t)
			client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Get("http://" + listen + "/")
			if err != nil {
				t.Fatalf("request while accept4 fails: %v; output:\n%s", err, g.logs)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "ok" {
				t.Fatalf("%d %q", resp.StatusCode, b)
			}
			// The notices are written after the request is served.
			waitUntil(t, "the pause and resume lines for "+tc.errno, g.exited, g.logs, func() bool {
				out := g.logs.String()
				return strings.Contains(out, "accept: "+tc.logged) && strings.Contains(out, "accepting again after")
			})
			// The cleanup ends the process group: strace keeps a SIGTERM to itself.
		})
	}
}

// traced runs cmd, strace and the binary it traces, in a process group of
// its own, for the test's cleanup to end both: killing strace alone
// leaves its tracee running.
func traced(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}
