// Test helpers: a real redis-server on a free port, clusters built against
// it, and a client loop that waits for its answers.

package cluster

import (
	"context"
	"crypto/tls"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// redisServer is a redis-server the test started and will stop.
type redisServer struct {
	t    testing.TB
	addr string
	dir  string
	cmd  *exec.Cmd
}

// startRedis starts redis-server on a free loopback port, or skips the test
// when the binary is missing (make test installs it).
func startRedis(t testing.TB) *redisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (make test installs it)")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	r := &redisServer{t: t, addr: addr, dir: t.TempDir()}
	r.start()
	t.Cleanup(r.stop)
	return r
}

// start runs the server on r.addr and waits until it answers PING.
func (r *redisServer) start() {
	r.t.Helper()
	_, port, _ := net.SplitHostPort(r.addr)
	r.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.dir, "--loglevel", "warning")
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	waitFor(r.t, 5*time.Second, "redis-server to answer", func() bool {
		c, err := net.DialTimeout("tcp", r.addr, 100*time.Millisecond)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		c.Write([]byte("PING\r\n"))
		buf := make([]byte, 7)
		n, _ := c.Read(buf)
		return string(buf[:n]) == "+PONG\r\n"
	})
}

// kill stops the server abruptly, as a crash would.
func (r *redisServer) kill() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		r.cmd = nil
	}
}

func (r *redisServer) stop() { r.kill() }

// client is a plain rueidis client for the test's own look at Redis.
func (r *redisServer) client() rueidis.Client {
	r.t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{r.addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(c.Close)
	return c
}

func (r *redisServer) do(args ...string) rueidis.RedisResult {
	c := r.client()
	return c.Do(context.Background(), c.B().Arbitrary(args[0]).Args(args[1:]...).Build())
}

// commandCalls reads how many times Redis ran each of cmds, from INFO
// commandstats.
func (r *redisServer) commandCalls(cmds ...string) int64 {
	r.t.Helper()
	info, err := r.do("INFO", "commandstats").ToString()
	if err != nil {
		r.t.Fatal(err)
	}
	var total int64
	for _, line := range strings.Split(info, "\r\n") {
		for _, cmd := range cmds {
			prefix := "cmdstat_" + cmd + ":calls="
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
				total += n
			}
		}
	}
	return total
}

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
