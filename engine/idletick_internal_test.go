package engine

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/wheel"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/panjf2000/gnet/v2"
)

// switchOrServe is an upstream for idle tests: a request asking to upgrade
// gets a 101 and its connection then echoes; any other gets "ok", kept
// alive.
func switchOrServe(t *testing.T) string {
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
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if req.Header.Get("Upgrade") != "" {
						io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
						io.Copy(c, br)
						return
					}
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// Idle connections of every kind (keep-alive clients between requests,
// tunnels with no traffic, pooled upstream connections) let their loop
// sleep until the earliest timer that is really due, here an hour out:
// no tick runs while they are held. Traffic on one wakes the loop, whose
// wheel then reads the time the traffic came, not the time it fell
// asleep; a quiet tick later it sleeps again.
func TestIdleConnectionsLetTheLoopSleep(t *testing.T) {
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\n"+
		"timeouts: {idle: 1h}\nwebsocket: {idle_timeout: 1h}\n"+
		"upstreams:\n  - {name: b, nodes: [\"%s\"], idle_timeout: 1h}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n", switchOrServe(t))))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := ServeForTest(t, srv)
	l := srv.loops[0]
	waitTrue := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		return c, bufio.NewReader(c)
	}
	get := func(c net.Conn, br *bufio.Reader) {
		t.Helper()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(body) != "ok" {
			t.Fatalf("got %d %q", resp.StatusCode, body)
		}
	}
	echo := func(c net.Conn, br *bufio.Reader, msg string) {
		t.Helper()
		io.WriteString(c, msg)
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != msg {
			t.Fatalf("echo %q, %v; want %q", got, err, msg)
		}
	}
	type conn struct {
		c  net.Conn
		br *bufio.Reader
	}
	var keepAlive, tunnels []conn
	for range 20 {
		c, br := dial()
		get(c, br) // leaves it idle, and its upstream connection pooled
		keepAlive = append(keepAlive, conn{c, br})
	}
	for range 5 {
		c, br := dial()
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 101 {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		echo(c, br, "hello")
		tunnels = append(tunnels, conn{c, br})
	}
	waitTrue("the loop to sleep with idle connections open", l.slow.Load)
	if at := l.wakeAt.Load(); at == 0 || time.Duration(at-loopstat.Now()) < 50*time.Minute {
		t.Fatalf("the loop wakes in %v, before the first idle timeout (1h)", time.Duration(at-loopstat.Now()))
	}
	// Absence of wake-ups needs a window: a loop that ticks advances its
	// wheel every 10 ms, 30 ticks in it; one asleep does not advance it.
	ticks := wheelTicks(t, l)
	time.Sleep(300 * time.Millisecond)
	if n := wheelTicks(t, l) - ticks; n != 0 || !l.slow.Load() {
		t.Fatalf("the wheel advanced %d ticks in 300 ms with every connection idle (asleep: %v)", n, l.slow.Load())
	}

	// Traffic wakes the loop; the tunnel's last activity is when the
	// bytes came (within the tick they came in), not when the loop fell
	// asleep, 300 ms before.
	sent := time.Now()
	echo(tunnels[0].c, tunnels[0].br, "ping")
	activeAt := make(chan *time.Time, 1)
	el := l.eventLoop()
	if err := el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		te := tunnelEndOf(l, tunnels[0].c.LocalAddr().String())
		if te == nil {
			activeAt <- nil
			return nil
		}
		at := l.wheel.Now().Add(-l.wheel.SinceTick(te.t.lastActive))
		activeAt <- &at
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	at := <-activeAt
	if at == nil {
		t.Fatal("the gateway has no tunnel for the client that opened one")
	}
	if at.Before(sent.Add(-2 * wheel.DefaultTick)) {
		t.Fatalf("the tunnel's last activity is %v before its bytes were sent: the wheel's time was not brought up to date", sent.Sub(*at))
	}
	get(keepAlive[0].c, keepAlive[0].br)
	waitTrue("the loop to sleep again", l.slow.Load)
}

// wheelTicks reads the wheel's time on l's loop, from a task that is not
// one of the loop's callbacks (no enter): reading it does not wake a
// sleeping loop, nor bring its wheel up to date.
func wheelTicks(t *testing.T, l *loop) int64 {
	t.Helper()
	ch := make(chan int64, 1)
	if err := l.eventLoop().Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		ch <- l.wheel.Ticks()
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	return <-ch
}

// tunnelEndOf finds the client end of the tunnel open on l for the client
// at addr, nil if there is none. On the loop.
func tunnelEndOf(l *loop, addr string) *tunnelEnd {
	for cc := l.clients.head.next; cc != &l.clients.head; cc = cc.next {
		if cc.state == stateTunnel && cc.gc.RemoteAddr().String() == addr {
			if te, ok := cc.gc.Context().(*tunnelEnd); ok {
				return te
			}
		}
	}
	return nil
}

// An idle loop sleeps until its earliest timer: with none armed (the only
// client left without a request), until woken; with an idle upstream
// connection in the pool, until that connection's idle timeout, not a
// tick sooner. A new client wakes it.
func TestIdleLoopSleepsUntilItsNextTimer(t *testing.T) {
	up := listen(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\nupstreams:\n  - {name: b, nodes: [\"%s\"], idle_timeout: 1h}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n", up)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := ServeForTest(t, srv)
	l := srv.loops[0]
	waitTrue := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	waitTrue("the client to be accepted", func() bool { return srv.Clients() == 1 })
	c.Close()
	waitTrue("the loop to sleep", l.slow.Load)
	if at := l.wakeAt.Load(); at != 0 {
		t.Fatalf("with no timer armed the loop wakes in %v", time.Duration(at-loopstat.Now()))
	}

	c, err = net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	waitTrue("the second client to be accepted", func() bool { return srv.Clients() == 1 })
	if l.slow.Load() {
		t.Fatal("the loop still sleeps with a client connected")
	}
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 512)
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(buf); err != nil || n < 12 || string(buf[9:12]) != "200" {
		t.Fatalf("response %q, %v", buf[:n], err)
	}
	c.Close()
	waitTrue("the loop to sleep until the pooled connection's idle timeout", func() bool {
		return l.slow.Load() && l.wakeAt.Load() != 0
	})
	if left := time.Duration(l.wakeAt.Load() - loopstat.Now()); left < 50*time.Minute {
		t.Fatalf("the loop wakes in %v, before the pooled connection's idle timeout (1h)", left)
	}
}
