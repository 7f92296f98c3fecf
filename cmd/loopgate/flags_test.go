// The command line as an operator meets it: -version, mistakes that exit 2,
// bind errors that name the address, and the startup line.

package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildInfo returns what `go version -m` reads from a binary: the main
// module's version and the build settings.
func buildInfo(t *testing.T, bin string) (version string, settings map[string]string) {
	t.Helper()
	out, err := exec.Command(goTool(), "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	settings = map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.TrimPrefix(line, "\t"), "\t")
		switch {
		case len(f) >= 3 && f[0] == "mod":
			version = f[2]
		case len(f) >= 2 && f[0] == "build":
			k, v, _ := strings.Cut(f[1], "=")
			settings[k] = v
		}
	}
	return version, settings
}

// checkVersionOutput compares -version's output with the binary's own
// build information.
func checkVersionOutput(t *testing.T, bin, out string) {
	t.Helper()
	version, settings := buildInfo(t, bin)
	orUnknown := func(k string) string {
		if v, ok := settings[k]; ok {
			return v
		}
		return "unknown"
	}
	want := fmt.Sprintf("loopgate %s\nrevision: %s\ncommit time: %s\nmodified: %s\ngo: %s %s/%s\n",
		version, orUnknown("vcs.revision"), orUnknown("vcs.time"), orUnknown("vcs.modified"), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if out != want {
		t.Errorf("-version printed\n%s\nwant\n%s", out, want)
	}
}

// -version prints and exits 0 without reading the config.
func TestVersionFlag(t *testing.T) {
	code, out, errOut := runCommand(t, "-version", "-config", filepath.Join(t.TempDir(), "missing.yaml"))
	if code != 0 || errOut != "" {
		t.Fatalf("-version: exit %d, stderr %q", code, errOut)
	}
	checkVersionOutput(t, binary, out)
}

// A build stamped from git shows its revision, commit time and whether the
// tree was modified. The shared test binary may be built with
// -buildvcs=false (GOFLAGS), so this builds one with the stamp.
func TestVersionShowsVCSStamp(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git to stamp a build with")
	}
	// go build stamps only a checkout whose .git is a directory
	// (cmd/go/internal/vcs); in a git worktree .git is a file.
	if top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output(); err == nil {
		if fi, err := os.Stat(filepath.Join(strings.TrimSpace(string(top)), ".git")); err == nil && !fi.IsDir() {
			t.Skip("a git worktree: go build does not stamp VCS information here")
		}
	}
	bin := filepath.Join(t.TempDir(), "loopgate-vcs")
	args := []string{"build", "-buildvcs=true", "-o", bin}
	if raceEnabled() {
		args = append(args, "-race")
	}
	build := exec.Command(goTool(), append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		if bytes.Contains(out, []byte("VCS")) {
			t.Skipf("this checkout cannot stamp a build: %s", out)
		}
		t.Fatalf("go build -buildvcs=true: %v\n%s", err, out)
	}
	_, settings := buildInfo(t, bin)
	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(settings["vcs.revision"]) || settings["vcs.time"] == "" || settings["vcs.modified"] == "" {
		t.Fatalf("the build carries no VCS stamp: %v", settings)
	}
	out, err := exec.Command(bin, "-version").Output()
	if err != nil {
		t.Fatalf("-version: %v", err)
	}
	checkVersionOutput(t, bin, string(out))
}

func TestWriteVersion(t *testing.T) {
	var b bytes.Buffer
	writeVersion(&b, &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/loopgate/loopgate", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{
			{Key: "-race", Value: "false"},
			{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
			{Key: "vcs.time", Value: "2026-01-02T03:04:05Z"},
			{Key: "vcs.modified", Value: "true"},
		},
	})
	want := "loopgate v1.2.3\nrevision: 0123456789abcdef0123456789abcdef01234567\ncommit time: 2026-01-02T03:04:05Z\nmodified: true\n" +
		"go: go1.99.1 " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

