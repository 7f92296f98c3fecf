// Package gcfloor keeps the garbage collector's heap goal at least a floor
// above the live heap.
//
// A Go heap's goal is the live heap times 1 + GOGC/100, so a process whose
// live heap is small collects often when it allocates fast, whatever its
// memory could afford. A gateway's live heap is small: its connections'
// state, a few MB. A flood of TLS handshakes allocates about 26 to 42 KB
// each inside crypto/tls (its messages, hashes, key schedule), so at 1,000
// handshakes a second and GOGC=100 the collector ran 7 to 8 times a second,
// marking 7 to 15 % of the time, and during a mark phase the loops wait for
// the Ps the background mark workers hold (with GOMAXPROCS 2 both Ps run
// fractional workers, for up to milliseconds each). Raising the goal to the
// live heap plus a floor makes cycles rare under such a flood and changes
// nothing for a heap already larger than the floor (GOGC's goal is then
// larger).
package gcfloor

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// Floor holds the GOGC percent that gives the live heap a goal of at least
// the live heap plus its floor, from one collection to the next.
type Floor struct {
	floor, base int64
	sample      []metrics.Sample

	mu      sync.Mutex // tune, from the cleanup goroutine and from Start
	percent int64      // set last; 0 before the first tune
	stopped bool
}

// Start keeps the heap goal at least floor bytes above the live heap,
// never below the goal GOGC=base gives (base is the GOGC in effect: the
// caller does not start a Floor when the operator set GOGC). It sets GOGC
// after every collection, from the live heap that collection found.
func Start(floor, base int64) *Floor {
	f := &Floor{floor: floor, base: base, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	f.tune()
	f.arm()
	return f
}

// arm asks for tune and arm again after the next collection: the cleanup
// of an object made unreachable at once runs after the cycle that finds it.
func (f *Floor) arm() {
	s := new(sentinel)
	runtime.AddCleanup(s, func(f *Floor) {
		if f.tune() {
			f.arm()
		}
	}, f)
}

// sentinel is big enough not to come from the tiny allocator, whose
// objects share a block and are not collected one by one.
type sentinel struct{ _ [32]byte }

// tune sets GOGC for the live heap now; false once stopped.
func (f *Floor) tune() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stopped {
		return false
	}
	metrics.Read(f.sample)
	var scan int64
	for _, m := range f.sample {
		scan += int64(m.Value.Uint64())
	}
	p := Percent(scan, f.floor, f.base)
	if p != f.percent {
		debug.SetGCPercent(int(p))
		f.percent = p
	}
	return true
}

// Percent is the GOGC that gives a goal of the live heap plus floor, and
// at least base's. scan is what GOGC scales since Go 1.18: the live heap,
// the goroutine stacks and the globals (the goal is live + scan × GOGC/100;
// a flood's handshake goroutines make the stacks tens of MB). It counts as
// at least 4 MiB, the runtime's minimum heap, which GOGC scales too: below
// it the minimum, not the floor, would set the goal.
func Percent(scan, floor, base int64) int64 {
	scan = max(scan, 4<<20) // before the first collection the live heap reads 0
	return max(base, (floor*100+scan-1)/scan)
}

// Stop gives GOGC base back; the Floor tunes no more.
func (f *Floor) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = true
	debug.SetGCPercent(int(f.base))
	f.percent = f.base
}
