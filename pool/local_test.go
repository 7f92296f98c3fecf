// Tests for Local, a goroutine's own free list of small buffers.

package pool_test

import (
	"testing"
	"unsafe"

	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// A buffer released to its Local comes back from it: the same memory, clean.
func TestLocalReusesItsBuffers(t *testing.T) {
	var l pool.Local
	b := l.Get(700)
	if cap(b.B) != 1024 || len(b.B) != 0 || b.Refs() != 1 {
		t.Fatalf("Get(700): len %d cap %d refs %d", len(b.B), cap(b.B), b.Refs())
	}
	mem := unsafe.SliceData(b.B)
	b.B = append(b.B, "dirty"...)
	b.Release()
	if n := l.Kept(1); n != 1 {
		t.Fatalf("%d buffers kept after one release, want 1", n)
	}
	again := l.Get(1000)
	if unsafe.SliceData(again.B) != mem || len(again.B) != 0 || again.Refs() != 1 {
		t.Fatalf("second Get: same memory %v, len %d refs %d", unsafe.SliceData(again.B) == mem, len(again.B), again.Refs())
	}
	again.SafeRelease()
	pooltest.CheckNoLeaks(t)
}

// A Local keeps at most pool.LocalMax buffers of a class; the rest, and every
// buffer of a larger class, go to the shared pools.
func TestLocalBound(t *testing.T) {
	var l pool.Local
	bufs := make([]*pool.Buffer, pool.LocalMax+10)
	for i := range bufs {
		bufs[i] = l.Get(100)
	}
	big := l.Get(4096)
	if big.OwnedBy(&l) {
		t.Fatalf("a 4 KiB buffer belongs to the Local")
	}
	big.Release()
	for _, b := range bufs {
		b.Release()
	}
	if n := l.Kept(0); n != pool.LocalMax {
		t.Fatalf("%d buffers kept, want %d", n, pool.LocalMax)
	}
	for c := 1; c < pool.LocalClasses; c++ {
		if n := l.Kept(c); n != 0 {
			t.Fatalf("class %d keeps %d buffers, want 0", c, n)
		}
	}
	pooltest.CheckNoLeaks(t)
}

// A Local buffer grown past the Local's classes goes to the shared pools
// when released.
func TestLocalGrownBuffer(t *testing.T) {
	var l pool.Local
	b := l.Get(100)
	b.B = append(b.B, "head"...)
	b.Grow(8000)
	if string(b.B) != "head" {
		t.Fatalf("grown buffer holds %q", b.B)
	}
	b.Release()
	for c := range pool.LocalClasses {
		if n := l.Kept(c); n != 0 {
			t.Fatalf("class %d keeps %d buffers after a grown one's release, want 0", c, n)
		}
	}
	pooltest.CheckNoLeaks(t)
}

// A Get and Release through a Local allocate nothing (leak detection off:
// on, a released buffer's header is retired and replaced).
func TestLocalAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	pool.SetLeakDetection(false)
	defer pool.SetLeakDetection(true)
	var l pool.Local
	l.Get(600).Release()
	if n := testing.AllocsPerRun(1000, func() { l.Get(600).Release() }); n != 0 {
		t.Fatalf("%v allocations per Get and Release", n)
	}
}
