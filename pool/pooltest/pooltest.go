// Package pooltest runs a test binary with buffer leak detection on and
// fails it when buffers are left unreleased.
//
// Every package's tests start with
//
//	func TestMain(m *testing.M) { pooltest.Main(m) }
//
// and may assert at a chosen point, once everything that holds buffers has
// shut down, with
//
//	pooltest.CheckNoLeaks(t)
//
// Allocation tests (testing.AllocsPerRun) start with SkipAllocsUnderRace
// and have "Allocs" in their names: make test runs them in a build without
// -race of their own.
package pooltest

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/pool"
)

// Main turns leak detection on, runs the tests, then prints every buffer
// still outstanding with the stack that allocated it and exits 1 if there
// were any (or with the tests' own exit code if they failed).
func Main(m *testing.M) {
	pool.SetLeakDetection(true)
	code := m.Run()
	if leaks := settledLeaks(); len(leaks) > 0 {
		fmt.Fprint(os.Stderr, Report(leaks))
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// CheckNoLeaks fails t if any tracked buffer is outstanding. Tests running
// in parallel that hold buffers make it report their buffers too, so call it
// where nothing else is running.
func CheckNoLeaks(t testing.TB) {
	t.Helper()
	if leaks := settledLeaks(); len(leaks) > 0 {
		t.Error(Report(leaks))
	}
}

// settle is how long settledLeaks waits for buffers to come back.
const settle = 5 * time.Second

// settledLeaks is pool.Leaks, once every buffer is back or after settle
// of waiting for them: a goroutine that releases its buffer just after
// the one the test waited for returned (a handshake's, a worker's) has
// not leaked it, and on a loaded machine it may run late. A leaked buffer
// stays outstanding, so it is still reported.
func settledLeaks() []pool.Leak {
	deadline := time.Now().Add(settle)
	for {
		leaks := pool.Leaks()
		if len(leaks) == 0 || time.Now().After(deadline) {
			return leaks
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// SkipAllocsUnderRace skips an allocation test in a -race build. The race
// detector makes sync.Pool drop items at random and instruments what it
// runs, so a count taken under it says nothing about a normal build. make
// test runs every test named "*Allocs*" again without -race; name
// allocation tests so, or they are never checked.
func SkipAllocsUnderRace(t testing.TB) {
	t.Helper()
	if raceEnabled {
		t.Skip("allocation counts are checked without -race: go test -run Allocs")
	}
}

// Report formats leaks for a human: a count, then each buffer's size and
// allocation stack.
func Report(leaks []pool.Leak) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "pool: %d buffer(s) not released:\n", len(leaks))
	for i, l := range leaks {
		fmt.Fprintf(&sb, "  leak %d: %d bytes, allocated at\n", i+1, l.Size)
		for _, frame := range strings.Split(l.Site, "\n") {
			fmt.Fprintf(&sb, "    %s\n", frame)
		}
	}
	return sb.String()
}
