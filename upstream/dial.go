// Dial: opening a node connection for a call, on the loop where the
// platform and the address allow it, and the connect timeout.

package upstream

import (
	"context"
	"errors"
	"net"
	"os"
	"time"

	"github.com/panjf2000/gnet/v2"
)

// errConnectTimeout is why a dial failed when the connect timeout fired
// first.
var errConnectTimeout = errors.New("upstream: connect timed out")

// dial opens a connection for c. The connection counts against max_conns
// from now on, and its timer holds the connect timeout.
//
// A node given by IP address is dialed on the loop: a non-blocking
// connect(2), which to a nearby node (loopback, the same host) has
// completed by the time it returns; the connected socket is enrolled at
// once and comes back through Conn.Opened. A refused connect fails the
// call here. Only a connect still in progress, and a node given by host
// name (which needs the resolver), finish off the loop: see dialOffLoop.
// docs/architecture.md ("Dialing upstreams") says why gnet allows no more.
func (p *Pool) dial(c *Call) {
	uc := &Conn{pool: p, state: connDialing, dialFor: c}
	uc.timer = p.loop.clock.NewTimer(uc.onTimer)
	c.dialing = uc
	p.total++
	p.stats.Connects.Add(1)
	p.publish()
	uc.timer.Arm(c.connectTimeout)
	if p.target.ok() {
		fd, connected, err := p.target.connect()
		switch {
		case err != nil:
			p.onDialFailed(uc, err)
		case connected:
			p.enroll(uc, fd)
		default:
			p.dialOffLoop(uc, func() (net.Conn, error) { return awaitConnect(fd, c.connectTimeout) })
		}
		return
	}
	addr, timeout := p.Addr, c.connectTimeout
	p.dialOffLoop(uc, func() (net.Conn, error) { return net.DialTimeout("tcp", addr, timeout) })
}

// enroll hands a connected socket to the loop's poller. gnet finishes the
// enrollment on one of its own goroutines and OnOpen follows on this loop.
// A failure after Enroll has accepted the socket is not reported back to
// the loop (that would take a goroutine waiting on the result); the
// connect timeout ends such a dial.
func (p *Pool) enroll(uc *Conn, fd int) {
	f := os.NewFile(uintptr(fd), "upstream")
	nc, err := net.FileConn(f) // a duplicate: f's own descriptor closes now
	_ = f.Close()
	if err != nil {
		p.onDialFailed(uc, err)
		return
	}
	if _, err := p.loop.el.Enroll(gnet.NewContext(context.Background(), uc), nc); err != nil {
		_ = nc.Close()
		p.onDialFailed(uc, err)
	}
}

// dialOffLoop finishes a dial on a goroutine: connect returns the
// connected socket, which is enrolled on the loop; a failure comes back
// through Execute. Used for host names and for connects still in progress
// after connect(2) returned.
func (p *Pool) dialOffLoop(uc *Conn, connect func() (net.Conn, error)) {
	el := p.loop.el
	go func() {
		fail := func(err error) {
			_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				p.loop.run(func() { p.onDialFailed(uc, err) })
				return nil
			}))
		}
		nc, err := connect()
		if err != nil {
			fail(err)
			return
		}
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
// dials, idle_timeout while it waits in the free list.
func (uc *Conn) onTimer() {
	switch uc.state {
	case connDialing:
		uc.pool.onDialFailed(uc, errConnectTimeout)
	case connIdle:
		uc.closeFor(closeIdleTimeout)
	}
}

// onDialed runs on the loop when the dialed socket is enrolled.
func (p *Pool) onDialed(uc *Conn) {
	if uc.state == connClosed { // gave up on it meanwhile
		_ = uc.gc.Close()
		return
	}
	uc.timer.Stop()
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
	uc.timer.Stop()
	c := uc.dialFor
	uc.dialFor = nil
	uc.state = connClosed
	p.remove(uc)
	if c != nil {
		c.dialing = nil
		c.fail(ErrConnect)
	}
}

// awaitConnect waits, off the loop, for the connect in progress on fd to
// finish, and returns the connected socket. It owns fd.
func awaitConnect(fd int, timeout time.Duration) (net.Conn, error) {
	f := os.NewFile(uintptr(fd), "upstream") // non-blocking: waits in Go's poller
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	_ = f.SetWriteDeadline(time.Now().Add(timeout))
	var cerr error
	werr := rc.Write(func(fd uintptr) bool {
		cerr = connectDone(int(fd))
		return cerr != errConnectPending
	})
	if werr != nil {
		return nil, werr
	}
	if cerr != nil {
		return nil, cerr
	}
	return net.FileConn(f)
}
