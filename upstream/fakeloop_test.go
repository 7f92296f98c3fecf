// An in-memory event loop for the pool and call state machines: fake gnet
// connections and a fake gnet.EventLoop, with the test goroutine playing
// the loop. Dials are real (to a local listener), so Pool.dial runs as in
// production up to Host.Adopt (or Enroll, for a host name).

package upstream

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// fakeConn is a gnet.Conn in memory: the test puts received bytes in in,
// reads what the pool wrote from out, and makes writes fail with writeErr.
// Methods the package does not use are left to the embedded nil interface
// and panic if called.
type fakeConn struct {
	gnet.Conn
	in       []byte
	out      bytes.Buffer
	writeErr error
	closed   bool
	sock     int // the real socket behind it, for SetNoDelay; -1 when none
}

// Fd is -1 even with a real socket behind the fake: sockio.Write then
// takes gnet's Write, which the fake records in out, rather than sending
// on the socket.
func (f *fakeConn) Fd() int { return -1 }

// SetLinger sets SO_LINGER on the real socket, where there is one.
func (f *fakeConn) SetLinger(sec int) error {
	if f.sock < 0 {
		return nil
	}
	return unix.SetsockoptLinger(f.sock, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: int32(sec)})
}

// SetNoDelay sets TCP_NODELAY on the real socket, where the test can read it.
func (f *fakeConn) SetNoDelay(on bool) error {
	if f.sock < 0 {
		return nil
	}
	v := 0
	if on {
		v = 1
	}
	return unix.SetsockoptInt(f.sock, unix.IPPROTO_TCP, unix.TCP_NODELAY, v)
}

func (f *fakeConn) Peek(n int) ([]byte, error) {
	if n < 0 || n > len(f.in) {
		n = len(f.in)
	}
	return f.in[:n], nil
}

func (f *fakeConn) Discard(n int) (int, error) {
	if n < 0 || n > len(f.in) {
		n = len(f.in)
	}
	f.in = f.in[n:]
	return n, nil
}

func (f *fakeConn) Write(p []byte) (int, error) {
	if f.writeErr != nil {
		return 0, f.writeErr
	}
	return f.out.Write(p)
}

func (f *fakeConn) Writev(bs [][]byte) (int, error) {
	n := 0
	for _, b := range bs {
		m, err := f.Write(b)
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

func (f *fakeConn) Close() error          { f.closed = true; return nil }
func (f *fakeConn) InboundBuffered() int  { return len(f.in) }
func (f *fakeConn) OutboundBuffered() int { return 0 }
func (f *fakeConn) receive(s string)      { f.in = append(f.in, s...) }
func (f *fakeConn) sent() string          { return f.out.String() }

var errWrite = errors.New("write: broken pipe")

// fakeEL is the gnet.EventLoop a Pool dials through: Execute and Enroll hand
// their work to the test, which runs it as the loop would.
type fakeEL struct {
	gnet.EventLoop
	tasks     chan gnet.Runnable
	enrolls   chan enrollment
	enrollErr error // Enroll fails with it
}

// enrollment is one dialed socket handed to Enroll (nc, res) or to
// Host.Adopt (fd).
type enrollment struct {
	uc  *Conn
	nc  net.Conn
	fd  int
	res chan gnet.RegisteredResult
}

// close closes the socket the enrollment holds.
func (e enrollment) close() {
	if e.nc != nil {
		e.nc.Close()
	} else {
		unix.Close(e.fd)
	}
}

func (e *fakeEL) Execute(_ context.Context, r gnet.Runnable) error {
	e.tasks <- r
	return nil
}

func (e *fakeEL) Enroll(ctx context.Context, nc net.Conn) (<-chan gnet.RegisteredResult, error) {
	if e.enrollErr != nil {
		return nil, e.enrollErr
	}
	res := make(chan gnet.RegisteredResult, 1)
	e.enrolls <- enrollment{uc: gnet.FromContext(ctx).(*Conn), nc: nc, res: res}
	return res, nil
}

// testLoop is one upstream Loop on a fake event loop, with its groups.
type testLoop struct {
	t      *testing.T
	el     *fakeEL
	clock  *fakeClock
	host   *testHost
	l      *Loop
	gc     *GroupConfig // the group the loop was built with
	groups []*Group
}

// testHost is the engine's side of the fake loop: loop 0, counting the
// callbacks it guards. Adopt hands the socket to the test, as Enroll
// does, and fails with adoptErr when it is set.
type testHost struct {
	guarded  int
	el       *fakeEL
	adoptErr error
	bell     bool // RingRoundBell succeeds; else tasks go through fakeEL.Execute
	rings    int  // RingRoundBell calls
}

func (*testHost) Index() int            { return 0 }
func (h *testHost) Guard(f func())      { h.guarded++; f() }
func (h *testHost) RingRoundBell() bool { h.rings++; return h.bell }

func (h *testHost) TLS() TLSEnv  { return TLSEnv{} } // no test pool speaks TLS
func (h *testHost) Now() int64   { return loopstat.Now() }
func (h *testHost) Fresh() int64 { return loopstat.Now() }

func (h *testHost) Adopt(fd int, _ unix.Sockaddr, _ net.Addr, uc *Conn) error {
	if h.adoptErr != nil {
		unix.Close(fd)
		return h.adoptErr
	}
	h.el.enrolls <- enrollment{uc: uc, fd: fd}
	return nil
}

// fakeClock is a Clock whose time moves only when the test advances it.
type fakeClock struct {
	now    time.Time
	timers []*fakeTimer // armed ones
}

type fakeTimer struct {
	c    *fakeClock
	due  time.Time
	fire func()
}

func (c *fakeClock) NewTimer(fire func()) Timer { return &fakeTimer{c: c, fire: fire} }
func (c *fakeClock) Now() time.Time             { return c.now }
func (c *fakeClock) Elapsed() time.Duration     { return c.now.Sub(time.Unix(0, 0)) }

func (t *fakeTimer) Arm(d time.Duration) {
	t.Stop()
	t.due = t.c.now.Add(d)
	t.c.timers = append(t.c.timers, t)
}

// armed reports whether t waits to fire.
func (t *fakeTimer) armed() bool {
	for _, x := range t.c.timers {
		if x == t {
			return true
		}
	}
	return false
}

func (t *fakeTimer) Stop() {
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return
		}
	}
}

