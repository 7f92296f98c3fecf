// Session: one TLS connection on an event loop, its handshake off the loop
// and its records on it.

package tlsedge

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"runtime"
	"time"
)

// Transport is the connection a Session runs over: its gnet connection.
// Called on the loop only.
type Transport interface {
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
	Write(p []byte) (int, error)
	InboundBuffered() int
}

// Post runs f on the connection's loop, later, from any goroutine. An
// error means the loop is gone and f will never run.
type Post func(f func()) error

// Handler learns, on the loop, how the handshake ended: nil once the
// connection can carry data, else why it cannot (the Session has already
// sent the peer its alert; the caller closes the connection). It is not
// called for a Session closed before its handshake ended.
type Handler interface {
	HandshakeDone(err error)
}

// MaxHandshakeBytes bounds what a peer may send before its handshake ends
// (a ClientHello, a client certificate chain): past it the handshake
// fails. Modern hellos are under 2 KiB.
const MaxHandshakeBytes = 64 << 10

// phase is where a Session is. Transitions, all on the loop:
//
//	handshake -> records   the handshake succeeded (deliver)
//	handshake -> failed    it failed, timed out, or sent too much
//	any -> closed          Close
type phase uint8

const (
	phaseHandshake phase = iota // the handshake goroutine owns conn; the loop feeds it
	phaseRecords                // the loop owns conn
	phaseFailed
	phaseClosed
)

var (
	// errWouldBlock is the record layer's "no more bytes now". Temporary,
	// so crypto/tls keeps the partial record and lets Read be called again.
	errWouldBlock error = wouldBlock{}

	// ErrHandshakeTimeout ends a handshake that took longer than the
	// Runner's timeout, counted from Start.
	ErrHandshakeTimeout error = handshakeTimeout{}

	// ErrHandshakeTooLarge ends a handshake whose peer sent more than
	// MaxHandshakeBytes.
	ErrHandshakeTooLarge = errors.New("tls: handshake input over 64 KiB")

	// ErrHandshakeRefused is Start's answer when the Runner's queue is full.
	ErrHandshakeRefused = errors.New("tls: too many handshakes waiting")
)

type wouldBlock struct{}

func (wouldBlock) Error() string   { return "tls: would block" }
func (wouldBlock) Timeout() bool   { return false }
func (wouldBlock) Temporary() bool { return true }

type handshakeTimeout struct{}

func (handshakeTimeout) Error() string   { return "tls: handshake timed out" }
func (handshakeTimeout) Timeout() bool   { return true }
func (handshakeTimeout) Temporary() bool { return false }

// Scratch is a loop's buffer for the records of one Write, so that a
// response goes to gnet in one write rather than one per 16 KiB record.
// Owned by the loop; shared by its Sessions, since a Write empties it.
type Scratch struct{ b []byte }

// initialPlain is the plaintext buffer's first size: one full record.
const initialPlain = 16 << 10

// event is what the handshake goroutine tells the loop.
type event struct {
	out  []byte // bytes to send the peer first
	want bool   // then: the handshake waits for input
	done bool   // or: the handshake ended, with err
	err  error
}

// Session is one TLS connection. Create it with NewServer or NewClient on
// the loop, then Start it; until Handler.HandshakeDone(nil) only Traffic
// and Close may be called. Loop-owned unless a field says otherwise.
type Session struct {
	// Immutable.
	tr       Transport
	post     Post
	h        Handler
	r        *Runner
	conn     *tls.Conn
	scratch  *Scratch
	deadline time.Time
	started  time.Time

	pipe    pipe
	phase   phase
	wanting bool   // the handshake asked for input the loop has not sent yet
	fed     int    // bytes handed to the handshake
	buf     []byte // plaintext; buf[off:] is unread
	off     int
	stale   bool  // ciphertext may have arrived since the last fill
	drain   bool  // the tls.Conn may hold whole records from the handshake: Read until it would block
	more    bool  // the last Read filled the buffer: the tls.Conn may hold more of its record
	err     error // the record layer failed or the peer sent close_notify: no more input
	state   tls.ConnectionState

	// Between the loop and the handshake goroutine; see the package doc.
	in     chan []byte   // loop -> handshake, cap 1: at most one want is outstanding
	events chan event    // handshake -> loop, cap 2: one want, or the done
	cancel chan struct{} // closed by the loop when it gives the handshake up
	// deliverFn is s.deliver, bound once.
	deliverFn func()
}

