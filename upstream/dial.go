// Dial: opening a node connection for a call, and the connect timeout.

package upstream

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"runtime"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/pool/goroutine"
	"golang.org/x/sys/unix"
)

// DialOnLoop says whether nodes given by IP address are connected on the
// loop. The engine can adopt a socket into gnet's poller only on Linux
// (engine/adopt_linux.go); elsewhere every dial goes off the loop.
const DialOnLoop = runtime.GOOS == "linux"

// errConnectTimeout is why a dial failed when the connect timeout on the
// loop's clock fired first.
var errConnectTimeout = errors.New("upstream: connect timed out")

// dial opens a connection for c. The connection counts against max_conns
// from now on, and its timer holds the connect timeout on the loop's clock.
//
// A node given by IP address is dialed on the loop, as nginx does
// (dialOnLoop); a node given by host name needs a DNS lookup, which
// blocks, so it is dialed off the loop (dialOffLoop).
// docs/architecture.md ("Dialing upstreams") has the measurements.
func (p *Pool) dial(c *Call) {
	uc := p.loop.newConn(p, c)
	c.dialing = uc
	p.total++
	p.stats.Connects.Add(1)
	p.publish()
	uc.timer.Arm(c.connectTimeout)
	if p.sa != nil {
		p.dialOnLoop(uc, c.connectTimeout)
		return
	}
	p.dialOffLoop(uc, c.connectTimeout)
}

// dialOnLoop opens a non-blocking socket and connects it on the loop. A
// connect the kernel completes at once (a node on this host: the loopback
// handshake runs inside connect(2)) or refuses at once is settled here,
// with no goroutine and no hand-off; the socket goes onto the loop's
// poller (Host.Adopt) in the next round of events, with the others
// connected around it (Loop.adoptSoon), and OnOpen attaches the call
// then. A connect that needs a round trip on the network waits for it
// off the loop (awaitConnect).
func (p *Pool) dialOnLoop(uc *Conn, timeout time.Duration) {
	fd, err := connectNonblocking(p.sa)
	switch {
	case err == unix.EINPROGRESS:
		p.awaitConnect(uc, fd, timeout)
	case err != nil:
		p.onDialFailed(uc, err)
	default:
		p.loop.adoptSoon(p, uc, fd)
	}
}

// adopt hands a connected socket to the loop's poller as uc's connection.
func (p *Pool) adopt(uc *Conn, fd int) {
	if err := p.loop.host.Adopt(fd, p.sa, p.remote, uc); err != nil {
		p.onDialFailed(uc, err)
	}
}

// awaitConnect waits, in Go's poller on a goroutine, for a connect that is
// still in progress: the socket becomes writable when the handshake ends
// either way. The loop then adopts the socket or fails the dial. The wait
// watches a duplicate of the descriptor, closed when it ends, so the loop
// alone owns fd.
func (p *Pool) awaitConnect(uc *Conn, fd int, timeout time.Duration) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		_ = unix.Close(fd)
		p.onDialFailed(uc, err)
		return
	}
	el := p.loop.el
	go func() {
		err := waitConnected(dup, p.sa, timeout)
		done := gnet.RunnableFunc(func(context.Context) error {
			p.loop.run(func() { p.connected(uc, fd, err) })
			return nil
		})
		if el.Execute(context.Background(), done) != nil {
			_ = unix.Close(fd) // the loop has stopped
		}
	}()
}

// connected runs on the loop when the connect on fd for uc has ended:
// at once (through Loop.adoptSoon) or after awaitConnect waited for it.
func (p *Pool) connected(uc *Conn, fd int, err error) {
	switch {
	case uc.state == connClosed: // the connect timeout fired first, or the pool let it go
		_ = unix.Close(fd)
	case err != nil:
		_ = unix.Close(fd)
		p.onDialFailed(uc, err)
	default:
		p.adopt(uc, fd)
	}
}

// QuietWorkerPool closes gnet's worker pool until an off-loop dial needs
// it. The pool serves EventLoop.Enroll alone, and while open it wakes the
// process twice a second (its clock and its purge tickers), which an idle
// gateway should not: on Linux only a node given by host name dials off
// the loop, and dialOffLoop opens the pool again (for good) before its
// first Enroll. Call it once, before any dial.
func QuietWorkerPool() { goroutine.DefaultWorkerPool.Release() }

