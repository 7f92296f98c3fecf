//go:build linux

// The loop's own accept. gnet v2.9.7's acceptor (eventloop.accept in
// acceptor_unix.go) turns every accept4 error but EAGAIN, EINTR,
// ECONNRESET and ECONNABORTED into errors.ErrAcceptSocket; the poller ends
// the loop on it and the engine stops every other loop. So a process out
// of descriptors (EMFILE) stopped serving altogether.
//
// Each loop therefore accepts on its listening socket itself, and an
// accept error pauses that listener with a back-off instead (accept.go).
// gnet still creates the SO_REUSEPORT listeners, one per loop; what
// changes is where their readiness goes. gnet dispatches an epoll event
// by the descriptor number in the event's data word: a listener's number
// runs gnet's acceptor, a connection's number reads the connection and
// calls OnTraffic. The listener's registration is relabelled
// (EPOLL_CTL_MOD) with the number of a descriptor gnet knows as one of
// our connections, the gate: an eventfd in semaphore mode whose counter
// never runs out, and which is itself not in the epoll set. When the
// listener is readable, epoll reports the gate, gnet reads 8 bytes from
// it (which never fails) and calls OnTraffic, and OnTraffic accepts one
// connection. The listener stays level-triggered, so a queue of several
// connections is taken one per round, as gnet's acceptor does. The cost
// over gnet's acceptor is that read(2), once per accepted connection.
//
// The relabelling needs each loop's epoll descriptor and listeners, which
// gnet does not expose: they are read by reflection (gnetInternals), under
// the same pin as adopt_linux.go (TestAdoptMatchesGnet).

package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"reflect"
	"syscall"
	"time"
	"unsafe"

	"github.com/loopgate/loopgate/engine/accesslog"
	"github.com/loopgate/loopgate/engine/wheel"
	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/socket"
	"golang.org/x/sys/unix"
)

// acceptor is one listening socket of a loop. Owned by that loop.
type acceptor struct {
	l     *loop
	ln    int      // the listening socket (gnet's; gnet closes it at Stop)
	local net.Addr // its address, every accepted connection's LocalAddr
	gate  int      // the eventfd whose number epoll reports for ln
	epfd  int      // the loop's epoll set

	armed    bool          // ln is in the epoll set
	retryIn  time.Duration // the next back-off; 0 while accepting
	pausedAt time.Time     // when the current pause began
	retries  int           // failed retries in the current pause
	retry    wheel.Timer   // re-arms ln
}

// gateCount is what the gate's counter is set to: each read in semaphore
// mode takes 1, so it lasts 2^64 accepts.
const gateCount = 0xfffffffffffffffe

// installAcceptors moves every loop's listeners to the loop's own accept
// and closes Ready when all are moved. It runs once, from OnTick, which
// gnet calls on its ticker goroutine after every loop was created (so the
// loop list it reads is complete and no longer written).
func (s *Server) installAcceptors() {
	eng := s.eng.Load()
	loops, err := gnetEventLoops(*eng)
	if err != nil {
		s.bootFailed(err)
		return
	}
	s.installing.Store(int32(len(loops)))
	for _, el := range loops {
		err := el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			l := s.loopOf(el)
			l.enter()
			err := l.installAcceptors()
			l.leave()
			s.installed(err)
			return nil
		}))
		if err != nil {
			s.installed(err)
		}
	}
}

// installAcceptors relabels each of the loop's listeners to a gate of its
// own. On the loop.
func (l *loop) installAcceptors() error {
	in, err := gnetLoopInternals(l.eventLoop())
	if err != nil {
		return err
	}
	for _, ln := range in.listeners {
		a := &acceptor{l: l, ln: ln, epfd: in.epfd, gate: -1}
		a.retry.Init(a.rearm)
		sa, err := unix.Getsockname(ln)
		if err != nil {
			return fmt.Errorf("engine: listener %d: %w", ln, err)
		}
		a.local = socket.SockaddrToTCPOrUnixAddr(sa)
		if a.gate, err = unix.Eventfd(0, unix.EFD_SEMAPHORE|unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
			return fmt.Errorf("engine: accept gate: %w", err)
		}
		if err := l.register(a.gate, nil, nil, a); err != nil {
			return fmt.Errorf("engine: accept gate: %w", err) // gnet has closed it
		}
		// gnet put the gate in the epoll set; only the listener's events may
		// carry its number, or the full counter would poll readable forever.
		if err := unix.EpollCtl(a.epfd, unix.EPOLL_CTL_DEL, a.gate, nil); err != nil {
			return fmt.Errorf("engine: accept gate: %w", err)
		}
		var count [8]byte
		binary.NativeEndian.PutUint64(count[:], gateCount)
		if _, err := unix.Write(a.gate, count[:]); err != nil {
			return fmt.Errorf("engine: accept gate: %w", err)
		}
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(a.gate)}
		if err := unix.EpollCtl(a.epfd, unix.EPOLL_CTL_MOD, ln, &ev); err != nil {
			return fmt.Errorf("engine: listener %d: %w", ln, err)
		}
		a.armed = true // gnet holds a as the gate's context; nothing else needs it
	}
	return nil
}