// advance moves the clock on by d and fires every timer due by then,
// earliest first; a callback may arm timers, which fire too if due.
func (c *fakeClock) advance(d time.Duration) {
	c.now = c.now.Add(d)
	for {
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.due.After(c.now) && (next == nil || t.due.Before(next.due)) {
				next = t
			}
		}
		if next == nil {
			return
		}
		next.Stop()
		next.fire()
	}
}

// nodes makes group nodes of weight 1 at addrs.
func nodes(addrs ...string) []NodeConfig {
	var out []NodeConfig
	for _, a := range addrs {
		out = append(out, NodeConfig{Node: NewNode("g", a, 1), Weight: 1})
	}
	return out
}

// listenAddr returns the address of a listener that accepts and holds every
// connection until the test ends, so dials to it succeed.
func listenAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// refusedAddr returns an address nothing listens on.
func refusedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// testPool is the pool config of these tests: small and with timeouts the
// test fires itself by advancing the clock.
var testPool = PoolConfig{
	MaxIdle:        2,
	MaxConns:       2,
	IdleTimeout:    time.Minute,
	ConnectTimeout: 5 * time.Second,
	AcquireTimeout: 100 * time.Millisecond, // shorter than getOpts.ResponseTimeout
}

// newTestLoop builds a loop with one group over addrs.
func newTestLoop(t *testing.T, pc PoolConfig, addrs ...string) *testLoop {
	t.Helper()
	gc := &GroupConfig{Name: "g", Pool: pc, Nodes: nodes(addrs...)}
	gc.Prepare()
	el := &fakeEL{tasks: make(chan gnet.Runnable, 16), enrolls: make(chan enrollment, 16)}
	clock := &fakeClock{now: time.Now()}
	host := &testHost{el: el}
	tl := &testLoop{t: t, el: el, clock: clock, host: host, gc: gc, l: NewLoop(el, host, clock, codec.Limits{}.WithDefaults())}
	tl.groups = tl.l.Update([]*GroupConfig{gc})
	t.Cleanup(func() {
		for {
			select {
			case e := <-el.enrolls:
				e.close()
				if e.res != nil {
					e.res <- gnet.RegisteredResult{}
				}
			default:
				return
			}
		}
	})
	return tl
}

