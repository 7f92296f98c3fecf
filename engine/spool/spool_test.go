package spool

import (
	"bytes"
	"math/rand"
	"testing"
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