// ready is the gate's OnTraffic: the listener is readable. It accepts one
// connection; one that failed in the queue is skipped for the next, up to
// a few. On the loop, inside enter.
func (a *acceptor) ready(c gnet.Conn) {
	_, _ = c.Discard(-1)
	if !a.armed {
		return
	}
	for range 8 {
		nfd, remote, err := accept4(a.ln)
		if err == nil {
			a.open(nfd, remote)
			return
		}
		if err == unix.EAGAIN {
			return
		}
		r := classifyAccept(err)
		a.l.srv.accepts.errors[r].Add(1)
		if r != acceptAborted {
			a.pause(err)
			return
		}
	}
}

// open hands an accepted socket to gnet, as its acceptor does; OnOpen
// runs before it returns.
func (a *acceptor) open(fd int, remote net.Addr) {
	if a.retryIn != 0 {
		noticef(accesslog.LevelInfo, "engine: loop %d: accepting again after %s paused (%d retries)", a.l.index, time.Since(a.pausedAt).Round(time.Millisecond), a.retries)
		a.retryIn, a.retries = 0, 0
	}
	el := a.l.gnetLoop()
	a.l.adopting = nil // a client: OnOpen makes its clientConn
	// gnet reads a stream connection's unix.Sockaddr only for UDP: nil.
	if err := gnetRegister(el, gnetNewStreamConn("tcp", fd, el, nil, a.local, remote)); err != nil {
		// Not in the epoll set (ENOSPC: fs.epoll.max_user_watches, or
		// ENOMEM); gnet has closed the socket.
		a.l.srv.accepts.errors[classifyAccept(err)].Add(1)
		a.pause(err)
	}
}

// accept4 accepts one connection on the non-blocking listener ln, as a raw
// system call (it never blocks), and returns the peer's address.
// unix.Accept4 would also ask the listener its protocol
// (getsockopt(SO_PROTOCOL), to tell L2TP from TCP) on every connection,
// and make the Go scheduler's syscall bookkeeping twice; gnet would then
// allocate the peer's address twice more.
func accept4(ln int) (int, net.Addr, error) {
	var rsa unix.RawSockaddrAny
	size := uint32(unsafe.Sizeof(rsa))
	fd, _, errno := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(ln), uintptr(unsafe.Pointer(&rsa)),
		uintptr(unsafe.Pointer(&size)), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if errno != 0 {
		return -1, nil, errno
	}
	return int(fd), peerAddr(&rsa), nil
}

// tcpPeer is a peer's net.TCPAddr and the bytes its IP points into: one
// allocation per connection.
type tcpPeer struct {
	addr net.TCPAddr
	ip   [16]byte
}

// peerAddr is the TCP address in rsa; nil for another family (a listener
// is TCP, over IPv4 or IPv6).
func peerAddr(rsa *unix.RawSockaddrAny) net.Addr {
	switch rsa.Addr.Family {
	case unix.AF_INET:
		sa := (*unix.RawSockaddrInet4)(unsafe.Pointer(rsa))
		p := &tcpPeer{}
		copy(p.ip[:], sa.Addr[:])
		p.addr = net.TCPAddr{IP: p.ip[:4], Port: port(sa.Port)}
		return &p.addr
	case unix.AF_INET6:
		sa := (*unix.RawSockaddrInet6)(unsafe.Pointer(rsa))
		if sa.Scope_id != 0 {
			// A link-local peer: gnet names the zone from a buffer pool
			// that it puts the name back into when the connection closes,
			// so it must be gnet's own name.
			return socket.SockaddrToTCPOrUnixAddr(&unix.SockaddrInet6{Port: port(sa.Port), ZoneId: sa.Scope_id, Addr: sa.Addr})
		}
		p := &tcpPeer{ip: sa.Addr}
		p.addr = net.TCPAddr{IP: p.ip[:], Port: port(sa.Port)}
		return &p.addr
	}
	return nil
}

// port reads a port stored in network byte order.
func port(p uint16) int {
	b := (*[2]byte)(unsafe.Pointer(&p))
	return int(b[0])<<8 | int(b[1])
}

