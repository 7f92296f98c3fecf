// The packaging files: the systemd unit (checked by systemd-analyze where
// it is installed) and the Dockerfile (parsed here; no docker engine runs
// in the tests), with the binary built as the Dockerfile builds it.

package main

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// unitKeys reads a systemd unit: section.key to values, in order.
func unitKeys(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not a key=value line in a section: %q", path, n, line)
			}
			keys[section+"."+k] = append(keys[section+"."+k], v)
		}
	}
	return keys
}

func TestSystemdUnit(t *testing.T) {
	const unit = "dist/loopgate.service"
	keys := unitKeys(t, unit)
	for key, want := range map[string]string{
		"Service.Type":         "notify",
		"Service.NotifyAccess": "main",
		"Service.ExecReload":   "/bin/kill -HUP $MAINPID",
		"Service.Restart":      "on-failure",
		"Service.KillSignal":   "SIGTERM",
		"Install.WantedBy":     "multi-user.target",
	} {
		if got := keys[key]; len(got) != 1 || got[0] != want {
			t.Errorf("%s = %q, want %q", key, got, want)
		}
	}
	if v := keys["Service.LimitNOFILE"]; len(v) != 1 || v[0] == "" {
		t.Errorf("LimitNOFILE = %q: the unit must set the descriptor limit", v)
	}
	if v := keys["Service.ExecStart"]; len(v) != 1 || !strings.Contains(v[0], "-pidfile /run/loopgate/") || keys["Service.RuntimeDirectory"][0] != "loopgate" {
		t.Errorf("ExecStart %q: want a pidfile in the RuntimeDirectory", v)
	}
	// The stop timeout outlasts the default drain (timeouts.drain, 30s).
	if v := keys["Service.TimeoutStopSec"]; len(v) != 1 || v[0] <= "30" || len(v[0]) != 2 {
		t.Errorf("TimeoutStopSec = %q, want more than the 30s drain", v)
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: the unit's syntax is checked by the key reader only")
	}
	// verify checks that the commands exist: point them at the test's build.
	b, err := os.ReadFile(unit)
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "loopgate.service")
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/loopgate", binary)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", "--man=no", copyPath).CombinedOutput()
	// systemd-analyze exits 0 after "ignoring" a bad line: any output is a finding.
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	op   string // upper case
	args string
}

func parseDockerfile(t *testing.T, path string) []instruction {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{"FROM": true, "ARG": true, "RUN": true, "COPY": true, "ADD": true, "WORKDIR": true,
		"ENV": true, "USER": true, "EXPOSE": true, "ENTRYPOINT": true, "CMD": true, "LABEL": true,
		"STOPSIGNAL": true, "HEALTHCHECK": true, "VOLUME": true, "SHELL": true, "ONBUILD": true}
	var out []instruction
	var cur *instruction
	for i, raw := range strings.Split(string(b), "\n") {
		line := strings.TrimSpace(raw)
		if cur == nil && (line == "" || line[0] == '#') {
			continue
		}
		if cur != nil && line != "" && line[0] == '#' {
			continue // comments may sit between continuation lines
		}
		cont := strings.HasSuffix(line, `\`)
		line = strings.TrimSuffix(line, `\`)
		if cur == nil {
			op, args, _ := strings.Cut(line, " ")
			if !known[strings.ToUpper(op)] {
				t.Fatalf("%s:%d: unknown instruction %q", path, i+1, op)
			}
			cur = &instruction{line: i + 1, op: strings.ToUpper(op), args: strings.TrimSpace(args)}
		} else {
			cur.args += " " + strings.TrimSpace(line)
		}
		if !cont {
			out = append(out, *cur)
			cur = nil
		}
	}
	if cur != nil {
		t.Fatalf("%s: the last instruction ends in a line continuation", path)
	}
	return out
}

func TestDockerfile(t *testing.T) {
	const root = "../.."
	ins := parseDockerfile(t, filepath.Join(root, "Dockerfile"))
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(gomod)

	args := map[string]string{}
	stages := map[string]bool{}
	var final []instruction // the last stage's instructions
	var build string        // the go build command
	for _, in := range ins {
		switch in.op {
		case "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		case "FROM":
			f := strings.Fields(in.args)
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				stages[f[2]] = true
			} else if len(f) != 1 {
				t.Errorf("line %d: FROM %q: want an image and at most AS name", in.line, in.args)
			}
			final = nil
		case "COPY":
			f := strings.Fields(in.args)
			if strings.HasPrefix(f[0], "--from=") {
				if !stages[strings.TrimPrefix(f[0], "--from=")] {
					t.Errorf("line %d: COPY %s: no such stage before it", in.line, f[0])
				}
			} else {
				for _, src := range f[:len(f)-1] {
					if _, err := os.Stat(filepath.Join(root, src)); err != nil {
						t.Errorf("line %d: COPY source %s: %v", in.line, src, err)
					}
				}
			}
		case "ENTRYPOINT", "CMD":
			var argv []string
			if err := json.Unmarshal([]byte(in.args), &argv); err != nil || len(argv) == 0 {
				t.Errorf("line %d: %s %s: want the exec (JSON) form, so signals reach loopgate as PID 1: %v", in.line, in.op, in.args, err)
			}
		case "RUN":
			if strings.Contains(in.args, "go build") {
				build = in.args
			}
		}
		final = append(final, in)
	}
	if len(stages) == 0 {
		t.Error("not a multi-stage build")
	}
	if goLine == nil || args["GO_VERSION"] != string(goLine[1]) {
		t.Errorf("ARG GO_VERSION=%s, go.mod says go %s", args["GO_VERSION"], goLine[1])
	}
	user := ""
	for _, in := range final {
		if in.op == "USER" {
			user = in.args
		}
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("the final stage runs as %q, want a non-root user", user)
	}
	if !strings.HasPrefix(build, "CGO_ENABLED=0 go build ") || !strings.HasSuffix(build, " ./cmd/loopgate") {
		t.Fatalf("build command %q, want CGO_ENABLED=0 go build ... ./cmd/loopgate", build)
	}

	// Build as the Dockerfile does (its output path moved into the test's
	// directory) and check that the result is static: no interpreter, no
	// shared libraries. A build with these flags is a build of its own
	// (minutes the first time, cached after).
	if testing.Short() {
		t.Skip("-short: the Dockerfile's build is not run")
	}
	out := filepath.Join(t.TempDir(), "loopgate")
	argv := shellFields(strings.TrimPrefix(build, "CGO_ENABLED=0 "))
	for i := range argv {
		if argv[i] == "/out/loopgate" {
			argv[i] = out
		}
	}
	cmd := exec.Command(goTool(), argv[1:]...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%q: %v\n%s", argv, err, b)
	}
	f, err := elf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Fatalf("the Dockerfile's build is not static: it has %v", p.Type)
		}
	}
	if b, err := exec.Command(out, "-check", "-config", "dist/loopgate.yaml").CombinedOutput(); err != nil || !strings.Contains(string(b), "config ok") {
		t.Errorf("the image's config with the image's binary: %v\n%s", err, b)
	}
}

// shellFields splits a shell command line at blanks outside double
// quotes and drops the quotes; enough for the Dockerfile's RUN line.
func shellFields(s string) []string {
	var out []string
	var cur strings.Builder
	quoted, any := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, any = !quoted, true
		case r == ' ' && !quoted:
			if any {
				out = append(out, cur.String())
				cur.Reset()
				any = false
			}
		default:
			cur.WriteRune(r)
			any = true
		}
	}
	if any {
		out = append(out, cur.String())
	}
	return out
}
