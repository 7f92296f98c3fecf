// Upgrade tunnels through a real gateway: raw upstreams that switch
// protocols and then echo, raw clients, byte by byte and pipelined.

package engine_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/pool/pooltest"
)

// upgradeRequest is a WebSocket-style upgrade request for path.
func upgradeRequest(path string) string {
	return "GET " + path + " HTTP/1.1\r\nHost: example.test\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
}

// switchingUpstream answers every connection's first request with a 101
// and then echoes what it reads until EOF, then closes. Each upgrade
// request's head goes to heads.
func switchingUpstream(t *testing.T, heads chan<- *http.Request) string {
	return startRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if heads != nil {
			heads <- req
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
		io.Copy(c, br)
	})
}

// openTunnel sends raw (an upgrade request and whatever follows it) and
// reads the 101.
func openTestTunnel(t *testing.T, g *gateway, raw string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c := g.dial(t)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatalf("reading the 101: %v", err)
	}
	if resp.StatusCode != 101 || resp.Header.Get("Upgrade") != "websocket" ||
		!strings.EqualFold(resp.Header.Get("Connection"), "upgrade") || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("got %d %v", resp.StatusCode, resp.Header)
	}
	return c, br
}

func expectEcho(t *testing.T, br *bufio.Reader, want string) {
	t.Helper()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(br, got); err != nil {
		t.Fatalf("reading echo %q: %v (got %q)", want, err, got)
	}
	if string(got) != want {
		t.Fatalf("echo %q, want %q", got, want)
	}
}

// TestTunnelPipelinedAndByteByByte: bytes the client sent right behind its
// upgrade request reach the upstream first, in order, and a tunnel fed one
// byte at a time carries every byte; the upstream saw the Upgrade asked.
func TestTunnelPipelinedAndByteByByte(t *testing.T) {
	heads := make(chan *http.Request, 1)
	g := startGateway(t, oneRoute, switchingUpstream(t, heads))
	c, br := openTestTunnel(t, g, upgradeRequest("/chat")+"early-bytes|")
	req := <-heads
	if req.Header.Get("Upgrade") != "websocket" || !strings.EqualFold(req.Header.Get("Connection"), "upgrade") ||
		req.Header.Get("Sec-Websocket-Key") == "" {
		t.Fatalf("upstream got %v", req.Header)
	}
	expectEcho(t, br, "early-bytes|")
	msg := "byte by byte through the tunnel"
	for i := 0; i < len(msg); i++ {
		if _, err := c.Write([]byte{msg[i]}); err != nil {
			t.Fatal(err)
		}
		expectEcho(t, br, msg[i:i+1])
	}
	c.Close()
	waitFor(t, "the tunnel to close", func() bool { return g.srv.Tunnels() == 0 && g.srv.Clients() == 0 })
	// Every byte counted once each way, the pipelined ones too.
	m := scrapeMetrics(t, g.srv)
	want := float64(len("early-bytes|") + len(msg))
	for _, dir := range []string{"to_upstream", "to_client"} {
		if got := m.get(t, `loopgate_route_tunnel_bytes_total{route="all",direction="`+dir+`"}`); got != want {
			t.Errorf("%s bytes %v, want %v", dir, got, want)
		}
	}
}

// TestTunnelUpstreamBytesAfter101: bytes the upstream sends in the same
// write as its 101 reach the client without the client sending anything.
func TestTunnelUpstreamBytesAfter101(t *testing.T) {
	up := startRawUpstream(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
			"Sec-WebSocket-Accept: x\r\n\r\nhello from upstream")
		io.Copy(io.Discard, c)
	})
	g := startGateway(t, oneRoute, up)
	_, br := openTestTunnel(t, g, upgradeRequest("/"))
	expectEcho(t, br, "hello from upstream")
}

