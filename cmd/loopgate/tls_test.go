// HTTPS through the binary: curl, openssl s_client, Python's ssl and Go's
// client against a listener whose certificate a SIGHUP reloads.

package main

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
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

	"github.com/loopgate/loopgate/engine/tlsedge/tlstest"
)

// tlsProcess is the binary serving a plain and an HTTPS listener.
type tlsProcess struct {
	*reloadable
	https string
	ca    *tlstest.CA
	leaf  *tlstest.Leaf
}

func startTLSProcess(t *testing.T) *tlsProcess {
	t.Helper()
	p := &tlsProcess{ca: tlstest.NewCA(t, "binary test CA"), https: freeAddr(t)}
	p.leaf = p.ca.Leaf(tlstest.LeafOptions{Names: []string{"example.test"}})
	g := &reloadable{listen: freeAddr(t), admin: freeAddr(t)}
	text := fmt.Sprintf(`admin: %s
loops: 1
listeners:
  - address: %s
  - address: %s
    tls:
      certificates:
        - {cert: %s, key: %s}
`, g.admin, g.listen, p.https, p.leaf.CertFile, p.leaf.KeyFile) + fmt.Sprintf(okRoute, okUpstream(t))
	g.config = writeConfig(t, text)
	g.gateway = startProcess(t, "-config", g.config)
	waitUntil(t, "/readyz to answer 200", g.exited, g.logs, func() bool {
		code, _, err := adminGet(g.admin, "/readyz")
		return err == nil && code == 200
	})
	p.reloadable = g
	return p
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed", name)
	}
	return path
}

func (p *tlsProcess) port() string { _, port, _ := net.SplitHostPort(p.https); return port }

func TestHTTPSThroughTheBinary(t *testing.T) {
	p := startTLSProcess(t)
	t.Run("curl", func(t *testing.T) {
		curl := needTool(t, "curl")
		for _, v := range []string{"--tlsv1.2", "--tlsv1.3"} {
			max := "1.2"
			if v == "--tlsv1.3" {
				max = "1.3"
			}
			out, err := exec.Command(curl, "-sS", v, "--tls-max", max, "--cacert", p.ca.File,
				"--resolve", "example.test:"+p.port()+":127.0.0.1", "https://example.test:"+p.port()+"/c",
				"-w", " %{http_code} %{http_version}").CombinedOutput()
			if err != nil || string(out) != "ok 200 1.1" {
				t.Errorf("curl %s: %v %q", v, err, out)
			}
		}
	})
	t.Run("openssl resumption", func(t *testing.T) {
		openssl := needTool(t, "openssl")
		sess := filepath.Join(t.TempDir(), "sess.pem")
		for _, v := range []string{"-tls1_2", "-tls1_3"} {
			run := func(args ...string) string {
				cmd := exec.Command(openssl, append([]string{"s_client", "-connect", p.https, "-servername", "example.test",
					"-CAfile", p.ca.File, "-ign_eof", v}, args...)...)
				// A request, so a TLS 1.3 ticket (sent after the handshake) is read
				// before the client ends.
				cmd.Stdin = strings.NewReader("GET /o HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n")
				out, _ := cmd.CombinedOutput()
				return string(out)
			}
			first := run("-sess_out", sess)
			if !strings.Contains(first, "Verify return code: 0 (ok)") || !strings.Contains(first, "\r\n\r\nok") || !strings.Contains(first, "New, ") {
				t.Fatalf("openssl %s first connection:\n%s", v, first)
			}
			if second := run("-sess_in", sess); !strings.Contains(second, "Reused, ") {
				t.Errorf("openssl %s did not resume:\n%s", v, second)
			}
		}
	})
	t.Run("python ssl", func(t *testing.T) {
		python := needTool(t, "python3")
		script := `import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
with socket.create_connection(("127.0.0.1", int(sys.argv[2]))) as raw:
    with ctx.wrap_socket(raw, server_hostname="example.test") as s:
        s.sendall(b"GET /py HTTP/1.1\r\nHost: example.test\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            b = s.recv(4096)
            if not b:
                break
            data += b
        print(s.version(), data.split(b"\r\n")[0].decode(), data.split(b"\r\n\r\n", 1)[1].decode())
`
		out, err := exec.Command(python, "-c", script, p.ca.File, p.port()).CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) != "TLSv1.3 HTTP/1.1 200 OK ok" {
			t.Errorf("python: %v %q", err, out)
		}
	})
	if code, body, err := adminGet(p.listen, "/plain"); err != nil || code != 200 || body != "ok" {
		t.Errorf("plain listener: %d %q %v", code, body, err)
	}
	t.Run("heap floor", func(t *testing.T) {
		if os.Getenv("GOGC") != "" {
			t.Skip("GOGC is set: the binary keeps it")
		}
		// tls.gc_heap_floor's default: the heap goal is the live heap plus
		// 64 MiB, where GOGC=100 would make it about twice the live heap.
		_, body, err := adminGet(p.admin, "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		var next float64
		for _, line := range strings.Split(body, "\n") {
			if v, ok := strings.CutPrefix(line, "go_memstats_next_gc_bytes "); ok {
				next, _ = strconv.ParseFloat(v, 64)
			}
		}
		if next < 64<<20 {
			t.Errorf("go_memstats_next_gc_bytes %v, want at least 64 MiB", next)
		}
	})
}

