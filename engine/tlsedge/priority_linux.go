// Priority: on Linux a handshake computes on a thread at SCHED_IDLE, so
// that an event loop waking on the same CPU preempts it at once.

package tlsedge

import (
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// idleBroken is set when a thread could not be given its policy back: the
// kernel let it go to SCHED_IDLE but not return (no CAP_SYS_NICE and an
// RLIMIT_NICE below 20). From then on handshakes compute at normal
// priority; the thread stays locked to its goroutine, which the runtime
// ends with it, so no Go code runs at SCHED_IDLE unawares.
var idleBroken atomic.Bool

// idleSupported probes once, on a thread of its own, whether a thread can
// go to SCHED_IDLE and come back.
var idleSupported = sync.OnceValue(func() bool {
	ok := make(chan bool)
	go func() {
		var low lowered
		if !low.lower() {
			ok <- false
			return
		}
		// A thread that could not come back ends with this goroutine.
		ok <- low.restore()
	}()
	return <-ok
})

// lowered is a thread's saved scheduling policy while it computes at
// SCHED_IDLE. The handshake goroutine's.
type lowered struct {
	saved  unix.SchedAttr
	locked bool
}

// lower locks the calling goroutine to its thread and moves the thread to
// SCHED_IDLE; false (and nothing changed) when the kernel refuses.
func (l *lowered) lower() bool {
	runtime.LockOSThread()
	saved, err := unix.SchedGetAttr(0, 0)
	if err == nil {
		l.saved = *saved
		idle := l.saved
		idle.Policy = unix.SCHED_IDLE
		idle.Flags = 0
		err = unix.SchedSetAttr(0, &idle, 0)
	}
	if err != nil {
		runtime.UnlockOSThread()
		return false
	}
	l.locked = true
	return true
}

// restore gives the thread its saved policy back and unlocks it; false
// when the kernel refuses, leaving the goroutine locked (see idleBroken).
func (l *lowered) restore() bool {
	if !l.locked {
		return true
	}
	l.locked = false
	if err := unix.SchedSetAttr(0, &l.saved, 0); err != nil {
		idleBroken.Store(true)
		return false
	}
	runtime.UnlockOSThread()
	return true
}

// LowPriorityAvailable reports whether handshakes can compute at
// SCHED_IDLE here (RunnerOptions.LowPriority); the first call probes.
func LowPriorityAvailable() bool { return idleSupported() && !idleBroken.Load() }
