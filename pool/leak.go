// Leak detection: allocation-site tracking of buffers not yet fully released.

package pool

import (
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// siteFrames is how many caller frames Get records per buffer.
const siteFrames = 6

// detecting is the one switch the hot path reads.
var detecting atomic.Bool

// live holds the outstanding tracked buffers, keyed by Buffer.id.
var live struct {
	mu     sync.Mutex
	nextID uint64                 // guarded by mu
	byID   map[uint64]*allocation // guarded by mu
}

// allocation is what Get remembers about a tracked buffer. The stack is kept
// as program counters and formatted only when Leaks is called.
type allocation struct {
	size int
	pcs  [siteFrames]uintptr
	n    int
}

// Leak describes a buffer that was gotten while leak detection was on and
// has not been fully released.
type Leak struct {
	Size int    // the size passed to Get
	Site string // the Get caller's stack, one "file:line func" frame per line, innermost first
}

// SetLeakDetection turns allocation-site tracking on or off. Buffers gotten
// while it was on stay tracked until released even if it is turned off.
// Safe for concurrent use.
func SetLeakDetection(on bool) { detecting.Store(on) }

// Leaks lists tracked buffers that are not fully released, oldest first.
// Safe for concurrent use.
func Leaks() []Leak {
	live.mu.Lock()
	ids := make([]uint64, 0, len(live.byID))
	for id := range live.byID {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	allocs := make([]*allocation, len(ids))
	for i, id := range ids {
		allocs[i] = live.byID[id]
	}
	live.mu.Unlock()

	leaks := make([]Leak, len(allocs))
	for i, a := range allocs {
		leaks[i] = Leak{Size: a.size, Site: formatSite(a.pcs[:a.n])}
	}
	return leaks
}

// track records b's allocation site; called by Get with detection on.
func track(b *Buffer, size int) {
	a := &allocation{size: size}
	// Skip runtime.Callers, track and Get: the first frame is Get's caller.
	a.n = runtime.Callers(3, a.pcs[:])
	live.mu.Lock()
	if live.byID == nil {
		live.byID = make(map[uint64]*allocation)
	}
	live.nextID++
	b.id = live.nextID
	live.byID[b.id] = a
	live.mu.Unlock()
}

// untrack forgets b; called once, by the final release.
func untrack(b *Buffer) {
	live.mu.Lock()
	delete(live.byID, b.id)
	live.mu.Unlock()
	b.id = 0
}

// formatSite renders program counters as "file:line func" lines, stopping
// at the test runner or goroutine entry, which say nothing about the leak.
func formatSite(pcs []uintptr) string {
	var sb strings.Builder
	frames := runtime.CallersFrames(pcs)
	for {
		f, more := frames.Next()
		if f.Function == "testing.tRunner" || f.Function == "runtime.goexit" || f.Function == "runtime.main" {
			break
		}
		if sb.Len() > 0 {
			sb.WriteByte('\n')
		}
		fmt.Fprintf(&sb, "%s:%d %s", f.File, f.Line, f.Function)
		if !more {
			break
		}
	}
	return sb.String()
}
