// Operator basics through the binary: the systemd notify protocol on a
// fake $NOTIFY_SOCKET, and the pidfile.

package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// notifySocket is the service manager's end of $NOTIFY_SOCKET.
type notifySocket struct {
	conn *net.UnixConn
	name string
}

func listenNotify(t *testing.T, name string) *notifySocket {
	t.Helper()
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &notifySocket{conn: c, name: name}
}

// next returns the next datagram's fields, KEY=VALUE per line.
func (n *notifySocket) next(t *testing.T, g *gateway) map[string]string {
	t.Helper()
	buf := make([]byte, 4096)
	_ = n.conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	k, err := n.conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification: %v; output:\n%s", err, g.logs)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(string(buf[:k]), "\n") {
		if key, v, ok := strings.Cut(line, "="); ok {
			fields[key] = v
		}
	}
	return fields
}

func monotonicNow(t *testing.T) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	return ts.Nano() / 1000
}

// READY=1 once the listener accepts, RELOADING=1 with the monotonic clock
// and READY=1 around a SIGHUP reload, STOPPING=1 when SIGTERM begins the
// drain; on a filesystem socket and an abstract one alike.
func TestSystemdNotify(t *testing.T) {
	for _, tc := range []struct{ kind, name string }{
		{"path", filepath.Join(t.TempDir(), "notify.sock")},
		{"abstract", fmt.Sprintf("@loopgate-test-%d-%d", os.Getpid(), rand.Int64())},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			ns := listenNotify(t, tc.name)
			up := serveUpstream(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
			listen := freeAddr(t)
			cfg := writeConfig(t, fmt.Sprintf("listen: %s\nadmin: \"off\"\nloops: 1\nupstreams:\n  - {name: backend, nodes: [%q]}\nroutes:\n  - {id: all, prefix: /, upstream: backend}\n", listen, up))
			cmd := exec.Command(binary, "-config", cfg)
			cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+tc.name)
			g := startCommand(t, cmd)

			if f := ns.next(t, g); f["READY"] != "1" || !strings.Contains(f["STATUS"], listen) {
				t.Fatalf("first notification %v, want READY=1 and a status naming %s", f, listen)
			}
			// Ready means accepting: a request goes through at once.
			resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + listen + "/")
			if err != nil {
				t.Fatalf("request right after READY=1: %v", err)
			}
			resp.Body.Close()

			before := monotonicNow(t)
			if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
			f := ns.next(t, g)
			after := monotonicNow(t)
			usec, err := strconv.ParseInt(f["MONOTONIC_USEC"], 10, 64)
			if f["RELOADING"] != "1" || err != nil || usec < before || usec > after {
				t.Fatalf("on SIGHUP: %v, want RELOADING=1 and MONOTONIC_USEC within [%d, %d]", f, before, after)
			}
			if f := ns.next(t, g); f["READY"] != "1" || !strings.Contains(f["STATUS"], "reload applied") {
				t.Fatalf("after the reload: %v, want READY=1", f)
			}

			if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if f := ns.next(t, g); f["STOPPING"] != "1" {
				t.Fatalf("on SIGTERM: %v, want STOPPING=1", f)
			}
			select {
			case <-g.exited:
			case <-time.After(20 * time.Second):
				t.Fatalf("no exit after SIGTERM; output:\n%s", g.logs)
			}
			if code := g.cmd.ProcessState.ExitCode(); code != 0 {
				t.Fatalf("exit %d; output:\n%s", code, g.logs)
			}
		})
	}
}

// The pidfile holds the PID while the process runs; a second instance on
// it is refused and leaves it alone; a clean exit removes it; a stale one
// (its process gone, so its lock free) is replaced.
func TestPidfile(t *testing.T) {
	dir := t.TempDir()
	pidPath := filepath.Join(dir, "loopgate.pid")
	config := func() string {
		return writeConfig(t, fmt.Sprintf("listen: %s\nadmin: \"off\"\nloops: 1\npid: %s\nroutes: []\n", freeAddr(t), pidPath))
	}
	if err := os.WriteFile(pidPath, []byte("999999\n"), 0o644); err != nil { // stale
		t.Fatal(err)
	}
	g := startProcess(t, "-config", config())
	g.serving(t)
	if pid, err := readPid(pidPath); err != nil || pid != g.cmd.Process.Pid {
		t.Fatalf("pidfile: %d %v, want %d", pid, err, g.cmd.Process.Pid)
	}

	code, _, errOut := runCommand(t, "-config", config())
	if code == 0 || !strings.Contains(errOut, "held by running process "+strconv.Itoa(g.cmd.Process.Pid)) {
		t.Fatalf("a second instance on the pidfile: exit %d, stderr %q", code, errOut)
	}
	// -pidfile overrides pid: in the config, and is refused the same way.
	code, _, errOut = runCommand(t, "-config", writeConfig(t, fmt.Sprintf("listen: %s\nadmin: \"off\"\nroutes: []\n", freeAddr(t))), "-pidfile", pidPath)
	if code == 0 || !strings.Contains(errOut, "held by running process") {
		t.Fatalf("-pidfile on a held pidfile: exit %d, stderr %q", code, errOut)
	}
	if pid, err := readPid(pidPath); err != nil || pid != g.cmd.Process.Pid {
		t.Fatalf("pidfile after the refused start: %d %v", pid, err)
	}

	g.stop(t)
	if _, err := os.Stat(pidPath); !os.IsNotExist(err) {
		t.Fatalf("pidfile after a clean exit: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left in the pidfile's directory: %v", entries)
	}
}

// readPid reads the PID in a pidfile.
func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
