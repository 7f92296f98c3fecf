package sockio_test

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/loopgate/loopgate/pool/sockio"
	"github.com/panjf2000/gnet/v2"
)

// writes is what one round of writes did: each Write's result and what
// gnet held for the connection after it.
type writes struct {
	whole  []bool
	queued []int
	err    error
}

// record makes one Write and notes its result in r.
func (r *writes) record(c gnet.Conn, p []byte) {
	whole, err := sockio.Write(c, p)
	r.whole = append(r.whole, whole)
	r.queued = append(r.queued, c.OutboundBuffered())
	if err != nil {
		r.err = err
	}
}

// writer is a gnet handler that, at each read of its connection, runs the
// next round of writes on the loop and reports it on done (with only what
// is queued once the rounds are over).
type writer struct {
	gnet.BuiltinEventEngine
	rounds []func(c gnet.Conn, r *writes)
	done   chan writes
}

func (w *writer) OnTraffic(c gnet.Conn) gnet.Action {
	_, _ = c.Discard(-1)
	var r writes
	if len(w.rounds) > 0 {
		w.rounds[0](c, &r)
		w.rounds = w.rounds[1:]
	} else {
		r.queued = append(r.queued, c.OutboundBuffered())
	}
	w.done <- r
	return gnet.None
}

// pair enrolls one end of a loopback TCP connection on a gnet client's
// loop, served by w, and returns the other end, which the test reads.
func pair(t *testing.T, w *writer) *net.TCPConn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = peer.Close() })
	// A small receive window keeps the kernel from taking a large write.
	if err := peer.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	own, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := gnet.NewClient(w, gnet.WithSocketSendBuffer(4096))
	if err != nil {
		t.Fatal(err)
	}
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Stop() })
	if _, err := cli.Enroll(own); err != nil {
		t.Fatal(err)
	}
	return peer.(*net.TCPConn)
}

// round asks the loop for its next round of writes and waits for it.
func round(t *testing.T, peer net.Conn, w *writer) writes {
	t.Helper()
	if _, err := peer.Write([]byte{'?'}); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-w.done:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("the loop never read the trigger")
		return writes{}
	}
}

// A write the socket cannot take whole is queued by gnet from where the
// socket stopped, a write behind it joins the queue rather than jumping
// it, and once the peer reads, every byte arrives in order and nothing
// stays queued.
func TestWriteQueuesWhatTheSocketRefused(t *testing.T) {
	small := []byte("first, straight to the socket\n")
	big := make([]byte, 1<<20) // far past a 64 KiB window and a 4 KiB send buffer
	for i := range big {
		big[i] = byte(rand.N(256))
	}
	behind := []byte("behind the queue\n")
	peerc := make(chan *net.TCPConn, 1) // the peer, handed to the loop
	head := make([]byte, 32<<10)        // what the peer reads of big inside the round
	w := &writer{done: make(chan writes, 1)}
	w.rounds = []func(gnet.Conn, *writes){
		func(c gnet.Conn, r *writes) { r.record(c, small) },
		func(c gnet.Conn, r *writes) {
			r.record(c, big)
			// The peer takes some of big while gnet, its loop busy here,
			// cannot write more, so the socket has room and gnet's queue
			// still holds the rest: the next write must join that queue.
			if _, err := io.ReadFull(<-peerc, head); err != nil {
				r.err = err
			}
			r.record(c, behind)
		},
	}
	peer := pair(t, w)
	peerc <- peer

	r := round(t, peer, w)
	if r.err != nil || !r.whole[0] || r.queued[0] != 0 {
		t.Fatalf("a small write with nothing queued: whole %v, queued %d, err %v; want it sent whole", r.whole[0], r.queued[0], r.err)
	}
	got := make([]byte, len(small))
	if _, err := io.ReadFull(peer, got); err != nil || !bytes.Equal(got, small) {
		t.Fatalf("read %q, %v; want %q", got, err, small)
	}

	r = round(t, peer, w)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.whole[0] || r.queued[0] <= 0 || r.queued[0] > len(big) {
		t.Fatalf("a 1 MiB write: whole %v, queued %d; want the socket's refusal queued", r.whole[0], r.queued[0])
	}
	if r.whole[1] || r.queued[1] != r.queued[0]+len(behind) {
		t.Fatalf("the write behind it: whole %v, queued %d, want %d (queued behind)", r.whole[1], r.queued[1], r.queued[0]+len(behind))
	}
	want := append(append([]byte(nil), big...), behind...)
	got = make([]byte, len(want))
	copy(got, head)
	if _, err := io.ReadFull(peer, got[len(head):]); err != nil {
		t.Fatal(err)
	}
	if i := firstDiff(got, want); i >= 0 {
		t.Fatalf("byte %d of %d differs: the queue lost or reordered bytes", i, len(want))
	}

	// Every byte arrived, so gnet wrote its whole queue.
	if r = round(t, peer, w); r.queued[0] != 0 {
		t.Fatalf("%d bytes still queued after the peer read everything", r.queued[0])
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) != len(b) {
		return min(len(a), len(b))
	}
	return -1
}

// fakeConn is a connection without a socket of its own, as upstream's
// tests have: only the methods Write uses.
type fakeConn struct {
	gnet.Conn
	wrote bytes.Buffer
}

func (f *fakeConn) Fd() int                     { return -1 }
func (f *fakeConn) OutboundBuffered() int       { return 0 }
func (f *fakeConn) Write(p []byte) (int, error) { return f.wrote.Write(p) }

// Without a socket (Fd < 0) every write is gnet's.
func TestWriteWithoutASocketTakesGnetsWrite(t *testing.T) {
	f := &fakeConn{}
	whole, err := sockio.Write(f, []byte("head"))
	if whole || err != nil || f.wrote.String() != "head" {
		t.Fatalf("whole %v, err %v, gnet's Write got %q; want all of it through gnet's Write", whole, err, f.wrote.String())
	}
}
