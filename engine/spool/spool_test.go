package spool

import (
	"bytes"
	"math/rand"
	"testing"
	"time"
)

// slowConn accepts bytes into an outbound queue that the test drains by hand,
// like a gnet connection whose peer reads slowly.
type slowConn struct {
	queued    []byte
	delivered []byte
}

func (c *slowConn) Write(p []byte) (int, error) {
	c.queued = append(c.queued, p...)
	return len(p), nil
}
func (c *slowConn) OutboundBuffered() int { return len(c.queued) }
func (c *slowConn) drain(n int) {
	if n > len(c.queued) {
		n = len(c.queued)
	}
	c.delivered = append(c.delivered, c.queued[:n]...)
	c.queued = c.queued[n:]
}

func TestSpoolKeepsOrderAndBoundsMemory(t *testing.T) {
	cfg := &Config{HighWater: 1 << 10, MaxFile: 1 << 30, Dir: t.TempDir()}
	var s Spool
	defer s.Reset()
	c := &slowConn{}
	scratch := make([]byte, 512)
	rng := rand.New(rand.NewSource(1))
	var want []byte
	for i := 0; i < 500; i++ {
		p := make([]byte, rng.Intn(700))
		rng.Read(p)
		want = append(want, p...)
		if err := s.Write(c, p, cfg, scratch); err != nil {
			t.Fatal(err)
		}
		if max := cfg.HighWater + 700; c.OutboundBuffered() > max {
			t.Fatalf("outbound %d bytes, want <= %d", c.OutboundBuffered(), max)
		}
		c.drain(rng.Intn(300))
	}
	if !s.Pending() {
		t.Fatal("a slow reader should have made the spool spill")
	}
	for s.Pending() || c.OutboundBuffered() > 0 {
		if err := s.Pump(c, cfg, scratch); err != nil {
			t.Fatal(err)
		}
		c.drain(400)
	}
	if !bytes.Equal(c.delivered, want) {
		t.Fatalf("delivered %d bytes, want %d, equal=%v", len(c.delivered), len(want), bytes.Equal(c.delivered, want))
	}
}

func TestSpoolFileLimit(t *testing.T) {
	cfg := &Config{HighWater: 10, MaxFile: 100, Dir: t.TempDir()}
	var s Spool
	defer s.Reset()
	c := &slowConn{}
	scratch := make([]byte, 64)
	if err := s.Write(c, make([]byte, 20), cfg, scratch); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(c, make([]byte, 90), cfg, scratch); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(c, make([]byte, 20), cfg, scratch); err != ErrFull {
		t.Fatalf("err %v, want ErrFull", err)
	}
}

// A spool file that lost bytes (truncated under us) must fail the pump,
// not spin on (0, io.EOF) with bytes still pending.
func TestPumpFailsOnShortFile(t *testing.T) {
	cfg := &Config{HighWater: 0, MaxFile: 1 << 20, Dir: t.TempDir()}
	var s Spool
	defer s.Reset()
	c := &slowConn{queued: []byte("x")} // over the high-water mark: the next write spills
	if err := s.Write(c, []byte("spilled bytes"), cfg, make([]byte, 64)); err != nil {
		t.Fatal(err)
	}
	if !s.Pending() {
		t.Fatal("write should have spilled")
	}
	if err := s.file.Truncate(0); err != nil {
		t.Fatal(err)
	}
	c.drain(1)
	done := make(chan error, 1)
	go func() { done <- s.Pump(c, cfg, make([]byte, 64)) }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Pump on a short file returned nil with bytes pending")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Pump spins on a short file")
	}
}
