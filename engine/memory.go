// Returning memory: buffers grown for a burst of large bodies, and what a
// config apply left behind, go back to the OS once the burst is over.

package engine

import (
	"runtime/debug"
	"time"
)

// Memory-return tuning: a burst is a peak of buffered bytes at least
// releaseFloor; it is over once the figure falls below a quarter of it.
const (
	releaseFloor    = 32 << 20
	releaseInterval = time.Second
	releaseMinGap   = 10 * time.Second // forced GCs cost every loop a pause: not more often
)

// returnMemory watches the buffered-bytes figure off the loops and, after a
// burst, forces the garbage collector to hand memory back to the OS. gnet
// keeps freed connection buffers in sync.Pools, which only a GC empties, and
// an idle gateway allocates too little to trigger one on its own: without
// this, RSS stays at the burst's peak indefinitely. Two collections are
// needed, since a sync.Pool survives its first one as a victim cache. It
// looks every releaseInterval only while a burst, or a config version
// applied since its last collection, is in view; otherwise it sleeps until
// a loop records a peak of at least releaseFloor or a version is applied
// (burst), so an idle gateway does not wake for it.
func (s *Server) returnMemory(stop <-chan struct{}) {
	t := time.NewTimer(releaseInterval)
	defer t.Stop()
	var peak, returned int64 // returned: the lastApply a collection followed
	var last time.Time
	for {
		if peak < releaseFloor && s.lastApply.Load() <= returned {
			t.Stop()
			select {
			case <-stop:
				return
			case <-s.burst:
			}
			t.Reset(releaseInterval)
		}
		select {
		case <-stop:
			return
		case <-t.C:
		}
		t.Reset(releaseInterval)
		now := s.buffered.Load()
		peak = max(peak, s.bufferedPeak.Swap(now))
		if peak >= releaseFloor && now < peak/4 && time.Since(last) >= releaseMinGap {
			last = time.Now()
			debug.FreeOSMemory()
			debug.FreeOSMemory()
			s.memoryReturns.Add(1)
			peak = now
			continue
		}
		// A config version applied leaves the last one's compiled state
		// and the compile's scratch behind: tens of megabytes at 30,000
		// routes, which the runtime would otherwise keep until the heap
		// doubles. Once the applies have paused for a tick (a burst of
		// API writes pays once), two collections return it: the second
		// for what the first left in sync.Pools' victim caches, such as
		// the state file encoder's scratch buffers (4.6 MB after a
		// reload that changed 30,000 routes).
		if applied := s.lastApply.Load(); applied > returned && time.Since(time.Unix(0, applied)) >= releaseInterval &&
			time.Since(last) >= releaseMinGap {
			last, returned = time.Now(), applied
			debug.FreeOSMemory()
			debug.FreeOSMemory()
			s.memoryReturns.Add(1)
		}
	}
}

// returnAtStartRoutes is the config size from which Run hands back the
// start's parse and compile scratch before it serves.
const returnAtStartRoutes = 1000

// returnStartScratch returns to the OS what parsing and compiling a large
// config left behind (about a third of VmRSS at 30,000 routes), once,
// before the loops serve: a forced collection then pauses no request, and
// the RSS an operator reads at start is the gateway's, not the garbage's.
// A small config's scratch is not worth the collection.
func returnStartScratch(routes int) {
	if routes >= returnAtStartRoutes {
		debug.FreeOSMemory()
	}
}

// notePeak records total as the buffered figure's peak and, once it
// reaches releaseFloor, wakes returnMemory. The peak is approximate
// (racing loops may lose a store); it only tells returnMemory that a
// burst happened.
func (s *Server) notePeak(total int64) {
	s.bufferedPeak.Store(total)
	if total >= releaseFloor {
		select {
		case s.burst <- struct{}{}:
		default: // a wake-up is pending already
		}
	}
}

// noteApply records that a config version was applied now and wakes
// returnMemory, which hands back what the last version left behind once
// the applies pause. Off the loops (Server.apply).
func (s *Server) noteApply() {
	s.lastApply.Store(time.Now().UnixNano())
	select {
	case s.burst <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// MemoryReturns counts the times memory was handed back after a burst.
func (s *Server) MemoryReturns() uint64 { return s.memoryReturns.Load() }
