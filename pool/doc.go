// Package pool hands out reference-counted byte buffers backed by
// size-classed sync.Pools, and can report where any buffer that was never
// released was allocated.
//
// Loopgate keeps bytes past a gnet callback (a pipelined request waiting for
// its turn, a body waiting on a rate-limit decision, a request kept for a
// retry) in a *Buffer. A buffer starts with one reference, owned by whoever
// called Get:
//
//	b := pool.Get(4096) // refs = 1, len(b.B) == 0, cap(b.B) >= 4096
//	b.B = append(b.B, data...)
//	b.Retain()          // a second owner, e.g. the retry path; refs = 2
//	...
//	b.Release()         // first owner done; refs = 1
//	b.Release()         // last owner done; the memory goes back to the pool
//
// Every reference has exactly one release point. On an error path where the
// owner holds every reference and just wants the memory gone, SafeRelease
// drops all remaining references at once and is a no-op on nil or on a
// buffer it already released; set the variable to nil afterwards.
//
// After the last Release the *Buffer must not be touched again: with leak
// detection off the same *Buffer may already belong to another caller.
//
// # Size classes
//
// Requests are rounded up to a power of two between 512 B and 1 MiB and
// served from a sync.Pool for that class, so a steady-state Get/Release pair
// allocates nothing. Larger buffers are allocated directly and dropped to the
// garbage collector on release, so the pool never pins more than 1 MiB per
// idle buffer. Grow moves a buffer to a larger class in place.
//
// A Local is one goroutine's free list of small buffers in front of the
// shared pools: an event loop that builds a request head and releases it
// when the head's call ends gets the same memory back without the shared
// pools' synchronisation. A Local's buffer must be finally released on
// that goroutine.
//
// # Leak detection
//
// SetLeakDetection(true) makes Get record the caller's stack (a few frames,
// formatted only when asked for) and makes the final Release forget it;
// Leaks lists what is still outstanding. While detection is on, a released
// *Buffer is retired rather than recycled, so releasing it again always
// panics instead of silently releasing someone else's buffer. Detection is
// off by default and costs one atomic load per Get when off.
//
// Test suites turn it on with package pooltest:
//
//	func TestMain(m *testing.M) { pooltest.Main(m) }
package pool
