// Conn: one upstream connection enrolled on the loop that owns its pool.

package upstream

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"time"

	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/loopgate/loopgate/pool/sockio"
	"github.com/panjf2000/gnet/v2"
)

// connState is where a pooled connection is.
//
//	Dialing -> Active  enrolled, and handed to the call that dialed it
//	Dialing -> Idle    enrolled after its call gave up (via Pool.release)
//	Active  -> Idle    its exchange completed cleanly (Pool.release)
//	Idle    -> Active  a call took it (Pool.acquire)
//	Active  -> Detached  a 101 switched it to another protocol (Call.Detach);
//	                   it left the pool and this package for good
//	any but Detached -> Closed
type connState uint8

const (
	connDialing connState = iota
	connIdle
	connActive
	connClosed
	connDetached
)

var connStateNames = [...]string{"dialing", "idle", "active", "closed", "detached"}

func (s connState) String() string { return connStateNames[s] }

// Conn is an upstream connection. The gnet handler finds it in the gnet
// connection's Context and forwards OnOpen, OnTraffic and OnClose to it.
// Owned by the pool's loop.
type Conn struct {
	gc      gnet.Conn
	pool    *Pool
	state   connState
	call    *Call // the call using the connection while active
	dialFor *Call // the call that caused the dial, while it still waits for it
	served  int   // completed exchanges: a reused connection may be stale
	held    int   // bytes of the read being handled (see reusable)
	reading bool  // inside Traffic: a close is left to gnet on its return (see closeFor)
	closing bool  // closed inside Traffic; Traffic tells the handler to close it
	timer   Timer // made at the dial: the connect timeout while dialing (the TLS handshake included), then idle_timeout while idle (onTimer)
	noDelay bool  // TCP_NODELAY is on (see writeMore)
	spare   bool  // dialed on the loop: once gnet closed it, the Conn may serve another dial (Closed)
	// idleArmed: timer holds an idle_timeout, armed at a release and left
	// armed when a call takes the connection (acquire), so a reused
	// connection costs no stop and re-arm per exchange; onTimer measures
	// from idleSince, its latest release, and re-arms for the rest.
	idleArmed bool
	idleSince time.Duration // Clock.Elapsed at the latest release
	idleDue   time.Duration // Clock.Elapsed when the armed idle_timeout fires
	// tls is the connection's TLS session when the pool speaks TLS, made
	// once the socket is enrolled; nil on plain HTTP.
	tls *tlsedge.Session
}

var _ tlsedge.Handler = (*Conn)(nil)

// startTLS begins the TLS handshake of a dialed connection; onDialed runs
// again when it succeeds (HandshakeDone), the connect timeout still
// running. On the loop.
func (uc *Conn) startTLS() {
	p := uc.pool
	env := p.loop.host.TLS()
	uc.tls = tlsedge.NewClient(p.tlsConfig(), uc.gc, uc.gc.LocalAddr(), uc.gc.RemoteAddr(), env.Post, uc, env.Runner, env.Scratch)
	if err := uc.tls.Start(p.cfg.ConnectTimeout); err != nil {
		p.onDialFailed(uc, err)
	}
}

// HandshakeDone is the end of the TLS handshake with the node
// (tlsedge.Handler), on the loop: a failure (the certificate did not
// verify, the node speaks no TLS) is a failed dial, 502 with code 50201.
func (uc *Conn) HandshakeDone(err error) {
	if err != nil {
		// An upstream whose certificate does not verify fails every call
		// with a bare 502: say why, at most once a second per loop.
		if l := uc.pool.loop; l.logLimit.Allow(l.clock.Now()) {
			log.Printf("upstream %s: TLS handshake: %v; answered 502", uc.pool.Addr, err)
		}
		uc.pool.onDialFailed(uc, err)
		return
	}
	uc.pool.onDialed(uc)
}

// inbound is how many bytes the node sent that are not yet read.
func (uc *Conn) inbound() int {
	if uc.tls != nil {
		return uc.tls.Buffered()
	}
	return uc.gc.InboundBuffered()
}