// NewServer makes the server side of a TLS connection over tr.
func NewServer(cfg *tls.Config, tr Transport, local, remote net.Addr, post Post, h Handler, r *Runner, scratch *Scratch) *Session {
	s := newSession(tr, local, remote, post, h, r, scratch)
	s.conn = tls.Server(&s.pipe, cfg)
	// A server's handshake begins by reading the hello: it is wanting
	// from the start, without asking (one loop wake-up fewer).
	s.wanting, s.pipe.primed = true, true
	return s
}

// NewClient makes the client side of a TLS connection over tr.
func NewClient(cfg *tls.Config, tr Transport, local, remote net.Addr, post Post, h Handler, r *Runner, scratch *Scratch) *Session {
	s := newSession(tr, local, remote, post, h, r, scratch)
	s.conn = tls.Client(&s.pipe, cfg)
	return s
}

func newSession(tr Transport, local, remote net.Addr, post Post, h Handler, r *Runner, scratch *Scratch) *Session {
	s := &Session{tr: tr, post: post, h: h, r: r, scratch: scratch,
		in: make(chan []byte, 1), events: make(chan event, 2), cancel: make(chan struct{})}
	s.pipe = pipe{s: s, local: local, remote: remote}
	s.deliverFn = s.deliver
	return s
}

// Start begins the handshake, which must end within timeout.
// ErrHandshakeRefused means the Runner has as many handshakes in progress
// as it takes; the caller closes the connection.
func (s *Session) Start(timeout time.Duration) error {
	s.started = time.Now()
	s.deadline = s.started.Add(timeout)
	if !s.r.admit() {
		s.phase = phaseFailed
		return ErrHandshakeRefused
	}
	go s.handshake() // fed by Traffic, the hello included
	return nil
}

// handshake runs on its own goroutine: it runs the handshake, holding a
// worker while it computes, and posts the end.
func (s *Session) handshake() {
	r := s.r
	defer r.leave()
	t := time.NewTimer(time.Until(s.deadline))
	defer t.Stop()
	s.pipe.expire = t.C
	var err error
	if !s.pipe.primed { // a primed server takes a worker once the hello is in
		err = s.work()
	}
	if err == nil {
		err = s.conn.Handshake()
		s.rest()
	}
	s.send(event{out: s.pipe.takeOut(), done: true, err: err})
}

// work takes a worker, or fails when the handshake is given up or its
// time is up first.
func (s *Session) work() error {
	select {
	case s.r.slots <- struct{}{}:
		s.r.active.Add(1)
		s.pipe.working = true
		// The loop that woke this goroutine (a chunk fed, a worker freed)
		// put it first in the loop's P's run queue. gnet yields the P
		// each time its loop runs out of events (runtime.Gosched before
		// epoll_wait), and would then wait for this step's computation,
		// hundreds of µs, to end. Yielding once here puts the loop ahead.
		// Before lowering: a goroutine locked to its thread yields by
		// handing its P to another thread and sleeping until it is
		// handed back (two wake-ups more).
		runtime.Gosched()
		if p := s.r.priority; p != PriorityNormal && PriorityAvailable(p) {
			s.pipe.low.lower(p)
		}
		return nil
	case <-s.cancel:
		return net.ErrClosed
	case <-s.pipe.expire:
		return ErrHandshakeTimeout
	}
}

// rest gives the worker back, if the handshake holds one.
func (s *Session) rest() {
	if s.pipe.working {
		s.pipe.low.restore()
		s.pipe.working = false
		s.r.active.Add(-1)
		<-s.r.slots
	}
}

// send posts ev to the loop; false when the loop gave the handshake up.
func (s *Session) send(ev event) bool {
	select {
	case s.events <- ev:
	case <-s.cancel:
		return false
	}
	return s.post(s.deliverFn) == nil
}

