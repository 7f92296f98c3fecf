// Half-closed tunnels through a real gateway: one side's FIN passed on
// while the other direction keeps flowing, byte by byte, and the teardown
// after (tunnels, client connections, buffered bytes, descriptors).

package engine_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openSockets counts the test process's socket descriptors: the
// gateway's included.
func openSockets(t *testing.T) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	n := 0
	for _, e := range es {
		if l, _ := os.Readlink("/proc/self/fd/" + e.Name()); strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// writeBytes writes s one byte per write.
func writeBytes(t *testing.T, w io.Writer, s string) {
	t.Helper()
	for i := 0; i < len(s); i++ {
		if _, err := w.Write([]byte{s[i]}); err != nil {
			t.Fatalf("writing byte %d of %q: %v", i, s, err)
		}
	}
}

// expectTornDown waits for the gateway to hold nothing of the tunnel: no
// tunnel, no client connection, no buffered byte, and no socket more than
// before it opened (the half-closed side's duplicate among them).
func expectTornDown(t *testing.T, g *gateway, fds int) {
	t.Helper()
	state := func() string {
		return fmt.Sprintf("tunnels %d, clients %d, buffered %d, sockets %d (before %d)",
			g.srv.Tunnels(), g.srv.Clients(), g.srv.BufferedBytes(), openSockets(t), fds)
	}
	want := fmt.Sprintf("tunnels 0, clients 0, buffered 0, sockets %d (before %d)", fds, fds)
	for deadline := time.Now().Add(10 * time.Second); state() != want; {
		if time.Now().After(deadline) {
			t.Fatalf("tunnel not torn down: %s", state())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTunnelClientHalfClose: the client shuts down its sending side; the
// upstream reads every byte and then end of stream, and what it sends
// after that, one byte per write, still reaches the client, then the
// upstream's close as the client's end of stream.
func TestTunnelClientHalfClose(t *testing.T) {
	got := make(chan string, 1)
	up := startRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		b, err := io.ReadAll(br)
		got <- fmt.Sprintf("%s %v", b, err)
		for _, b := range []byte("answer after your FIN") {
			if _, err := c.Write([]byte{b}); err != nil {
				return
			}
		}
	})
	g := startGateway(t, oneRoute, up)
	fds := openSockets(t)
	c, br := openTestTunnel(t, g, upgradeRequest("/"))
	writeBytes(t, c, "question")
	c.(*net.TCPConn).CloseWrite()
	if s := <-got; s != "question <nil>" {
		t.Fatalf("upstream read %q, want the client's bytes then EOF", s)
	}
	b, err := io.ReadAll(br)
	if err != nil || string(b) != "answer after your FIN" {
		t.Fatalf("client read %q, %v; want the upstream's answer then EOF", b, err)
	}
	c.Close()
	expectTornDown(t, g, fds)
}

// TestTunnelUpstreamHalfClose: the same the other way. The upstream's FIN
// reaches the client after its bytes; the client goes on sending, one byte
// per write, and the upstream reads it all, then the client's close.
func TestTunnelUpstreamHalfClose(t *testing.T) {
	got := make(chan string, 1)
	up := startRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nbye")
		c.(*net.TCPConn).CloseWrite()
		b, err := io.ReadAll(br)
		got <- fmt.Sprintf("%s %v", b, err)
	})
	g := startGateway(t, oneRoute, up)
	fds := openSockets(t)
	c, br := openTestTunnel(t, g, upgradeRequest("/"))
	b, err := io.ReadAll(br)
	if err != nil || string(b) != "bye" {
		t.Fatalf("client read %q, %v; want the upstream's bytes then EOF", b, err)
	}
	writeBytes(t, c, "still talking")
	c.(*net.TCPConn).CloseWrite()
	if s := <-got; s != "still talking <nil>" {
		t.Fatalf("upstream read %q, want the client's bytes after the upstream's FIN, then EOF", s)
	}
	c.Close()
	expectTornDown(t, g, fds)
}

// TestTunnelHalfCloseQueued: the client half-closes while the gateway
// holds upstream bytes it has not read (its own queue for the client, not
// only the kernel's). They all reach it, in order, before what the
// upstream sends after the client's FIN, and the end of stream after.
func TestTunnelHalfCloseQueued(t *testing.T) {
	const size = 8 << 20
	pattern := func(i int) byte { return byte(i*7 + i>>13) }
	payload := make([]byte, size)
	for i := range payload {
		payload[i] = pattern(i)
	}
	got := make(chan string, 1)
	up := startRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		wrote := make(chan error, 1)
		go func() {
			_, err := c.Write(payload)
			wrote <- err
		}()
		b, err := io.ReadAll(br)
		got <- fmt.Sprintf("%s %v", b, err)
		if <-wrote == nil {
			io.WriteString(c, "TAIL")
		}
	})
	g := startGateway(t, "websocket: {buffer: 1MiB}\n"+oneRoute, up)
	fds := openSockets(t)
	c, br := openTestTunnel(t, g, upgradeRequest("/"))
	c.(*net.TCPConn).SetReadBuffer(64 << 10)
	waitFor(t, "the gateway to queue upstream bytes for the client", func() bool { return g.srv.BufferedBytes() > 512<<10 })
	io.WriteString(c, "last words")
	c.(*net.TCPConn).CloseWrite()
	if s := <-got; s != "last words <nil>" {
		t.Fatalf("upstream read %q", s)
	}
	b, err := io.ReadAll(br)
	if err != nil || len(b) != size+4 {
		t.Fatalf("client read %d bytes, %v; want %d then EOF", len(b), err, size+4)
	}
	if i := firstDifference(b[:size], payload); i >= 0 {
		t.Fatalf("byte %d: %d, want %d", i, b[i], payload[i])
	}
	if string(b[size:]) != "TAIL" {
		t.Fatalf("after the payload: %q, want TAIL", b[size:])
	}
	c.Close()
	expectTornDown(t, g, fds)
}