// writev writes bs in one gnet write (encrypted, on TLS).
func (uc *Conn) writev(bs [][]byte) error {
	var err error
	if uc.tls != nil {
		_, err = uc.tls.Writev(bs)
	} else {
		_, err = uc.gc.Writev(bs)
	}
	return err
}

// Opened is called by the gnet handler from OnOpen once the dialed socket is
// enrolled on the loop.
func (uc *Conn) Opened(gc gnet.Conn) {
	uc.gc = gc
	uc.pool.onDialed(uc)
}

// Traffic is called by the gnet handler from OnTraffic. It reports
// whether the handler must close the connection (return gnet.Close): a
// connection closed while its own read is handled (the last response of a
// Connection: close exchange, say) is closed by gnet inline on return,
// rather than through Conn.Close, a task queued to the loop that costs it
// another wake-up.
func (uc *Conn) Traffic() (closeNow bool) {
	uc.reading = true
	defer func() { uc.reading = false }()
	var buf []byte
	if t := uc.tls; t != nil {
		t.Traffic()
		if !t.Established() {
			return uc.closing // the handshake took the bytes
		}
		buf, _ = t.Peek(-1)
		if len(buf) == 0 {
			uc.tlsFailed()
			return uc.closing // else a record with no data: a session ticket, a key update
		}
	} else {
		buf, _ = uc.gc.Peek(-1)
	}
	if uc.call == nil {
		// Bytes on an idle connection are a protocol error (or a late
		// response to a call we gave up on); the connection is unusable.
		uc.closeFor(closeError)
		return uc.closing
	}
	uc.held = len(buf)
	n := uc.call.onData(buf)
	uc.held = 0
	// gnet's Discard(0) discards everything buffered: while a response head
	// is incomplete onData consumes nothing, and those bytes must stay for
	// the next read to complete them.
	if n > 0 && uc.state != connClosed {
		if uc.tls != nil {
			uc.tls.Discard(n)
		} else {
			_, _ = uc.gc.Discard(n)
		}
	}
	if uc.tls != nil && uc.state != connClosed {
		uc.tlsFailed()
	}
	return uc.closing
}

// tlsFailed ends a TLS connection whose records failed (an alert, such as
// a node refusing the gateway's client certificate after a TLS 1.3
// handshake, or a record that does not decrypt): nothing after it can be
// read, and its call fails as on a reset. After close_notify (io.EOF) the
// node's FIN follows, and Closed reports the clean end.
func (uc *Conn) tlsFailed() {
	err := uc.tls.ReadErr()
	if err == nil || errors.Is(err, io.EOF) {
		return
	}
	if c := uc.call; c != nil {
		c.connFailed()
		return
	}
	uc.closeFor(closeError)
}

// stopTimer stops the connection's timer, whatever it holds.
func (uc *Conn) stopTimer() {
	uc.timer.Stop()
	uc.idleArmed = false
}

// reusable reports whether an idle connection may carry a new exchange:
// bytes that arrived after its last response belong to no request, and
// handing them to the next caller would answer it with someone else's
// response. The read being handled (held) is not such bytes: a connection
// is released from inside it, before its bytes are discarded, and a
// pipelined request may take it at once; bytes after the response in that
// read already kept it from the pool (Call.finish).
func (uc *Conn) reusable() bool {
	return uc.state == connIdle && uc.gc != nil && uc.inbound() == uc.held
}

// Closed is called by the gnet handler from OnClose, gnet's last word on
// the connection. A plain connection dialed on the loop is then done
// with: nothing else holds it (its call, its pool, the dial's queue and
// wait all let go before gnet could close it), so its Conn and timer go
// to the loop's spares (Loop.putConn). Not a TLS one, whose session may
// still have a handshake out, nor one dialed off the loop, whose dialing
// goroutine may still report.
func (uc *Conn) Closed(err error) {
	uc.closed(err)
	if uc.state == connClosed && uc.spare && uc.tls == nil {
		uc.pool.loop.putConn(uc)
	}
}

// closed is Closed's bookkeeping for a connection gnet closed.
func (uc *Conn) closed(err error) {
	if uc.state == connClosed || uc.state == connDetached {
		return
	}
	uc.state = connClosed
	uc.stopTimer()
	if uc.tls != nil {
		uc.tls.Close(false)
	}
	uc.pool.stats.Closes[peerCloseReason(err)].Add(1)
	uc.pool.remove(uc)
	if c := uc.call; c != nil {
		uc.call = nil
		c.onConnClosed(cleanEOF(err))
	}
}