// SIGHUP re-reads the certificate files: new handshakes get the renewed
// certificate, a connection opened before keeps its own and is served.
func TestSIGHUPReloadsCertificates(t *testing.T) {
	p := startTLSProcess(t)
	cfg := &tls.Config{RootCAs: p.ca.Pool(), ServerName: "example.test"}
	old, err := tls.Dial("tcp", p.https, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	before := old.ConnectionState().PeerCertificates[0].SerialNumber.String()

	renewed := p.ca.Leaf(tlstest.LeafOptions{Names: []string{"example.test"}})
	for from, to := range map[string]string{renewed.CertFile: p.leaf.CertFile, renewed.KeyFile: p.leaf.KeyFile} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p.cmd.Process.Signal(syscall.SIGHUP)
	if line := p.waitReloadLine(t, 1); line["level"] != "info" {
		t.Fatalf("reload line: %v", line)
	}
	fresh, err := tls.Dial("tcp", p.https, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if after := fresh.ConnectionState().PeerCertificates[0].SerialNumber.String(); after == before {
		t.Fatalf("after SIGHUP a new handshake still got certificate %s", before)
	}
	_ = old.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(old, "GET /kept HTTP/1.1\r\nHost: example.test\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(old), nil)
	if err != nil {
		t.Fatalf("the connection opened before the reload: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "ok" {
		t.Fatalf("the connection opened before the reload: %q", body)
	}
}

// -check loads every certificate and names the file that fails.
func TestCheckValidatesCertificates(t *testing.T) {
	ca := tlstest.NewCA(t, "check CA")
	good := ca.Leaf(tlstest.LeafOptions{Names: []string{"good.test"}})
	expired := ca.Leaf(tlstest.LeafOptions{Names: []string{"old.test"}, Expired: true})
	cfg := func(l *tlstest.Leaf, key string) string {
		return writeConfig(t, fmt.Sprintf("admin: \"off\"\nlisteners:\n  - address: 127.0.0.1:0\n    tls:\n      certificates: [{cert: %s, key: %s}]\n", l.CertFile, key))
	}
	if code, out, errOut := runCommand(t, "-check", "-config", cfg(good, good.KeyFile)); code != 0 || out != "config ok\n" {
		t.Fatalf("good certificate: exit %d %q %q", code, out, errOut)
	}
	for name, c := range map[string]struct {
		path, want string
	}{
		"expired":      {cfg(expired, expired.KeyFile), expired.CertFile + ": the certificate expired on "},
		"key mismatch": {cfg(good, expired.KeyFile), "certificate " + good.CertFile + " with key " + expired.KeyFile + ": tls: private key does not match public key"},
	} {
		code, _, errOut := runCommand(t, "-check", "-config", c.path)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q; want it to contain %q", name, code, errOut, c.want)
		}
	}
}