// firstDifference is the index of the first byte where a and b differ, or
// -1.
func firstDifference(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestTunnelHalfCloseFlowControl: after the client's FIN, an upstream
// pushing 16 MiB to the client that reads slowly is paused as in an open
// tunnel: what the gateway holds for the half-closed side stays bounded,
// and every byte arrives in order.
func TestTunnelHalfCloseFlowControl(t *testing.T) {
	const total = 16 << 20
	pattern := func(i int) byte { return byte(i*5 + i>>11) }
	up := startRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		if _, err := io.Copy(io.Discard, br); err != nil {
			return
		}
		buf := make([]byte, 256<<10)
		for off := 0; off < total; off += len(buf) {
			for i := range buf {
				buf[i] = pattern(off + i)
			}
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
	g := startGateway(t, "websocket: {buffer: 64KiB}\n"+oneRoute, up)
	fds := openSockets(t)
	c, br := openTestTunnel(t, g, upgradeRequest("/"))
	c.(*net.TCPConn).SetReadBuffer(64 << 10)
	c.(*net.TCPConn).CloseWrite()
	buf := make([]byte, 32<<10)
	peak := int64(0)
	got := 0
	for {
		n, err := br.Read(buf)
		for i := 0; i < n; i++ {
			if buf[i] != pattern(got+i) {
				t.Fatalf("byte %d: %d, want %d", got+i, buf[i], pattern(got+i))
			}
		}
		got += n
		peak = max(peak, g.srv.BufferedBytes())
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", got, err)
		}
		if got%(1<<20) < n {
			time.Sleep(20 * time.Millisecond) // a slow reader
		}
	}
	if got != total {
		t.Fatalf("client read %d bytes, want %d", got, total)
	}
	const bound = 2*64<<10 + 4*64<<10 + 64<<10 // overflowAt(64KiB) and one read in flight
	if peak > bound {
		t.Fatalf("gateway held up to %d bytes for the half-closed client, bound %d", peak, bound)
	}
	t.Logf("peak buffered %d bytes (bound %d)", peak, bound)
	c.Close()
	expectTornDown(t, g, fds)
}

// TestTunnelClientClosedOutright: a client that closed rather than
// half-closed looks the same at its FIN; the upstream's next bytes meet
// its reset, and the tunnel ends and releases everything.
func TestTunnelClientClosedOutright(t *testing.T) {
	upDone := make(chan error, 1)
	up := startRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		if _, err := io.Copy(io.Discard, br); err != nil {
			upDone <- err
			return
		}
		// The client's FIN arrived: keep talking until the gateway gives up,
		// as it must at the first bytes the client's reset answers.
		for sent := 0; sent < 16<<20; sent += 14 {
			if _, err := c.Write([]byte("are you there?")); err != nil {
				upDone <- nil
				return
			}
		}
		upDone <- fmt.Errorf("the gateway took 16 MiB for a client that is gone")
	})
	g := startGateway(t, oneRoute, up)
	fds := openSockets(t)
	c, _ := openTestTunnel(t, g, upgradeRequest("/"))
	c.Close()
	if err := <-upDone; err != nil {
		t.Fatalf("upstream: %v", err)
	}
	expectTornDown(t, g, fds)
}

// TestTunnelHalfClosedEngineStop: a half-closed tunnel whose survivor has
// closed too lingers, both gnet connections gone, while what the survivor
// sent waits for a half-closed client that does not read. The engine
// stopping then must close the duplicated descriptors that only the
// loop's ticks would have closed: the process's sockets come back to what
// they were before the gateway started.
func TestTunnelHalfClosedEngineStop(t *testing.T) {
	const size = 8 << 20 // far more than the sockets on the way to a client that does not read take
	upDone := make(chan error, 1)
	up := startRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			upDone <- err
			return
		}
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		if _, err := io.Copy(io.Discard, br); err != nil { // until the client's FIN
			upDone <- err
			return
		}
		_, err := c.Write(make([]byte, size))
		c.Close() // the survivor is gone too
		upDone <- err
	})
	before := openSockets(t)
	g := startGateway(t, "loops: 1\ntimeouts: {drain: 1h}\nwebsocket: {buffer: 32MiB}\n"+oneRoute, up)
	serving := openSockets(t) // the gateway's listeners besides
	// A receive buffer set before the connection exists, so its window
	// never grows: the gateway keeps nearly all of the upstream's bytes.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	c, err := d.Dial("tcp", g.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, upgradeRequest("/"))
	if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	c.(*net.TCPConn).CloseWrite()
	if err := <-upDone; err != nil {
		t.Fatalf("upstream: %v", err)
	}
	// Left: the client's socket and the gateway's duplicate of its end of
	// it; the upstream's sockets close once the gateway has read all.
	waitFor(t, "the gateway to hold the upstream's bytes with only the client's sockets left", func() bool {
		return openSockets(t) <= serving+2 && g.srv.BufferedBytes() > size/2 && g.srv.Tunnels() == 1
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_ = g.srv.Shutdown(ctx) // the drain's deadline passes with the tunnel open: the engine stops
	c.Close()
	waitFor(t, "the process's sockets to be those before the gateway", func() bool { return openSockets(t) <= before })
	if n := g.srv.Tunnels(); n != 0 {
		t.Fatalf("%d tunnels open after the engine stopped", n)
	}
}