// TestUpgradeRefusals: a route with websocket: false, or not listing the
// token, answers 403/40305; an h2c upgrade is served as HTTP/1.1 without
// the Upgrade; past max_tunnels 503/50305; an upstream's non-101 answer
// goes to the client as it is, and the connection closes after it.
func TestUpgradeRefusals(t *testing.T) {
	var sawUpgrade = make(chan string, 8)
	plain := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawUpgrade <- r.Header.Get("Upgrade")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "no websockets here")
	}))
	g := startGateway(t, `
websocket: {max_tunnels: 1}
upstreams:
  - {name: plain, nodes: ["%s"]}
  - {name: ws, nodes: ["%s"]}
  - {name: dead, nodes: ["%s"]}
routes:
  - {id: dead, prefix: /dead/, upstream: dead}
  - {id: off, prefix: /off/, upstream: ws, websocket: false}
  - {id: other, prefix: /other/, upstream: ws, upgrade: [my-proto]}
  - {id: plain, prefix: /plain/, upstream: plain}
  - {id: ws, prefix: /, upstream: ws}
`, plain, switchingUpstream(t, nil), closedPort(t))

	resp, body := g.rawExchange(t, upgradeRequest("/off/x"))
	expectError(t, resp, body, 403, 40305)
	resp, body = g.rawExchange(t, upgradeRequest("/other/x"))
	expectError(t, resp, body, 403, 40305)

	h2c := "GET /plain/x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"
	resp, body = g.rawExchange(t, h2c)
	if resp.StatusCode != 403 || string(body) != "no websockets here" || <-sawUpgrade != "" {
		t.Fatalf("h2c: %d %q", resp.StatusCode, body)
	}

	c := g.dial(t)
	io.WriteString(c, upgradeRequest("/plain/x"))
	br := bufio.NewReader(c)
	resp, body = readResponse(t, br, "GET")
	if resp.StatusCode != 403 || string(body) != "no websockets here" || <-sawUpgrade != "websocket" {
		t.Fatalf("refused upgrade: %d %q", resp.StatusCode, body)
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("connection after a refused upgrade: %v, want EOF", err)
	}

	// Every upgrade request that did not become a tunnel gave its slot
	// back (max_tunnels is 1): refused by the upstream, or failed.
	resp, body = g.rawExchange(t, upgradeRequest("/dead/x"))
	expectError(t, resp, body, 502, 50201)
	// The exchange ends (putExchange) just after its answer is written.
	waitFor(t, "the slots to be given back", func() bool { return g.srv.Tunnels() == 0 })

	// A 101 to a request that did not ask to upgrade (a plain GET, or an
	// h2c upgrade served as HTTP/1.1) fails as before: 502.
	resp, body = g.rawExchange(t, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	expectError(t, resp, body, 502, 50202)
	resp, body = g.rawExchange(t, strings.Replace(h2c, "/plain/", "/", 1))
	expectError(t, resp, body, 502, 50202)

	first, _ := openTestTunnel(t, g, upgradeRequest("/"))
	resp, body = g.rawExchange(t, upgradeRequest("/"))
	expectError(t, resp, body, 503, 50305)
	first.Close()
	waitFor(t, "the tunnel to close", func() bool { return g.srv.Tunnels() == 0 })
	c2, br2 := openTestTunnel(t, g, upgradeRequest("/"))
	io.WriteString(c2, "again")
	expectEcho(t, br2, "again")
}