// pause takes the listener out of the epoll set until the back-off ends.
func (a *acceptor) pause(err error) {
	if !a.armed {
		return
	}
	if e := unix.EpollCtl(a.epfd, unix.EPOLL_CTL_DEL, a.ln, nil); e != nil {
		noticef(accesslog.LevelError, "engine: loop %d: accept: %v; cannot pause the listener: %v", a.l.index, err, e)
		return // it stays armed: the next event tries again
	}
	a.armed = false
	a.l.srv.accepts.paused.Add(1)
	if a.retryIn == 0 {
		a.pausedAt = time.Now()
		detail := ""
		if errors.Is(err, syscall.EMFILE) {
			var lim unix.Rlimit
			if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
				detail = fmt.Sprintf(" (RLIMIT_NOFILE %d, %d clients open)", lim.Cur, a.l.srv.clients.Load())
			}
		}
		noticef(accesslog.LevelWarn, "engine: loop %d: accept: %v%s; new connections wait in the listen queue, retrying from %s to every %s",
			a.l.index, err, detail, acceptRetryMin, acceptRetryMax)
	} else {
		a.retries++
	}
	a.retryIn = nextAcceptRetry(a.retryIn)
	a.l.wheel.Arm(&a.retry, a.retryIn)
}

// rearm puts the listener back in the epoll set; a connection that waits
// makes it readable at once. Not while draining: the listener has been
// replaced then (closeListeners). On the loop.
func (a *acceptor) rearm() {
	if a.armed || a.l.srv.draining.Load() {
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(a.gate)}
	if err := unix.EpollCtl(a.epfd, unix.EPOLL_CTL_ADD, a.ln, &ev); err != nil {
		a.retries++
		a.retryIn = nextAcceptRetry(a.retryIn)
		a.l.wheel.Arm(&a.retry, a.retryIn)
		return
	}
	a.armed = true
	a.l.srv.accepts.paused.Add(-1)
}

// closed is the gate's OnClose: gnet closes it with the loop (or when the
// listener reports an error without being readable). The listener is
// gnet's to close.
func (a *acceptor) closed() {
	a.retry.Stop()
	if !a.armed && a.retryIn != 0 {
		a.l.srv.accepts.paused.Add(-1)
	}
	a.armed = false
}

// gnetEventLoops returns the engine's loops, read from engine.eventLoops
// (its load balancer's list).
func gnetEventLoops(eng gnet.Engine) ([]gnet.EventLoop, error) {
	fail := func(what string) ([]gnet.EventLoop, error) {
		return nil, fmt.Errorf("engine: gnet internals are not those of %s: %s", adoptGnetVersion, what)
	}
	e := reflect.ValueOf(eng)
	if e.Kind() != reflect.Struct || e.NumField() != 1 || e.Field(0).Kind() != reflect.Pointer || e.Field(0).IsNil() {
		return fail("gnet.Engine")
	}
	lb := e.Field(0).Elem().FieldByName("eventLoops")
	if lb.Kind() != reflect.Interface || lb.IsNil() || lb.Elem().Kind() != reflect.Pointer {
		return fail("engine.eventLoops")
	}
	list := lb.Elem().Elem().FieldByName("eventLoops")
	if list.Kind() != reflect.Slice || list.Type().Elem().Kind() != reflect.Pointer {
		return fail("loadBalancer.eventLoops")
	}
	out := make([]gnet.EventLoop, list.Len())
	for i := range out {
		p := list.Index(i)
		el, ok := reflect.NewAt(p.Type().Elem(), p.UnsafePointer()).Interface().(gnet.EventLoop)
		if !ok {
			return fail("*eventloop is not a gnet.EventLoop")
		}
		out[i] = el
	}
	return out, nil
}

// loopInternals are what the accept path needs of one gnet loop.
type loopInternals struct {
	epfd      int   // eventloop.poller.fd
	listeners []int // the keys of eventloop.listeners
}

// gnetLoopInternals reads el's epoll descriptor and listening sockets.
// On el's loop: gnet writes neither after the loop starts.
func gnetLoopInternals(el gnet.EventLoop) (loopInternals, error) {
	fail := func(what string) (loopInternals, error) {
		return loopInternals{}, fmt.Errorf("engine: gnet internals are not those of %s: %s", adoptGnetVersion, what)
	}
	v := reflect.ValueOf(el)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fail("gnet.EventLoop")
	}
	poller := v.Elem().FieldByName("poller")
	if poller.Kind() != reflect.Pointer || poller.IsNil() {
		return fail("eventloop.poller")
	}
	fd := poller.Elem().FieldByName("fd")
	if fd.Kind() != reflect.Int {
		return fail("Poller.fd")
	}
	lns := v.Elem().FieldByName("listeners")
	if lns.Kind() != reflect.Map || lns.Type().Key().Kind() != reflect.Int {
		return fail("eventloop.listeners")
	}
	in := loopInternals{epfd: int(fd.Int())}
	for _, k := range lns.MapKeys() {
		in.listeners = append(in.listeners, int(k.Int()))
	}
	return in, nil
}
