// WebSocket tunnels through the binary: a python3-websockets server behind
// it and a node-ws client in front, and tunnels open across a reload and a
// drain.

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// wsTools are the real peers, from Debian packages; the test is skipped
// without them.
const (
	python3  = "/usr/bin/python3"
	nodePath = "/usr/share/nodejs"
)

func needPeers(t *testing.T) {
	t.Helper()
	if exec.Command(python3, "-c", "import websockets").Run() != nil {
		t.Skip("python3-websockets is not installed")
	}
	if _, err := os.Stat(nodePath + "/ws"); err != nil {
		t.Skip("node-ws is not installed")
	}
}

// startWSServer runs testdata/ws_server.py on a free port and returns the
// port's address once it listens.
func startWSServer(t *testing.T) string {
	t.Helper()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command(python3, "testdata/ws_server.py", port)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		ready <- line
	}()
	select {
	case line := <-ready:
		if strings.TrimSpace(line) != "ready" {
			t.Fatalf("ws_server.py: %q", line)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ws_server.py did not start")
	}
	return addr
}

// Text and binary messages from 1 byte to 16 MiB, fragmented messages,
// ping/pong, the close handshake from either side, a frame fed one byte
// at a time, a frame sent behind the upgrade request before the 101, and
// an upstream that refuses the upgrade, between node-ws and python3-websockets through the
// gateway; each tunnel then has its access line.
func TestWebSocketPeersThroughBinary(t *testing.T) {
	needPeers(t)
	up := startWSServer(t)
	logPath := t.TempDir() + "/access.log"
	g, listen, admin := startServing(t, "access_log: {path: "+logPath+"}\n"+`
upstreams:
  - {name: ws, nodes: ["%s"]}
routes:
  - {id: ws, prefix: /, upstream: ws}
`, up)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	client := exec.CommandContext(ctx, "node", "testdata/ws_client.js", "ws://"+listen)
	client.Env = append(os.Environ(), "NODE_PATH="+nodePath)
	out, err := client.CombinedOutput()
	if err != nil {
		t.Fatalf("ws_client.js: %v\n%s\ngateway output:\n%s", err, out, g.logs)
	}
	for _, c := range []string{"messages", "fragmented", "pingPong", "serverClose", "byteByByte", "pipelined", "refused"} {
		if !strings.Contains(string(out), "ok "+c+"\n") {
			t.Errorf("case %s did not pass:\n%s", c, out)
		}
	}
	// Every tunnel closed, and logged once with its bytes; the refusal is
	// an error line.
	waitUntil(t, "the tunnels to close", g.exited, g.logs, func() bool {
		_, body, err := adminGet(admin, "/metrics")
		return err == nil && strings.Contains(body, "\nloopgate_tunnels_open 0\n") &&
			strings.Contains(body, `loopgate_route_tunnels_total{route="ws"} 6`)
	})
	waitUntil(t, "the access lines", g.exited, g.logs, func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Count(string(b), "\n") >= 7
	})
	b, _ := os.ReadFile(logPath)
	tunnels, big := 0, false
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("access line %q: %v", line, err)
		}
		if m["status"] == 101.0 {
			tunnels++
			if !strings.HasPrefix(m["end"].(string), "tunnel_") {
				t.Errorf("tunnel line without a tunnel end: %s", line)
			}
			big = big || m["bytes_in"].(float64) > 2*(16<<20)
		}
	}
	if tunnels != 6 || !big {
		t.Errorf("%d tunnel lines (want 6), one carrying the 16 MiB messages: %v\n%s", tunnels, big, b)
	}
	if !strings.Contains(g.logs.String(), `"event":"upgrade_refused"`) {
		t.Errorf("no upgrade_refused error line:\n%s", g.logs)
	}
}

// echoUpstream switches protocols and echoes, as the engine tests' raw
// upstream does.
func echoUpstream(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
				io.Copy(c, br)
			}()
		}
	}()
	return ln.Addr().String()
}

type rawTunnel struct {
	c  net.Conn
	br *bufio.Reader
}

func dialTunnel(t *testing.T, listen string) *rawTunnel {
	t.Helper()
	c, err := net.DialTimeout("tcp", listen, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(60 * time.Second))
	io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	return &rawTunnel{c, br}
}

func (rt *rawTunnel) echo(t *testing.T, msg string) {
	t.Helper()
	if _, err := io.WriteString(rt.c, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(rt.br, got); err != nil || string(got) != msg {
		t.Fatalf("echo %q: %q %v", msg, got, err)
	}
}

// A reload keeps an open tunnel on its config version: opened with
// websocket.idle_timeout 1s, it is closed after 1s idle although the
// reload made it 1h, while a tunnel opened after the reload outlives 1s
// idle. SIGTERM leaves tunnels open until timeouts.drain runs out, then
// closes them and exits 0.
func TestTunnelsAcrossReloadAndDrain(t *testing.T) {
	up := echoUpstream(t)
	// The drain leaves a loaded machine seconds to see /readyz draining
	// and echo once more before it ends.
	body := `
timeouts: {drain: 3s}
websocket: {idle_timeout: %s}
upstreams:
  - {name: ws, nodes: ["` + up + `"]}
routes:
  - {id: ws, prefix: /, upstream: ws}
`
	g := startReloadable(t, fmt.Sprintf(body, "1s")+"%.0s", "")
	old := dialTunnel(t, g.listen)
	old.echo(t, "before the reload")

	g.rewrite(t, g.head()+fmt.Sprintf(body, "1h"))
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if line := g.waitReloadLine(t, 1); line["level"] != "info" || !strings.Contains(fmt.Sprint(line["changes"]), "websocket") {
		t.Fatalf("reload: %v", line)
	}
	fresh := dialTunnel(t, g.listen)
	fresh.echo(t, "after the reload")
	freshUsed := time.Now()
	if _, err := old.br.ReadByte(); err != io.EOF {
		t.Fatalf("the tunnel opened before the reload, idle past its 1s: %v, want EOF", err)
	}
	// What is under test is a tunnel left idle longer than the old
	// version's timeout, so the test lets that time pass.
	time.Sleep(time.Until(freshUsed.Add(1500 * time.Millisecond)))
	fresh.echo(t, "idle for longer than 1s, on the new version")

	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "/readyz to report draining", g.exited, g.logs, func() bool {
		code, _, err := adminGet(g.admin, "/readyz")
		return err == nil && code == http.StatusServiceUnavailable
	})
	fresh.echo(t, "during the drain") // not closed before the deadline
	if _, err := fresh.br.ReadByte(); err != io.EOF {
		t.Fatalf("tunnel at the drain deadline: %v, want EOF", err)
	}
	select {
	case <-g.exited:
	case <-time.After(15 * time.Second):
		t.Fatalf("loopgate did not exit after the drain; output:\n%s", g.logs)
	}
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit code %d; output:\n%s", code, g.logs)
	}
}