// TestTunnelFlowControl: an upstream pushing 16 MiB at once to a client
// that reads slowly. The gateway's buffered bytes stay within the bound
// (the fast side is paused), and every byte arrives in order.
func TestTunnelFlowControl(t *testing.T) {
	const total = 16 << 20
	pattern := func(i int) byte { return byte(i*7 + i>>13) }
	up := startRawUpstream(t, func(c net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		buf := make([]byte, 256<<10)
		for off := 0; off < total; off += len(buf) {
			for i := range buf {
				buf[i] = pattern(off + i)
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
		io.Copy(io.Discard, c)
	})
	g := startGateway(t, "websocket: {buffer: 64KiB}\n"+oneRoute, up)
	c, br := openTestTunnel(t, g, upgradeRequest("/"))
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(64 << 10) // keep the kernel's share small, so the gateway's is what is measured
	}
	buf := make([]byte, 32<<10)
	peak := int64(0)
	for got := 0; got < total; {
		n, err := br.Read(buf)
		for i := 0; i < n; i++ {
			if buf[i] != pattern(got+i) {
				t.Fatalf("byte %d: %d, want %d", got+i, buf[i], pattern(got+i))
			}
		}
		got += n
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		peak = max(peak, g.srv.BufferedBytes())
		if got%(1<<20) < n {
			time.Sleep(20 * time.Millisecond) // a slow reader: 16 MiB takes a third of a second more
		}
	}
	const bound = 2*64<<10 + 4*64<<10 + 64<<10 // overflowAt(64KiB) and one read in flight
	if peak > bound {
		t.Fatalf("gateway buffered up to %d bytes for the tunnel, bound %d", peak, bound)
	}
	t.Logf("peak buffered %d bytes (bound %d)", peak, bound)
}

// TestTunnelHalfClose: the client's close reaches the upstream as an
// orderly end of stream, after every byte sent before it; the upstream's
// close ends the client's stream after every byte the upstream sent, 8 MiB
// the gateway held (tunnel_half_test.go has the half-closes both ways).
func TestTunnelHalfClose(t *testing.T) {
	got := make(chan string, 1)
	up := startRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		b, err := io.ReadAll(br) // to EOF: the client's FIN passed on
		got <- fmt.Sprintf("%s %v", b, err)
	})
	g := startGateway(t, oneRoute, up)
	c, _ := openTestTunnel(t, g, upgradeRequest("/"))
	io.WriteString(c, strings.Repeat("x", 100000)+"END")
	c.(*net.TCPConn).CloseWrite()
	want := strings.Repeat("x", 100000) + "END <nil>"
	if s := <-got; s != want {
		t.Fatalf("upstream read %d bytes %q..., want %d", len(s), s[max(0, len(s)-10):], len(want))
	}

	// The upstream's 8 MiB and its close arrive while the client reads
	// nothing: the gateway holds them (the buffer allows 16 MiB), and must
	// flush them all before closing the client, not just what the socket
	// takes at once.
	const size = 8 << 20
	upDone := make(chan struct{})
	down := startRawUpstream(t, func(c net.Conn) {
		defer close(upDone)
		if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		c.Write(bytes.Repeat([]byte("y"), size))
	})
	g2 := startGateway(t, "websocket: {buffer: 16MiB}\n"+oneRoute, down)
	c2, br := openTestTunnel(t, g2, upgradeRequest("/"))
	<-upDone
	waitFor(t, "the gateway to read the upstream's bytes", func() bool {
		return g2.srv.BufferedBytes() > 1<<20 || g2.srv.Tunnels() == 0
	})
	b, err := io.ReadAll(br)
	if err != nil || len(b) != size {
		t.Fatalf("client read %d bytes, %v; want %d then EOF", len(b), err, size)
	}
	// The upstream's close was a half-close as far as the gateway can
	// tell: the tunnel stays, half closed, until the client closes too.
	if g2.srv.Tunnels() != 1 {
		t.Fatalf("%d tunnels open after the FIN, want the one waiting for the client's close", g2.srv.Tunnels())
	}
	c2.Close()
	waitFor(t, "the tunnel to close", func() bool { return g2.srv.Tunnels() == 0 && g2.srv.Clients() == 0 })
}

// TestTunnelIdleTimeout: a tunnel with no byte either way for
// websocket.idle_timeout is closed on both sides.
func TestTunnelIdleTimeout(t *testing.T) {
	// Long enough for the echo's round trip through a loaded machine: the
	// tunnel is idle only once it is back.
	g := startGateway(t, "websocket: {idle_timeout: 1s}\n"+oneRoute, switchingUpstream(t, nil))
	c, br := openTestTunnel(t, g, upgradeRequest("/"))
	io.WriteString(c, "ping")
	expectEcho(t, br, "ping")
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle tunnel: %v, want EOF", err)
	}
	waitFor(t, "the tunnel to close", func() bool { return g.srv.Tunnels() == 0 })
}

// A message through a tunnel, both ways, allocates nothing in the whole
// process (the gateway, the echoing upstream and the client here).
func TestTunnelAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	up := startRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		buf := make([]byte, 4096)
		for {
			n, err := br.Read(buf)
			if err != nil {
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	})
	g := startGateway(t, oneRoute, up)
	c, br := openTestTunnel(t, g, upgradeRequest("/"))
	msg, got := []byte("a 32-byte message, there & back."), make([]byte, 32)
	roundTrip := func() {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 1000; i++ {
		roundTrip()
	}
	if n := testing.AllocsPerRun(2000, roundTrip); n != 0 {
		t.Errorf("%v allocations per message", n)
	}
}

// The route's filters run on the upgrade request as on any request: a
// rate limit counts each new tunnel, and a request header edit reaches
// the upstream with the Upgrade.
func TestUpgradeRunsFilters(t *testing.T) {
	heads := make(chan *http.Request, 4)
	g := startGateway(t, `
upstreams:
  - {name: ws, nodes: ["%s"]}
routes:
  - id: ws
    prefix: /
    upstream: ws
    rate_limits: [{key: ip, rate: 0.1, burst: 2}]
    request_headers: {set: {X-Via-Gateway: "yes"}}
`, switchingUpstream(t, heads))
	for i := 0; i < 2; i++ {
		c, _ := openTestTunnel(t, g, upgradeRequest("/"))
		if h := (<-heads).Header; h.Get("X-Via-Gateway") != "yes" || h.Get("Upgrade") != "websocket" {
			t.Fatalf("upstream got %v", h)
		}
		c.Close()
	}
	resp, body := g.rawExchange(t, upgradeRequest("/"))
	expectError(t, resp, body, 429, 42902)
}
