// Package redistest runs a real redis-server for tests: on a free loopback
// port, started and stopped by the test, killable and restartable on the
// same port, with a look at INFO commandstats. Tests of the cluster rate
// limits (filters/ratelimit/cluster) and of the gateway's rate_limit filter
// (engine) share it. A test that calls Start is skipped when redis-server
// is not installed; make test installs it.
package redistest

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Server is a redis-server a test started; it stops when the test ends.
// Its methods are for the test goroutine.
type Server struct {
	t    testing.TB
	addr string
	dir  string
	cmd  *exec.Cmd
}

// Start runs redis-server on a free loopback port and waits until it
// answers PING, or skips the test when the binary is missing.
func Start(t testing.TB) *Server {
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
	s := &Server{t: t, addr: addr, dir: t.TempDir()}
	s.Restart()
	t.Cleanup(s.Kill)
	return s
}

// Addr is the server's host:port; it stays the same across Kill and
// Restart.
func (s *Server) Addr() string { return s.addr }

// Restart starts the server again on its address, empty (nothing is
// saved), and waits until it answers PING. It does nothing while the
// server runs.
func (s *Server) Restart() {
	s.t.Helper()
	if s.cmd != nil {
		return
	}
	_, port, _ := net.SplitHostPort(s.addr)
	s.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !s.answers() {
		if time.Now().After(deadline) {
			s.t.Fatalf("redis-server on %s does not answer PING after 5s", s.addr)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// answers reports whether the server replies to PING.
func (s *Server) answers() bool {
	c, err := net.DialTimeout("tcp", s.addr, 100*time.Millisecond)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	buf := make([]byte, 7)
	n, _ := c.Read(buf)
	return string(buf[:n]) == "+PONG\r\n"
}

// Kill stops the server abruptly, as a crash would. It does nothing when
// the server is not running.
func (s *Server) Kill() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
	}
	s.cmd = nil
}

// Client is a plain rueidis client for the test's own look at Redis,
// closed when the test ends.
func (s *Server) Client() rueidis.Client {
	s.t.Helper()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(c.Close)
	return c
}

// Do runs one command on a fresh client.
func (s *Server) Do(args ...string) rueidis.RedisResult {
	c := s.Client()
	return c.Do(context.Background(), c.B().Arbitrary(args[0]).Args(args[1:]...).Build())
}

// CommandCalls reads how many times Redis ran each of cmds, summed, from
// INFO commandstats ("evalsha", "eval", "zadd", ...). The counts restart
// with the server.
func (s *Server) CommandCalls(cmds ...string) int64 {
	s.t.Helper()
	var total int64
	for cmd, n := range s.commandStats() {
		for _, c := range cmds {
			if cmd == c {
				total += n
			}
		}
	}
	return total
}

// AllCommandCalls reads how many commands Redis ran in all, from INFO
// commandstats, less the INFO commands that read it.
func (s *Server) AllCommandCalls() int64 {
	s.t.Helper()
	var total int64
	for cmd, n := range s.commandStats() {
		if cmd != "info" {
			total += n
		}
	}
	return total
}

// commandStats reads INFO commandstats: calls by command name.
func (s *Server) commandStats() map[string]int64 {
	s.t.Helper()
	info, err := s.Do("INFO", "commandstats").ToString()
	if err != nil {
		s.t.Fatal(err)
	}
	stats := map[string]int64{}
	for _, line := range strings.Split(info, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		name, calls, found := strings.Cut(rest, ":calls=")
		if !ok || !found {
			continue
		}
		n, _ := strconv.ParseInt(calls[:strings.IndexByte(calls, ',')], 10, 64)
		stats[name] = n
	}
	return stats
}