func (tl *testLoop) pool(i int) *Pool { return tl.groups[0].Pools()[i] }

// enrolled waits for a dial to reach Enroll or Host.Adopt, running the
// work sent through Execute meanwhile as the loop would: a socket
// connected on the loop is adopted by such a task (Loop.adoptSoon).
func (tl *testLoop) enrolled() enrollment {
	tl.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case e := <-tl.el.enrolls:
			tl.t.Cleanup(e.close)
			return e
		case r := <-tl.el.tasks:
			_ = r.Run(context.Background())
		case <-timeout:
			tl.t.Fatal("no dial reached Enroll or Adopt")
		}
	}
}

// open completes the next dial as gnet's OnOpen would, on a fake
// connection.
func (tl *testLoop) open() (*Conn, *fakeConn) {
	tl.t.Helper()
	e := tl.enrolled()
	fc := &fakeConn{sock: -1}
	if e.nc == nil {
		fc.sock = e.fd
	}
	if e.res != nil {
		e.res <- gnet.RegisteredResult{}
	}
	e.uc.Opened(fc)
	return e.uc, fc
}

// runTask waits for work sent through Execute and runs it on the test
// goroutine, as the loop would.
func (tl *testLoop) runTask() {
	tl.t.Helper()
	select {
	case r := <-tl.el.tasks:
		_ = r.Run(context.Background())
	case <-time.After(10 * time.Second):
		tl.t.Fatal("no task reached Execute")
	}
}

// advance fires the timers due within d from now.
func (tl *testLoop) advance(d time.Duration) { tl.clock.advance(d) }

// head returns a pooled request head, as the engine hands one to Start.
func head(s string) *pool.Buffer {
	b := pool.Get(len(s))
	b.B = append(b.B, s...)
	return b
}

const getHead = "GET / HTTP/1.1\r\nHost: x\r\n\r\n"

// recorder is a Receiver that keeps what it is told. stopAt names the
// callback ("ready", "interim", "head", "body") where it aborts the call
// and returns false, as an owner does when its client has gone.
type recorder struct {
	ready   int
	interim []int
	status  int
	body    bytes.Buffer
	done    bool
	err     *Error
	stopAt  string
}

func (r *recorder) stop(c *Call, at string) bool {
	if r.stopAt == at {
		c.Abort()
		return false
	}
	return true
}

func (r *recorder) CallReady(c *Call) bool { r.ready++; return r.stop(c, "ready") }

func (r *recorder) ResponseHead(c *Call, resp *codec.Response) bool {
	if resp.Status < 200 {
		r.interim = append(r.interim, resp.Status)
		return r.stop(c, "interim")
	}
	r.status = resp.Status
	return r.stop(c, "head")
}

func (r *recorder) ResponseBody(c *Call, raw, data []byte, done bool) bool {
	r.body.Write(data)
	r.done = r.done || done
	return r.stop(c, "body")
}

func (r *recorder) CallFailed(c *Call, err *Error) { r.err = err }

// newCall returns a call bound to a fresh recorder.
func newCall() (*Call, *recorder) {
	r := &recorder{}
	c := &Call{}
	c.Init(r)
	return c, r
}

// getOpen starts a GET on p and opens the connection it dials.
func (tl *testLoop) getOpen(p *Pool) (*Call, *recorder, *Conn, *fakeConn) {
	tl.t.Helper()
	c, r := newCall()
	c.Start(p, head(getHead), getOpts)
	uc, fc := tl.open()
	return c, r, uc, fc
}

// deliver hands s to the connection as one read, and closes it when
// Traffic says so, as the engine's handler does by returning gnet.Close.
func deliver(uc *Conn, fc *fakeConn, s string) {
	fc.receive(s)
	if uc.Traffic() {
		fc.Close()
	}
}

// releaseTwo runs two GETs on p at once, each on its own new connection,
// and answers the first then the second, so both connections come back to
// the pool in that order. It returns the first connection and both fakes.
func (tl *testLoop) releaseTwo(p *Pool) (uc1 *Conn, fc1, fc2 *fakeConn) {
	tl.t.Helper()
	_, _, uc1, fc1 = tl.getOpen(p)
	_, _, uc2, fc2 := tl.getOpen(p)
	deliver(uc1, fc1, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	deliver(uc2, fc2, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	return uc1, fc1, fc2
}
