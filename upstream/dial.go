// Dial: opening a node connection for a call, and the connect timeout.

package upstream

import (
	"context"
	"errors"
	"net"

	"github.com/panjf2000/gnet/v2"
)

// errConnectTimeout is why a dial failed when the connect timeout on the
// loop's clock fired first.
var errConnectTimeout = errors.New("upstream: connect timed out")

// dial opens a connection for c. The connection counts against max_conns
// from now on, and its timer holds the connect timeout on the loop's clock.
//
// The dial itself runs off the loop: a goroutine connects with
// net.DialTimeout and enrolls the socket on this loop with
// EventLoop.Enroll; OnOpen brings it back (Conn.Opened), and a failure
// comes back through Execute. docs/architecture.md ("Dialing upstreams")
// says why not a non-blocking connect on the loop: gnet cannot enroll a
// socket whose connect is in progress, and enrolling one that a loopback
// connect(2) has already completed measured slower than this.
func (p *Pool) dial(c *Call) {
	uc := &Conn{pool: p, state: connDialing, dialFor: c}
	uc.timer = p.loop.clock.NewTimer(uc.onTimer)
	c.dialing = uc
	p.total++
	p.stats.Connects.Add(1)
	p.publish()
	uc.timer.Arm(c.connectTimeout)
	el, addr, timeout := p.loop.el, p.Addr, c.connectTimeout
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