// deliver runs on the loop: it takes what the handshake posted, in order.
func (s *Session) deliver() {
	for s.phase == phaseHandshake {
		var ev event
		select {
		case ev = <-s.events:
		default:
			return
		}
		if len(ev.out) > 0 {
			if _, err := s.tr.Write(ev.out); err != nil && !ev.done {
				s.failHandshake(err)
				return
			}
		}
		switch {
		case ev.done:
			s.handshakeDone(ev.err)
		case ev.want:
			s.wanting = true
			if err := s.feed(); err != nil {
				s.failHandshake(err)
			}
		}
	}
}

func (s *Session) handshakeDone(err error) {
	if err != nil {
		s.phase = phaseFailed
		s.r.finished(s, err)
		s.h.HandshakeDone(err)
		return
	}
	// The goroutine is done with conn (it sent done after its last call):
	// from here the loop owns it, and its transport reads gnet's buffer.
	s.pipe.onLoop = true
	s.phase = phaseRecords
	s.state = s.conn.ConnectionState()
	s.stale, s.drain = true, true
	s.r.finished(s, nil)
	s.h.HandshakeDone(nil)
}

// failHandshake ends a running handshake from the loop.
func (s *Session) failHandshake(err error) {
	s.phase = phaseFailed
	close(s.cancel)
	s.r.finished(s, err)
	s.h.HandshakeDone(err)
}

// feed hands the handshake what the peer sent, if it is waiting for it.
func (s *Session) feed() error {
	n := s.tr.InboundBuffered()
	if n == 0 {
		return nil
	}
	if s.fed+n > MaxHandshakeBytes {
		return ErrHandshakeTooLarge
	}
	if !s.wanting {
		return nil // the goroutine is busy; gnet keeps the bytes meanwhile
	}
	buf, _ := s.tr.Peek(-1)
	chunk := append([]byte(nil), buf...)
	_, _ = s.tr.Discard(-1)
	s.fed += len(chunk)
	s.wanting = false
	s.in <- chunk // never blocks: the goroutine asked, and took the last chunk before it did
	return nil
}

// Traffic tells the Session the peer sent bytes. During the handshake it
// feeds them on; an error means the handshake failed (Handler was told).
func (s *Session) Traffic() {
	switch s.phase {
	case phaseHandshake:
		if err := s.feed(); err != nil {
			s.failHandshake(err)
		}
	case phaseRecords:
		s.stale = true
	case phaseFailed, phaseClosed:
		_, _ = s.tr.Discard(-1)
	}
}

// Established reports whether the handshake succeeded and the Session is
// not closed.
func (s *Session) Established() bool { return s.phase == phaseRecords }

// State is the negotiated connection state, valid once established.
func (s *Session) State() *tls.ConnectionState { return &s.state }

// Peek returns n bytes of unread plaintext, or all of it for n <= 0; like
// gnet's Peek, io.ErrShortBuffer when fewer than n are there. The bytes
// are valid until Discard.
func (s *Session) Peek(n int) ([]byte, error) {
	if s.stale {
		s.fill()
	}
	avail := s.buf[s.off:]
	if n > len(avail) {
		return nil, io.ErrShortBuffer
	}
	if n <= 0 {
		return avail, nil
	}
	return avail[:n], nil
}

// Discard drops n bytes of plaintext, or all of it for n <= 0 or more
// than there are.
func (s *Session) Discard(n int) {
	if left := len(s.buf) - s.off; n <= 0 || n >= left {
		s.buf, s.off = s.buf[:0], 0
		return
	}
	s.off += n
}

// Buffered is the bytes received and not yet read: plaintext, and
// ciphertext not yet decrypted. During the handshake the pipe belongs to
// the handshake goroutine, so only the transport's bytes are counted.
func (s *Session) Buffered() int {
	n := len(s.buf) - s.off + s.tr.InboundBuffered()
	if s.phase != phaseHandshake {
		n += len(s.pipe.chunk)
	}
	return n
}

// ReadErr is why no more plaintext will come: io.EOF after the peer's
// close_notify, or a record error (the connection should close). Nil
// while reading goes on.
func (s *Session) ReadErr() error {
	if s.stale {
		s.fill()
	}
	return s.err
}