// Command-line mistakes exit 2 with the reason and the usage, as the flag
// package does for an unknown flag, and start nothing.
func TestCommandLineMistakesExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"gateway.yaml"}, `loopgate: unexpected argument "gateway.yaml": loopgate takes flags only (the config file is given with -config)`},
		{[]string{"-check", "extra"}, `loopgate: unexpected argument "extra"`},
		{[]string{"-check", "--", "-loops"}, `loopgate: unexpected argument "-loops"`},
		{[]string{"-loops", "-1", "-check"}, "loopgate: -loops -1: want 0 (one per CPU) or more"},
		{[]string{"-check", "-loops=-8"}, "loopgate: -loops -8: want 0 (one per CPU) or more"},
		{[]string{"-loops", "two"}, `invalid value "two" for flag -loops`},
		{[]string{"-no-such-flag"}, "flag provided but not defined: -no-such-flag"},
	} {
		code, out, errOut := runCommand(t, tc.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "usage: loopgate") {
			t.Errorf("loopgate %q: exit %d, stdout %q, stderr %q; want exit 2 and %q with the usage", tc.args, code, out, errOut, tc.want)
		}
	}
	// The sentinel is not a value: an explicit 0 is valid, and so is -h.
	if code, out, errOut := runCommand(t, "-loops", "0", "-check"); code != 0 || out != "config ok\n" {
		t.Errorf("-loops 0 -check: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	if code, _, errOut := runCommand(t, "-h"); code != 0 || !strings.Contains(errOut, "usage: loopgate") {
		t.Errorf("-h: exit %d, stderr %q", code, errOut)
	}
}

func TestListenError(t *testing.T) {
	gnetStyle := os.NewSyscallError("bind", syscall.EADDRINUSE)
	err := listenError("127.0.0.1:8080", gnetStyle)
	if err.Error() != "listen 127.0.0.1:8080: address already in use" || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("listenError(gnet's error) = %v", err)
	}
	other := errors.New("engine: something")
	if err := listenError("h:1", other); err.Error() != "listen h:1: engine: something" || !errors.Is(err, other) {
		t.Errorf("listenError(other) = %v", err)
	}
}

// holdPort keeps a loopback port bound, as another program would, and
// returns its address.
func holdPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// gateway is a loopgate process started for one test.
type gateway struct {
	cmd    *exec.Cmd
	logs   *syncBuffer
	exited chan struct{}
}

// startProcess starts the binary with args; the process is killed when
// the test ends if it is still running.
func startProcess(t *testing.T, args ...string) *gateway {
	t.Helper()
	return startCommand(t, exec.Command(binary, args...))
}

// startCommand starts cmd, the binary or a wrapper that execs it, as
// startProcess does.
func startCommand(t *testing.T, cmd *exec.Cmd) *gateway {
	t.Helper()
	g := &gateway{cmd: cmd, logs: &syncBuffer{}, exited: make(chan struct{})}
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.cmd.Wait(); close(g.exited) }()
	t.Cleanup(func() {
		select {
		case <-g.exited:
		default:
			if a := g.cmd.SysProcAttr; a != nil && a.Setpgid {
				syscall.Kill(-g.cmd.Process.Pid, syscall.SIGKILL) // the wrapper and what it runs
			} else {
				g.cmd.Process.Kill()
			}
			<-g.exited
		}
	})
	return g
}

var servingLine = regexp.MustCompile(`loopgate: serving on (\S+) \(admin (\S+)\)`)

// serving waits for the startup line and returns the two addresses in it.
func (g *gateway) serving(t *testing.T) (listen, admin string) {
	t.Helper()
	var m []string
	waitUntil(t, "the startup line", g.exited, g.logs, func() bool {
		m = servingLine.FindStringSubmatch(g.logs.String())
		return m != nil
	})
	return m[1], m[2]
}

// stop sends SIGTERM and waits for exit status 0.
func (g *gateway) stop(t *testing.T) {
	t.Helper()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("loopgate did not stop; output:\n%s", g.logs)
	}
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d after SIGTERM; output:\n%s", code, g.logs)
	}
}

// lastLine returns the last line of s, with its newline. Earlier lines may
// be warnings about the config.
func lastLine(s string) string {
	return s[strings.LastIndexByte(strings.TrimSuffix(s, "\n"), '\n')+1:]
}

// A port another program holds, for the gateway or the admin listener:
// exit 1, and the message names the address and the reason only.
func TestBindErrorsNameTheAddress(t *testing.T) {
	taken := holdPort(t)
	for _, tc := range []struct{ yaml, want string }{
		{"listen: " + taken + "\nadmin: \"off\"\n", "loopgate: listen " + taken + ": address already in use\n"},
		{"listen: 127.0.0.1:0\nadmin: " + taken + "\n", "loopgate: admin: listen " + taken + ": address already in use\n"},
	} {
		code, out, errOut := runCommand(t, "-config", writeConfig(t, tc.yaml))
		if code != 1 || out != "" || lastLine(errOut) != tc.want {
			t.Errorf("config %q: exit %d, stdout %q, stderr %q; want exit 1 and a last line %q", tc.yaml, code, out, errOut, tc.want)
		}
	}
}

