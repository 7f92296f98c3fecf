// A gnet server whose connections run Sessions: it echoes what it
// decrypts, so tests can drive real TLS peers against it.

package tlsedge_test

import (
	"context"
	"crypto/tls"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/panjf2000/gnet/v2"
)

type echoServer struct {
	gnet.BuiltinEventEngine
	cfg     *tls.Config // server side, or nil: the gnet side is the TLS client
	client  *tls.Config
	runner  *tlsedge.Runner
	timeout time.Duration
	scratch tlsedge.Scratch // one loop
	addr    string
	posts   atomic.Int64 // the Sessions' Post calls: loop wake-ups
	eng     gnet.Engine
	booted  chan struct{}

	mu      sync.Mutex
	results []error // HandshakeDone's answers, in order
	states  []tls.ConnectionState
}

type echoConn struct {
	srv *echoServer
	gc  gnet.Conn
	s   *tlsedge.Session
}

func (c *echoConn) HandshakeDone(err error) {
	c.srv.mu.Lock()
	c.srv.results = append(c.srv.results, err)
	if err == nil {
		c.srv.states = append(c.srv.states, *c.s.State())
	}
	c.srv.mu.Unlock()
	if err != nil {
		_ = c.gc.Close()
		return
	}
	c.echo()
}

// echo writes back whatever plaintext arrived.
func (c *echoConn) echo() {
	if !c.s.Established() {
		return
	}
	if p, _ := c.s.Peek(-1); len(p) > 0 {
		if _, err := c.s.Write(p); err != nil {
			_ = c.gc.Close()
			return
		}
		c.s.Discard(len(p))
	}
	if c.s.ReadErr() != nil {
		c.s.Close(true)
		_ = c.gc.Close()
	}
}

func (e *echoServer) OnBoot(eng gnet.Engine) gnet.Action {
	e.eng = eng
	close(e.booted)
	return gnet.None
}

func (e *echoServer) OnOpen(gc gnet.Conn) ([]byte, gnet.Action) {
	c := &echoConn{srv: e, gc: gc}
	el := gc.EventLoop()
	post := func(f func()) error {
		e.posts.Add(1)
		return el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error { f(); return nil }))
	}
	if e.cfg != nil {
		c.s = tlsedge.NewServer(e.cfg, gc, gc.LocalAddr(), gc.RemoteAddr(), post, c, e.runner, &e.scratch)
	} else {
		c.s = tlsedge.NewClient(e.client, gc, gc.LocalAddr(), gc.RemoteAddr(), post, c, e.runner, &e.scratch)
	}
	gc.SetContext(c)
	timeout := e.timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if err := c.s.Start(timeout); err != nil {
		e.mu.Lock()
		e.results = append(e.results, err)
		e.mu.Unlock()
		return nil, gnet.Close
	}
	return nil, gnet.None
}

func (e *echoServer) OnTraffic(gc gnet.Conn) gnet.Action {
	c := gc.Context().(*echoConn)
	c.s.Traffic()
	c.echo()
	return gnet.None
}

func (e *echoServer) OnClose(gc gnet.Conn, _ error) gnet.Action {
	if c, ok := gc.Context().(*echoConn); ok {
		c.s.Close(false)
	}
	return gnet.None
}

// startEcho runs an echo server with one loop on a free loopback port.
// gnet binds port 0 itself: a port picked here and closed again could be
// taken meanwhile as the source port of any test's outbound connection.
func startEcho(t *testing.T, e *echoServer) {
	t.Helper()
	e.booted = make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- gnet.Run(e, "tcp://127.0.0.1:0", gnet.WithNumEventLoop(1), gnet.WithTCPNoDelay(gnet.TCPNoDelay))
	}()
	select {
	case <-e.booted:
	case err := <-done:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.eng.Stop(ctx)
		<-done
	})
	fd, err := e.eng.Dup()
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("listener address %T", sa)
	}
	e.addr = (&net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}).String()
}

func (e *echoServer) handshakeResults() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.results...)
}

// waitFor polls cond until it holds or 30 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitForStats polls r's Stats until cond holds or 30 s pass, and fails
// with the last Stats it saw.
func waitForStats(t *testing.T, r *tlsedge.Runner, what string, cond func(tlsedge.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s := r.Stats(); !cond(s); s = r.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: stats %+v", what, s)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// byteConn writes one byte per write (TCP_NODELAY is the default in Go),
// so every byte is its own segment and gnet read.
type byteConn struct{ net.Conn }

func (c byteConn) Write(p []byte) (int, error) {
	for i := range p {
		if _, err := c.Conn.Write(p[i : i+1]); err != nil {
			return i, err
		}
	}
	return len(p), nil
}