// fill decrypts every whole record that has arrived. Read is called only
// when it will find data: a whole record in the input, the rest of one
// the last Read had no room for, or (once, after the handshake) records
// the handshake's reads took in. So a request costs one Read, and no Read
// that fails to learn it would block (each costs crypto/tls an allocation).
func (s *Session) fill() {
	s.stale = false
	if s.err != nil || s.phase != phaseRecords {
		return
	}
	for s.drain || s.more || s.pipe.left > 0 || s.pipe.recordLen() > 0 {
		if cap(s.buf)-len(s.buf) < initialPlain/4 {
			s.grow()
		}
		room := cap(s.buf) - len(s.buf)
		n, err := s.conn.Read(s.buf[len(s.buf):cap(s.buf)])
		s.buf = s.buf[:len(s.buf)+n]
		s.more = n == room
		if err != nil {
			if err != errWouldBlock {
				s.err = err
			}
			s.drain, s.more = false, false
			return
		}
	}
}

// grow makes room at the end of the plaintext buffer: by moving unread
// bytes to the front, else by doubling it.
func (s *Session) grow() {
	if s.buf == nil {
		s.buf = make([]byte, 0, initialPlain)
		return
	}
	if s.off > 0 {
		n := copy(s.buf, s.buf[s.off:])
		s.buf, s.off = s.buf[:n], 0
		if cap(s.buf)-n >= initialPlain/4 {
			return
		}
	}
	bigger := make([]byte, len(s.buf), 2*cap(s.buf))
	copy(bigger, s.buf)
	s.buf = bigger
}

// Write encrypts p and queues it on the transport in one write.
func (s *Session) Write(p []byte) (int, error) {
	if s.phase != phaseRecords {
		return 0, net.ErrClosed
	}
	s.pipe.batching = true
	n, err := s.conn.Write(p)
	return n, s.flush(err)
}

// Writev encrypts each of bs (a record or more each) and queues them all
// on the transport in one write.
func (s *Session) Writev(bs [][]byte) (int, error) {
	if s.phase != phaseRecords {
		return 0, net.ErrClosed
	}
	s.pipe.batching = true
	total := 0
	var err error
	for _, b := range bs {
		var n int
		if n, err = s.conn.Write(b); err != nil {
			break
		}
		total += n
	}
	return total, s.flush(err)
}

// flush ends a batch: the records gathered go to the transport.
func (s *Session) flush(err error) error {
	s.pipe.batching = false
	if b := s.scratch.b; len(b) > 0 {
		if _, werr := s.tr.Write(b); werr != nil && err == nil {
			err = werr
		}
		s.scratch.b = b[:0]
	}
	return err
}

// Close ends the Session on the loop: a running handshake is given up;
// an established connection sends close_notify when notify is set (our
// close, not the peer's). The caller closes the transport.
func (s *Session) Close(notify bool) {
	switch s.phase {
	case phaseHandshake:
		close(s.cancel)
		s.r.finished(s, net.ErrClosed)
	case phaseRecords:
		if notify {
			_ = s.conn.CloseWrite()
		}
	}
	s.phase = phaseClosed
	s.buf, s.off = nil, 0
}

// pipe is the net.Conn under the tls.Conn.
type pipe struct {
	s             *Session
	local, remote net.Addr

	// chunk is input not yet read: the handshake goroutine's while it
	// runs, the loop's after (leftover the handshake did not consume).
	chunk []byte
	// out is handshake output not yet posted; the goroutine's.
	out []byte
	// expire fires at the handshake deadline; the goroutine's.
	expire <-chan time.Time
	// working: the handshake holds one of the Runner's workers; the goroutine's.
	working bool
	// low: the thread's priority while the handshake computes; the goroutine's.
	low lowered
	// primed: the loop is feeding the first read without being asked
	// (a server's hello); the goroutine's after NewServer.
	primed bool
	// left is how much of the record being handed to crypto/tls is still
	// to go (see Read): the goroutine's during the handshake, the loop's after.
	left int

	onLoop   bool // set by the loop once the handshake is done; read by Read and Write
	batching bool // loop: a Session.Write is collecting records in scratch
}

