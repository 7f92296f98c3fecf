// Priority: the kernel priority handshakes compute at.

package tlsedge

// Priority is the kernel priority a handshake computes at while it holds
// a worker (RunnerOptions.Priority). Between computing steps, and for
// everything else the thread runs, the thread has its own priority.
type Priority uint8

const (
	// PriorityNormal: the thread's own priority; the kernel shares a CPU
	// between a computing handshake and a loop as between equals.
	PriorityNormal Priority = iota
	// PriorityNice: nice 10 (Linux). A loop runnable beside a computing
	// handshake gets most of the CPU, and handshakes still advance while
	// the loops are busy.
	PriorityNice
	// PriorityIdle: SCHED_IDLE (Linux). A waking loop preempts the
	// handshake at once; while the loops keep every CPU busy, handshakes
	// get almost nothing and wait, up to the handshake timeout.
	PriorityIdle

	priorities // how many there are
)
