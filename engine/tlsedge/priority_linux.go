// Priority: on Linux a handshake computes on a thread whose priority is
// lowered (nice 10, or SCHED_IDLE), so that an event loop waking on the
// same CPU gets it first.

package tlsedge

import (
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// computeNice is how far PriorityNice lowers a thread (from nice 0: to 10,
// at most 19). The kernel's weight at
// nice 10 is 110 against 1,024 at 0: a loop runnable beside a computing
// handshake gets about 90 % of the CPU and the handshake still advances,
// where SCHED_IDLE's weight of 3 leaves it almost nothing while the loop
// is busy. Nice 19 (weight 15) measured no better for the loop than 10.
const computeNice = 10

// broken[p] is set when a thread lowered to p could not be given its
// policy back: the kernel let it go down but not return (no CAP_SYS_NICE
// and an RLIMIT_NICE below 20). From then on handshakes compute at normal
// priority; the thread stays locked to its goroutine, which the runtime
// ends with it, so no Go code runs lowered unawares.
var broken [priorities]atomic.Bool

// supported[p] probes once, on a thread of its own, whether a thread can
// go down to p and come back.
var supported = [priorities]func() bool{
	PriorityNice: sync.OnceValue(func() bool { return probe(PriorityNice) }),
	PriorityIdle: sync.OnceValue(func() bool { return probe(PriorityIdle) }),
}

func probe(p Priority) bool {
	ok := make(chan bool)
	go func() {
		var low lowered
		if !low.lower(p) {
			ok <- false
			return
		}
		// A thread that could not come back ends with this goroutine.
		ok <- low.restore()
	}()
	return <-ok
}

// lowered is a thread's saved scheduling attributes while it computes at
// a lowered priority. The handshake goroutine's.
type lowered struct {
	saved  unix.SchedAttr
	p      Priority
	locked bool
}

// lower locks the calling goroutine to its thread and lowers the thread's
// priority to p; false (and nothing changed) when the kernel refuses.
func (l *lowered) lower(p Priority) bool {
	runtime.LockOSThread()
	saved, err := unix.SchedGetAttr(0, 0)
	if err == nil {
		// sched_getattr reports a fair thread's time slice as its runtime;
		// given back, it would become a custom slice. Zero keeps the
		// kernel's default.
		saved.Runtime = 0
		l.saved = *saved
		down := l.saved
		down.Flags = 0
		if p == PriorityIdle {
			down.Policy = unix.SCHED_IDLE
		} else {
			// Relative to the thread's own nice: a gateway started at nice
			// 15 must not raise its handshakes above its loops.
			down.Nice = min(19, saved.Nice+computeNice)
		}
		err = unix.SchedSetAttr(0, &down, 0)
	}
	if err != nil {
		runtime.UnlockOSThread()
		return false
	}
	l.p, l.locked = p, true
	return true
}

// restore gives the thread its saved attributes back and unlocks it; false
// when the kernel refuses, leaving the goroutine locked (see broken).
func (l *lowered) restore() bool {
	if !l.locked {
		return true
	}
	l.locked = false
	if err := unix.SchedSetAttr(0, &l.saved, 0); err != nil {
		broken[l.p].Store(true)
		return false
	}
	runtime.UnlockOSThread()
	return true
}

// PriorityAvailable reports whether handshakes can compute at p here
// (RunnerOptions.Priority); the first call for p probes.
func PriorityAvailable(p Priority) bool {
	return p == PriorityNormal || p < priorities && supported[p]() && !broken[p].Load()
}