// Read hands crypto/tls whole TLS records only: the rest of the record
// begun (left), else the next record once all of it has arrived. So the
// tls.Conn never holds part of a record, and the loop can tell from its
// own input whether a Read would find one (recordLen), instead of calling
// Read to learn that it would block. While the handshake runs, a record
// not yet whole makes the goroutine ask the loop for more.
func (p *pipe) Read(b []byte) (int, error) {
	if p.left == 0 {
		n, err := p.nextRecord()
		if err != nil {
			return 0, err
		}
		p.left = n
	}
	n := p.take(b[:min(len(b), p.left)])
	p.left -= n
	return n, nil
}

// nextRecord waits, during the handshake, for a whole record, and returns
// its length; on the loop it returns errWouldBlock when none has arrived.
func (p *pipe) nextRecord() (int, error) {
	for {
		if n := p.recordLen(); n > 0 {
			return n, nil
		}
		if p.onLoop {
			return 0, errWouldBlock
		}
		// Waiting for the peer, the worker is free for another handshake.
		p.s.rest()
		var err error
		if p.primed && len(p.out) == 0 {
			p.primed = false // the loop knows already (NewServer)
		} else if !p.s.send(event{out: p.takeOut(), want: true}) {
			err = net.ErrClosed
		}
		if err == nil {
			select {
			case c := <-p.s.in:
				p.chunk = append(p.chunk, c...)
			case <-p.s.cancel:
				err = net.ErrClosed
			case <-p.expire:
				err = ErrHandshakeTimeout
			}
		}
		if err == nil {
			err = p.s.work()
		}
		if err != nil {
			return 0, err
		}
	}
}

// recordLen is the length of the TLS record at the start of the input not
// yet handed over (chunk, then, on the loop, gnet's buffer) when all of it
// has arrived, else 0. Bytes that do not start a TLS record (plain HTTP on
// an HTTPS port) are handed over as they are, for crypto/tls to refuse.
func (p *pipe) recordLen() int {
	var gb []byte
	if p.onLoop {
		gb, _ = p.s.tr.Peek(-1)
	}
	total := len(p.chunk) + len(gb)
	at := func(i int) byte {
		if i < len(p.chunk) {
			return p.chunk[i]
		}
		return gb[i-len(p.chunk)]
	}
	switch {
	case total == 0:
		return 0
	case at(0) < 20 || at(0) > 24, total > 1 && at(1) != 3: // content types 20-24; version 3.x
		return total
	case total < recordHeaderLen:
		return 0
	}
	n := recordHeaderLen + (int(at(3))<<8 | int(at(4)))
	if total < n {
		return 0
	}
	return n
}

// recordHeaderLen is a TLS record header's size: type, version, length.
const recordHeaderLen = 5

// take moves len(b) bytes of input (chunk first, then gnet's buffer on the
// loop) into b; recordLen has seen them arrive.
func (p *pipe) take(b []byte) int {
	n := copy(b, p.chunk)
	if p.chunk = p.chunk[n:]; len(p.chunk) == 0 {
		p.chunk = nil
	}
	if n < len(b) && p.onLoop {
		gb, _ := p.s.tr.Peek(-1)
		m := copy(b[n:], gb)
		_, _ = p.s.tr.Discard(m)
		n += m
	}
	return n
}

func (p *pipe) Write(b []byte) (int, error) {
	switch {
	case !p.onLoop:
		p.out = append(p.out, b...)
		return len(b), nil
	case p.batching:
		p.s.scratch.b = append(p.s.scratch.b, b...)
		return len(b), nil
	}
	return p.s.tr.Write(b)
}

// takeOut returns the handshake output gathered so far.
func (p *pipe) takeOut() []byte {
	out := p.out
	p.out = nil
	return out
}

func (p *pipe) Close() error                     { return nil } // the transport is the caller's
func (p *pipe) LocalAddr() net.Addr              { return p.local }
func (p *pipe) RemoteAddr() net.Addr             { return p.remote }
func (p *pipe) SetDeadline(time.Time) error      { return nil } // deadlines: the Runner's timeout, the loop's timers
func (p *pipe) SetReadDeadline(time.Time) error  { return nil }
func (p *pipe) SetWriteDeadline(time.Time) error { return nil }
