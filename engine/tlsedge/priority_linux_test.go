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

// At a lowered Priority a handshake computes at it (seen from inside
// crypto/tls, in GetCertificate: SCHED_IDLE, or nice 10), and once
// handshakes are over no thread of the process is left lowered: each got
// its attributes back before the runtime reused it. At PriorityNormal,
// handshakes compute at the policy and nice value the threads have.
func TestHandshakeComputesAtItsPriority(t *testing.T) {
	if !canReturnFromIdle(t) {
		t.Skip("this kernel or user cannot return a thread from SCHED_IDLE or nice 10, or the test runs lowered already")
	}
	for _, p := range []tlsedge.Priority{tlsedge.PriorityIdle, tlsedge.PriorityNice, tlsedge.PriorityNormal} {
		r := tlsedge.NewRunner(tlsedge.RunnerOptions{Workers: 2, MaxPending: 8, Priority: p})
		ca := tlstest.NewCA(t, "test CA")
		leaf := ca.Leaf(tlstest.LeafOptions{Names: []string{"example.test"}})
		certs, err := tlsedge.LoadCertificates([]tlsedge.CertFile{{Cert: leaf.CertFile, Key: leaf.KeyFile}}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		st := &tlsedge.ServerState{Certs: certs}
		cfg := tlsedge.NewServerConfig(tlsedge.ServerOptions{MinVersion: tls.VersionTLS12}, func() *tlsedge.ServerState { return st })
		var idle, nice, other atomic.Int64
		choose := cfg.GetCertificate
		cfg.GetCertificate = func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
			switch a, err := unix.SchedGetAttr(0, 0); {
			case err == nil && a.Policy == unix.SCHED_IDLE:
				idle.Add(1)
			case err == nil && a.Nice == 10:
				nice.Add(1)
			default:
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
		want := map[tlsedge.Priority][3]int64{tlsedge.PriorityIdle: {6, 0, 0}, tlsedge.PriorityNice: {0, 6, 0}, tlsedge.PriorityNormal: {0, 0, 6}}[p]
		if got := [3]int64{idle.Load(), nice.Load(), other.Load()}; got != want {
			t.Fatalf("priority %d: handshakes computed at SCHED_IDLE, nice 10, else: %v, want %v", p, got, want)
		}
		if idle, nice := loweredThreads(t); idle != 0 || nice != 0 {
			t.Fatalf("priority %d: %d threads left at SCHED_IDLE and %d at nice 10 after the handshakes", p, idle, nice)
		}
	}
}

// canReturnFromIdle tries the round trips to SCHED_IDLE and to nice 10
// on a thread of its own.
func canReturnFromIdle(t *testing.T) bool {
	done := make(chan bool)
	go func() {
		// Locked and never unlocked: a thread left at SCHED_IDLE ends with
		// this goroutine.
		runtime.LockOSThread()
		a, err := unix.SchedGetAttr(0, 0)
		if err != nil || a.Policy != unix.SCHED_NORMAL || a.Nice != 0 { // the test tells the priorities apart from 0
			done <- false
			return
		}
		saved, idle, nice := *a, *a, *a
		idle.Policy, idle.Flags = unix.SCHED_IDLE, 0
		nice.Nice, nice.Flags = 10, 0
		done <- unix.SchedSetAttr(0, &idle, 0) == nil && unix.SchedSetAttr(0, &saved, 0) == nil &&
			unix.SchedSetAttr(0, &nice, 0) == nil && unix.SchedSetAttr(0, &saved, 0) == nil
	}()
	return <-done
}

// loweredThreads counts the process's threads at SCHED_IDLE (policy,
// field 41 of /proc/self/task/TID/stat) and at nice 10 (field 19).
func loweredThreads(t *testing.T) (idle, nice int) {
	stats, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread has exited
		}
		s := string(b)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // from field 3
		if len(fields) > 38 && fields[38] == "5" {                    // SCHED_IDLE
			idle++
		}
		if len(fields) > 16 && fields[16] == "10" {
			nice++
		}
	}
	return idle, nice
}
