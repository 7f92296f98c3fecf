// Test helpers: clusters built against a real redis-server (redistest),
// and a client loop that waits for its answers.

package cluster

import (
	"context"
	"crypto/tls"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// testOptions are Options for a test against addr: deadlines generous
// enough for a loaded machine under -race, a fast controller, and a dial
// counter.
func testOptions(addr, node string, dials *atomic.Int64) Options {
	return Options{
		Addrs:       []string{addr},
		NodeID:      node,
		KeyPrefix:   "test:",
		CallTimeout: time.Second,
		DialTimeout: time.Second,
		ProbeMin:    50 * time.Millisecond,
		ProbeMax:    400 * time.Millisecond,
		Heartbeat:   100 * time.Millisecond,
		MemberTTL:   time.Second,
		Tick:        20 * time.Millisecond,
		dial: func(ctx context.Context, addr string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
			if dials != nil {
				dials.Add(1)
			}
			return d.DialContext(ctx, "tcp", addr)
		},
	}
}

func newCluster(t testing.TB, opt Options) *Cluster {
	t.Helper()
	c, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func newLimit(t testing.TB, c *Cluster, spec LimitSpec) *Limit {
	t.Helper()
	l, err := c.NewLimit(spec)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// client is one simulated client: it takes a token and, when the answer is
// Pending, waits for it before asking again, as a parked request would.
type client struct {
	answers chan Decision
	done    func(Decision)
}

func newClient() *client {
	c := &client{answers: make(chan Decision, 1)}
	c.done = func(d Decision) { c.answers <- d }
	return c
}

func (c *client) take(t testing.TB, l *Limit) Decision {
	d := l.Take(nanotime(), 1, c.done)
	if d.Verdict != Pending {
		return d
	}
	select {
	case d = <-c.answers:
		if d.Verdict == Pending {
			t.Error("done was called with Pending")
		}
		return d
	case <-time.After(10 * time.Second):
		t.Error("a Pending take was never answered")
		return Decision{Verdict: Unavailable}
	}
}

// tally counts verdicts.
type tally struct {
	allow, deny, unavailable atomic.Int64
}

func (ty *tally) add(d Decision) {
	switch d.Verdict {
	case Allow:
		ty.allow.Add(1)
	case Deny:
		ty.deny.Add(1)
	default:
		ty.unavailable.Add(1)
	}
}
