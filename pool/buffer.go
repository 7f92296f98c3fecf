// Buffer, its size classes, and the Get/Retain/Release/Grow lifecycle.

package pool

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Size classes are powers of two from minSize to maxPooledSize.
const (
	minShift      = 9  // 512 B
	maxShift      = 20 // 1 MiB
	minSize       = 1 << minShift
	maxPooledSize = 1 << maxShift
	numClasses    = maxShift - minShift + 1

	// unpooled marks a buffer whose backing array is larger than
	// maxPooledSize; it is left to the garbage collector on release.
	unpooled int8 = -1
)

// classes[c] recycles *Buffer values whose B has capacity classSize(c).
var classes [numClasses]sync.Pool

func init() {
	for c := range classes {
		size := classSize(int8(c))
		classes[c].New = func() any { return &Buffer{B: make([]byte, 0, size)} }
	}
}

// doubleReleases counts releases of already-released buffers seen while leak
// detection was off.
var doubleReleases atomic.Uint64

// Buffer is a pooled byte slice with a reference count.
//
// B belongs to whoever holds a reference; holders coordinate among themselves
// (typically one loop goroutine owns it). The reference count itself is
// atomic, so Retain and Release are safe for concurrent use.
type Buffer struct {
	// B is the content. A fresh buffer has len 0 and cap >= the requested
	// size. Append to it freely; Grow first to stay in the pooled classes.
	B []byte

	refs  atomic.Int32 // live references; 0 once fully released
	class int8         // size class of B's backing array, or unpooled
	id    uint64       // leak-tracking id; 0 when not tracked. Written by Get and the final release only.
	local *Local       // the free list it returns to (Local.Get); nil for the shared pools
}

// Get returns a buffer with one reference, len(B) == 0 and
// cap(B) >= size. The contents of B beyond its length are unspecified.
// Safe for concurrent use.
func Get(size int) *Buffer {
	if size < 0 {
		panic("pool: Get with negative size")
	}
	b := get(classFor(size), size)
	b.refs.Store(1)
	if detecting.Load() {
		track(b, size)
	}
	return b
}

// get takes a buffer of class c, or allocates an unpooled one holding size bytes.
func get(c int8, size int) *Buffer {
	if c == unpooled {
		return &Buffer{B: make([]byte, 0, size), class: unpooled}
	}
	b := classes[c].Get().(*Buffer)
	b.class = c
	return b
}

// Retain adds a reference. It panics if the buffer was already fully
// released. Safe for concurrent use.
func (b *Buffer) Retain() {
	for {
		r := b.refs.Load()
		if r <= 0 {
			panic("pool: Retain on a released buffer")
		}
		if b.refs.CompareAndSwap(r, r+1) {
			return
		}
	}
}

// Release drops one reference; the last one returns the memory to the pool.
// Releasing more times than retained panics while leak detection is on and
// is otherwise ignored and counted in DoubleReleases. Safe for concurrent use.
func (b *Buffer) Release() {
	for {
		r := b.refs.Load()
		if r <= 0 {
			b.overRelease()
			return
		}
		if b.refs.CompareAndSwap(r, r-1) {
			if r == 1 {
				b.recycle()
			}
			return
		}
	}
}

// SafeRelease drops every remaining reference and returns the memory to the
// pool. It does nothing on a nil buffer or on one that is already fully
// released, which makes it the right call on error paths where it is unclear
// whether the normal release already happened. The caller must own every
// remaining reference. Safe for concurrent use.
func (b *Buffer) SafeRelease() {
	if b == nil {
		return
	}
	if b.refs.Swap(0) > 0 {
		b.recycle()
	}
}

// Refs reports the current reference count; 0 means fully released.
// Safe for concurrent use.
func (b *Buffer) Refs() int32 { return b.refs.Load() }

// Grow makes room for at least n more bytes after len(B), moving the content
// to a larger size class when needed and returning the old backing array to
// its pool. The *Buffer stays the same; slices of the old B must not be used
// afterwards. Grow is not safe for concurrent use with anything touching B.
func (b *Buffer) Grow(n int) {
	if n < 0 {
		panic("pool: Grow with negative count")
	}
	if cap(b.B)-len(b.B) >= n {
		return
	}
	need := len(b.B) + n
	c := classFor(need)
	if c == unpooled {
		// Past the largest class: grow geometrically so repeated small
		// Grows stay linear, and drop the old array into its pool.
		grown := make([]byte, len(b.B), max(need, 2*cap(b.B)))
		copy(grown, b.B)
		b.swapBacking(grown, unpooled)
		return
	}
	spare := get(c, need)
	spare.B = append(spare.B[:0], b.B...)
	grown := spare.B
	spare.B = b.B
	spare.class = b.class
	b.B, b.class = grown, c
	spare.putBack()
}

// swapBacking installs a new backing array and returns the old one to its pool.
func (b *Buffer) swapBacking(grown []byte, c int8) {
	old := &Buffer{B: b.B, class: b.class}
	b.B, b.class = grown, c
	old.putBack()
}

// recycle runs once per buffer lifetime, after the last reference is gone.
func (b *Buffer) recycle() {
	if b.id != 0 {
		untrack(b)
	}
	if detecting.Load() {
		// Retire this *Buffer so a stale second Release finds refs == 0
		// and panics, and recycle its memory under a fresh header.
		spare := &Buffer{B: b.B, class: b.class, local: b.local}
		b.B, b.local = nil, nil
		spare.putBack()
		return
	}
	b.putBack()
}

// putBack returns b to the pool matching its capacity, or drops it when the
// capacity fits no class (an append outgrew B, or B is unpooled).
func (b *Buffer) putBack() {
	c := classFloor(cap(b.B))
	if c == unpooled {
		return
	}
	b.B = b.B[:0:classSize(c)]
	b.class = c
	if l := b.local; l != nil {
		if l.put(b) {
			return
		}
		b.local = nil // a later Get from the shared pool may run on any goroutine
	}
	classes[c].Put(b)
}

// overRelease handles a Release on a buffer with no references left.
func (b *Buffer) overRelease() {
	if detecting.Load() {
		panic("pool: Release on a released buffer (double release)")
	}
	doubleReleases.Add(1)
}

// DoubleReleases reports how many releases of already-released buffers were
// ignored while leak detection was off. Safe for concurrent use.
func DoubleReleases() uint64 { return doubleReleases.Load() }

// classFor returns the smallest class holding size bytes, or unpooled.
func classFor(size int) int8 {
	if size <= minSize {
		return 0
	}
	if size > maxPooledSize {
		return unpooled
	}
	return int8(bits.Len(uint(size-1)) - minShift)
}

// classFloor returns the largest class whose size is <= capacity, or
// unpooled when capacity is below the smallest class or above the largest.
func classFloor(capacity int) int8 {
	if capacity < minSize || capacity > maxPooledSize {
		return unpooled
	}
	return int8(bits.Len(uint(capacity)) - 1 - minShift)
}

// classSize is the capacity of buffers in class c.
func classSize(c int8) int { return minSize << c }