// The listeners use SO_REUSEPORT, with which a second Loopgate on the same
// port would bind without an error and take half the connections. It must
// refuse to start instead, and the first keep serving.
func TestSecondGatewayOnSamePortRefused(t *testing.T) {
	cfg := writeConfig(t, "listen: "+freeAddr(t)+"\nadmin: \"off\"\nloops: 1\n")
	first := startProcess(t, "-config", cfg)
	listen, _ := first.serving(t)

	code, out, errOut := runCommand(t, "-config", cfg)
	if want := "loopgate: listen " + listen + ": address already in use\n"; code != 1 || out != "" || lastLine(errOut) != want {
		t.Errorf("second loopgate on %s: exit %d, stdout %q, stderr %q; want exit 1 and a last line %q", listen, code, out, errOut, want)
	}
	select {
	case <-first.exited:
		t.Fatalf("the first loopgate exited; output:\n%s", first.logs)
	default:
	}
	first.stop(t)
}

// With port 0 the startup line gives the ports the kernel chose, and both
// answer there.
func TestStartupLineNamesRealAddresses(t *testing.T) {
	g := startProcess(t, "-config", writeConfig(t, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\nloops: 1\n"))
	listen, adminAddr := g.serving(t)
	for _, a := range []string{listen, adminAddr} {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "0" {
			t.Fatalf("startup line names %q, want a resolved port; output:\n%s", a, g.logs)
		}
	}
	if code, body, err := adminGet(adminAddr, "/healthz"); err != nil || code != 200 || body != "ok" {
		t.Errorf("admin at %s: %d %q %v", adminAddr, code, body, err)
	}
	// No routes: the gateway itself answers 404.
	if code, _, err := adminGet(listen, "/anything"); err != nil || code != 404 {
		t.Errorf("gateway at %s: %d %v", listen, code, err)
	}
	g.stop(t)

	g = startProcess(t, "-config", writeConfig(t, "listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\n"))
	if _, adminAddr := g.serving(t); adminAddr != "off" {
		t.Errorf("with admin off the startup line says admin %q", adminAddr)
	}
	g.stop(t)
}

// -check warns on stderr about a config that is valid but almost certainly
// a mistake, and still exits 0; a clean config gets no warning. Serving
// prints the same warnings at startup.
func TestCheckWarns(t *testing.T) {
	head := "listen: 127.0.0.1:0\nadmin: \"off\"\nupstreams:\n  - {name: backend, nodes: [\"127.0.0.1:1\"]}\n"
	for _, tc := range []struct{ routes, want string }{
		{"", "loopgate: warning: config: routes: none, so every request gets 404 (code 40401)\n"},
		{"routes:\n  - {id: api, path: /api/**, upstream: backend}\n  - {id: v2, prefix: /api/v2/, upstream: backend}\n",
			`loopgate: warning: config: routes[1] (id "v2"): shadowed, no request can reach it: routes[0] (id "api") decides every request it matches` + "\n"},
		{"routes:\n  - {id: all, path: /items, methods: [GET, POST], upstream: backend}\n  - {id: reads, path: /items/, methods: [GET], upstream: backend}\n",
			`loopgate: warning: config: routes[1] (id "reads"): shadowed, no request can reach it: routes[0] (id "all") decides every request it matches` + "\n"},
		{"routes:\n  - {id: all, prefix: /, upstream: backend}\n  - {id: reads, path: /items, methods: [GET], upstream: backend}\n", ""},
	} {
		code, out, errOut := runCommand(t, "-check", "-config", writeConfig(t, head+tc.routes))
		if code != 0 || out != "config ok\n" || errOut != tc.want {
			t.Errorf("-check with routes %q: exit %d, stdout %q, stderr %q; want exit 0, config ok and stderr %q", tc.routes, code, out, errOut, tc.want)
		}
	}

	g := startProcess(t, "-config", writeConfig(t, head+"loops: 1\n"))
	g.serving(t)
	if !strings.Contains(g.logs.String(), "loopgate: warning: config: routes: none") {
		t.Errorf("no warning at startup; output:\n%s", g.logs)
	}
	g.stop(t)
}
