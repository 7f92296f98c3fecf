package tlsedge_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/loopgate/loopgate/engine/tlsedge/tlstest"
	"golang.org/x/sys/unix"
)

// With LowPriority a handshake computes at SCHED_IDLE (seen from inside
// crypto/tls, in GetCertificate), and once handshakes are over no thread
// of the process is left at SCHED_IDLE: each got its policy back before
// the runtime reused it. Without it, handshakes compute at the policy the
// threads have.
func TestHandshakeComputesAtIdlePriority(t *testing.T) {
	if !canReturnFromIdle(t) {
		t.Skip("this kernel or user cannot return a thread from SCHED_IDLE")
	}
	for _, low := range []bool{true, false} {
		r := tlsedge.NewRunner(tlsedge.RunnerOptions{Workers: 2, MaxPending: 8, LowPriority: low})
		ca := tlstest.NewCA(t, "test CA")
		leaf := ca.Leaf(tlstest.LeafOptions{Names: []string{"example.test"}})
		certs, err := tlsedge.LoadCertificates([]tlsedge.CertFile{{Cert: leaf.CertFile, Key: leaf.KeyFile}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		st := &tlsedge.ServerState{Certs: certs}
		cfg := tlsedge.NewServerConfig(tlsedge.ServerOptions{MinVersion: tls.VersionTLS12}, func() *tlsedge.ServerState { return st })
		var idle, other atomic.Int64
		choose := cfg.GetCertificate
		cfg.GetCertificate = func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if a, err := unix.SchedGetAttr(0, 0); err == nil && a.Policy == unix.SCHED_IDLE {
				idle.Add(1)
			} else {
				other.Add(1)
			}
			return choose(h)
		}
		e := &echoServer{cfg: cfg, runner: r, timeout: fixtureTimeout}
		startEcho(t, e)
		for range 6 {
			c, err := dialTLS(t, e.addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			roundTrip(t, c, []byte("hello"))
			c.Close()
		}
		waitFor(t, "6 handshakes counted", func() bool { return r.Stats().OK == 6 })
		if low && (idle.Load() != 6 || other.Load() != 0) || !low && idle.Load() != 0 {
			t.Fatalf("low priority %v: %d handshakes computed at SCHED_IDLE, %d not", low, idle.Load(), other.Load())
		}
		if n := idleThreads(t); n != 0 {
			t.Fatalf("low priority %v: %d threads left at SCHED_IDLE after the handshakes", low, n)
		}
	}
}

// canReturnFromIdle tries the round trip on a thread of its own.
func canReturnFromIdle(t *testing.T) bool {
	done := make(chan bool)
	go func() {
		// Locked and never unlocked: a thread left at SCHED_IDLE ends with
		// this goroutine.
		runtime.LockOSThread()
		a, err := unix.SchedGetAttr(0, 0)
		if err != nil {
			done <- false
			return
		}
		saved, idle := *a, *a
		idle.Policy, idle.Flags = unix.SCHED_IDLE, 0
		done <- unix.SchedSetAttr(0, &idle, 0) == nil && unix.SchedSetAttr(0, &saved, 0) == nil
	}()
	return <-done
}

// idleThreads counts the process's threads at SCHED_IDLE (policy, field
// 41 of /proc/self/task/TID/stat).
func idleThreads(t *testing.T) int {
	stats, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread has exited
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(fields) > 38 && fields[38] == "5" { // SCHED_IDLE
			n++
		}
	}
	return n
}