// cleanEOF reports whether the peer closed the connection in an orderly way.
// A nil error means the close was local (engine shutdown): a close-delimited
// body cut that way is not complete.
func cleanEOF(err error) bool {
	return errors.Is(err, io.EOF)
}

// peerCloseReason is why a connection the gateway did not close ended: an
// orderly close by the upstream, an error, or (nil) the engine stopping.
func peerCloseReason(err error) closeReason {
	switch {
	case err == nil:
		return closeRetired
	case cleanEOF(err):
		return closeUpstream
	}
	return closeError
}

// closeFor closes the connection and counts why. OnClose arrives later on
// the loop; the connection is out of the pool at once. A connection still
// dialing is not counted: it never carried an exchange.
func (uc *Conn) closeFor(why closeReason) {
	if uc.state == connClosed || uc.state == connDetached {
		return
	}
	uc.state = connClosed
	uc.stopTimer()
	if uc.gc != nil {
		uc.pool.stats.Closes[why].Add(1)
	}
	uc.pool.remove(uc)
	uc.call = nil
	if uc.tls != nil {
		uc.tls.Close(true) // close_notify
	}
	switch {
	case uc.reading:
		if fd := uc.gc.Fd(); why == closeUpstream && peerClosed(fd) {
			resetOnClose(fd)
		}
		uc.closing = true
	case uc.gc != nil:
		_ = uc.gc.Close()
	}
}

// detach takes the connection out of the pool for good, counted as closed
// for "upgraded": its new owner closes it. Traffic still discards the
// bytes of the read being handled that the call consumed (the 101 head).
func (uc *Conn) detach() {
	uc.state = connDetached
	uc.stopTimer()
	uc.pool.stats.Closes[closeUpgraded].Add(1)
	uc.pool.remove(uc)
}

// write hands p to the socket: on plain HTTP straight to it while gnet
// holds nothing for the connection (sockio.Write), the rest queued by
// gnet. It returns ErrReset when the connection failed. Flow control is
// the caller's: see Call.Backlog.
func (uc *Conn) write(p []byte) *Error {
	if uc.state == connClosed {
		return ErrReset // its descriptor may be another connection's by now
	}
	var err error
	if uc.tls != nil {
		_, err = uc.tls.Write(p)
	} else {
		_, err = sockio.Write(uc.gc, p)
	}
	if err != nil || uc.state == connClosed {
		return ErrReset
	}
	return nil
}

// writeMore readies the connection for a write that follows the request
// head: it turns Nagle's algorithm off the first time. A head is the
// first write of its exchange, sent with nothing unacknowledged (the
// previous response acknowledged the previous request), so Nagle never
// holds it, and a socket dialed on the loop starts without TCP_NODELAY:
// one setsockopt fewer per dial, as nginx does. Body bytes written after
// the head could wait for its ACK, which the upstream may delay by up to
// 40 ms, so from the first of them on the option is set.
func (uc *Conn) writeMore() {
	if !uc.noDelay {
		uc.noDelay = true
		_ = uc.gc.SetNoDelay(true)
	}
}

// Loop returns the upstream loop that owns the connection.
func (uc *Conn) Loop() *Loop { return uc.pool.loop }

// tlsConfig is the pool's TLS config for its node: the upstream's, with
// the node's host as the name to verify unless server_name set one. Made
// once per config (a reload brings a new one) and kept.
func (p *Pool) tlsConfig() *tls.Config {
	if p.tlsFrom != p.cfg.TLS {
		p.tlsFrom, p.tlsCfg = p.cfg.TLS, p.cfg.TLS
		if p.cfg.TLS.ServerName == "" {
			host, _, err := net.SplitHostPort(p.Addr)
			if err != nil {
				host = p.Addr
			}
			p.tlsCfg = p.cfg.TLS.Clone()
			p.tlsCfg.ServerName = host
		}
	}
	return p.tlsCfg
}
