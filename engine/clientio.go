// Client I/O: where a client connection's bytes come from and go to, the
// gnet connection itself on a plain listener or its TLS session on an
// HTTPS one. Everything that reads or writes the client's bytes goes
// through these, so the HTTP layer is the same for both, and the plain
// path pays one predictable branch (cc.tls is nil).

package engine

import (
	"github.com/loopgate/loopgate/engine/spool"
	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/loopgate/loopgate/pool/sockio"
	"github.com/panjf2000/gnet/v2"
)

// peek returns n unread bytes of the request stream, or all of them for
// n <= 0; nil when fewer than n have arrived. Valid until discard.
func (cc *clientConn) peek(n int) []byte {
	if cc.tls != nil {
		b, _ := cc.tls.Peek(n)
		return b
	}
	b, _ := cc.gc.Peek(n)
	return b
}

// discard drops n bytes of the request stream, or all for n <= 0.
func (cc *clientConn) discard(n int) {
	if cc.tls != nil {
		cc.tls.Discard(n)
		return
	}
	_, _ = cc.gc.Discard(n)
}

// inbound is how many bytes the client sent that are not yet read
// (decrypted or not, on TLS).
func (cc *clientConn) inbound() int {
	if cc.tls != nil {
		return cc.tls.Buffered()
	}
	return cc.gc.InboundBuffered()
}

// send queues p for the client, encrypted on TLS. A plain connection's
// bytes go straight to its socket while nothing is queued (sockio.Write).
func (cc *clientConn) send(p []byte) error {
	var err error
	if cc.tls != nil {
		_, err = cc.tls.Write(p)
	} else {
		_, err = sockio.Write(cc.gc, p)
	}
	return err
}

// sink is the connection the response spool writes to.
func (cc *clientConn) sink() spool.Conn {
	if cc.tls != nil {
		return &cc.tlsSink
	}
	return (*plainSink)(cc)
}

// plainSink is a plain client connection as the spool sees it: body bytes
// go straight to the socket while nothing is queued, as send's do. A view
// of the clientConn itself, so handing it to the spool allocates nothing.
type plainSink clientConn

func (s *plainSink) Write(p []byte) (int, error) {
	if _, err := sockio.Write(s.gc, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *plainSink) OutboundBuffered() int { return s.gc.OutboundBuffered() }

var _ spool.Conn = (*plainSink)(nil)

// tlsSink is a TLS client connection as the spool sees it: it writes
// through the session and measures the queue on the gnet connection (in
// ciphertext, a few bytes per 16 KiB more than the plaintext).
type tlsSink struct {
	s  *tlsedge.Session
	gc gnet.Conn
}

func (t *tlsSink) Write(p []byte) (int, error) { return t.s.Write(p) }
func (t *tlsSink) OutboundBuffered() int       { return t.gc.OutboundBuffered() }

var _ spool.Conn = (*tlsSink)(nil)