// dialOffLoop dials a node given by host name: a goroutine resolves the
// name and connects with net.DialTimeout, and enrolls the socket on this
// loop with EventLoop.Enroll; OnOpen brings it back (Conn.Opened), and a
// failure comes back through Execute.
func (p *Pool) dialOffLoop(uc *Conn, timeout time.Duration) {
	el, addr := p.loop.el, p.Addr
	go func() {
		fail := func(err error) {
			_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				p.loop.run(func() { p.onDialFailed(uc, err) })
				return nil
			}))
		}
		nc, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			fail(err)
			return
		}
		goroutine.DefaultWorkerPool.Reboot() // opened on first use (QuietWorkerPool); a no-op once open
		res, err := el.Enroll(gnet.NewContext(context.Background(), uc), nc)
		if err != nil {
			_ = nc.Close()
			fail(err)
			return
		}
		if r := <-res; r.Err != nil {
			fail(r.Err)
		}
	}()
}

// onTimer is the connection's one timer: the connect timeout while it
// dials, idle_timeout while it waits in the free list. An idle_timeout
// armed at an earlier release (see idleArmed) finds the connection busy,
// or idle for less than the timeout since its latest release: it does
// nothing, or waits for the rest.
func (uc *Conn) onTimer() {
	uc.idleArmed = false
	switch uc.state {
	case connDialing:
		uc.pool.onDialFailed(uc, errConnectTimeout)
	case connIdle:
		p := uc.pool
		if rest := p.cfg.IdleTimeout - (p.loop.clock.Elapsed() - uc.idleSince); rest > 0 {
			uc.idleArmed, uc.idleDue = true, uc.idleSince+p.cfg.IdleTimeout
			uc.timer.Arm(rest)
			return
		}
		uc.closeFor(closeIdleTimeout)
	}
}

// onDialed runs on the loop when the dialed socket is on the loop's poller.
func (p *Pool) onDialed(uc *Conn) {
	if uc.state == connClosed { // gave up on it meanwhile
		_ = uc.gc.Close()
		return
	}
	if uc.tls == nil && p.cfg.TLS != nil {
		uc.startTLS()
		return
	}
	uc.stopTimer()
	uc.state = connActive
	if c := uc.dialFor; c != nil {
		uc.dialFor = nil
		c.dialing = nil
		c.attach(uc)
		return
	}
	p.release(uc)
}

// onDialFailed runs on the loop when a dial failed: refused, unreachable,
// timed out, or not enrolled. The call waiting for it fails with
// ErrConnect (502, code 50201).
func (p *Pool) onDialFailed(uc *Conn, err error) {
	if uc.state == connClosed {
		return
	}
	p.stats.ConnectFailures.Add(1)
	uc.stopTimer()
	c := uc.dialFor
	uc.dialFor = nil
	uc.state = connClosed
	p.remove(uc)
	if uc.gc != nil { // enrolled, and its TLS handshake failed or timed out
		if uc.tls != nil {
			uc.tls.Close(false)
		}
		_ = uc.gc.Close()
	}
	if c != nil {
		c.dialing = nil
		c.fail(ErrConnect)
	}
}

// sockaddr is addr ("ip:port", IPv6 in brackets) as connect(2) takes it,
// and as a net.Addr; nil when addr names a host rather than an IP.
func sockaddr(addr string) (unix.Sockaddr, net.Addr) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, nil
	}
	ip := ap.Addr().Unmap()
	remote := net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, ap.Port()))
	if ip.Is4() {
		return &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ip.As4()}, remote
	}
	if ip.Zone() != "" {
		return nil, nil // a link-local address with a zone: let net.Dial handle it
	}
	return &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ip.As16()}, remote
}

// connectNonblocking opens a non-blocking TCP socket and connects it to
// sa. It returns the socket with a nil error when the connection is
// established, with EINPROGRESS when the handshake is still under way,
// and -1 with the error when the connect failed.
func connectNonblocking(sa unix.Sockaddr) (int, error) {
	fd, err := socketConnect(sa)
	if err != unix.EINPROGRESS {
		return fd, err
	}
	// Even to this host connect(2) says EINPROGRESS, though the loopback
	// handshake has usually run to its end by the time it returns.
	switch err := connectAgain(fd, sa); err {
	case nil, unix.EINPROGRESS:
		return fd, err
	default:
		_ = unix.Close(fd)
		return -1, err
	}
}

// waitConnected waits up to timeout for the connect on fd to sa to end,
// in Go's poller, and closes fd. It returns nil once the connection is
// established, else why not.
func waitConnected(fd int, sa unix.Sockaddr, timeout time.Duration) error {
	f := os.NewFile(uintptr(fd), "upstream-connect")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	_ = f.SetWriteDeadline(time.Now().Add(timeout))
	var result error
	if err := rc.Write(func(s uintptr) bool {
		result = connectAgain(int(s), sa)
		return result != unix.EINPROGRESS
	}); err != nil {
		return err
	}
	return result
}
