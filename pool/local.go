// Local: a free list of small buffers owned by one goroutine, in front of
// the shared pools.

package pool

// Local keeps released buffers of the smallest classes for one goroutine
// (an event loop) to get again without the shared pools' pinning and
// lock-free queues: a request head built and released on its loop costs a
// slice pop and push instead. A buffer got from a Local returns to it on
// its final release, which must therefore run on the Local's goroutine;
// Retain and the releases before the final one may run anywhere. Beyond
// localMax buffers of a class, and for larger classes, it serves and takes
// back through the shared pools as Get does. The zero value is ready to
// use. Not safe for concurrent use.
type Local struct {
	free [localClasses][]*Buffer
}

const (
	localClasses = 3  // 512 B, 1 KiB and 2 KiB: request and response heads
	localMax     = 64 // buffers kept per class: a loop's heads in flight under load
)

// Get is pool.Get, served from l's free list when it holds a buffer of the
// class. On l's goroutine only.
func (l *Local) Get(size int) *Buffer {
	c := classFor(size)
	if c < 0 || c >= localClasses {
		return Get(size)
	}
	var b *Buffer
	if s := l.free[c]; len(s) > 0 {
		b = s[len(s)-1]
		s[len(s)-1] = nil
		l.free[c] = s[:len(s)-1]
	} else {
		b = get(c, size)
		b.local = l
	}
	b.refs.Store(1)
	if detecting.Load() {
		track(b, size)
	}
	return b
}

// put keeps b for the next Get of its class, unless the class's list is
// full; it reports whether it kept b.
func (l *Local) put(b *Buffer) bool {
	c := b.class
	if c < 0 || c >= localClasses || len(l.free[c]) >= localMax {
		return false
	}
	if l.free[c] == nil {
		l.free[c] = make([]*Buffer, 0, localMax)
	}
	l.free[c] = append(l.free[c], b)
	return true
}
