// Limiter: how many error lines one loop may log per second.

package accesslog

import "sync/atomic"

// ErrorLinesPerSecond is how many error-log lines one event loop may write
// per second. A failing upstream under load fails every request; the log
// shows the first lines of each second and how many it held back.
const ErrorLinesPerSecond = 10

// Limiter lets at most ErrorLinesPerSecond lines through per second of the
// loop's clock, counting the rest. The zero value is ready. Owned by one
// loop, except Suppressed, which any goroutine may read.
type Limiter struct {
	second int64  // start of the current one-second window (loopstat ns)
	n      int    // lines let through in it
	held   uint32 // lines held back since the last one let through

	suppressed atomic.Uint64
}

// Allow reports whether a line may be logged at now (loopstat ns), and how
// many lines were held back since the last one allowed, which the allowed
// line reports.
func (l *Limiter) Allow(now int64) (ok bool, held uint32) {
	if now-l.second >= 1e9 {
		l.second, l.n = now, 0
	}
	if l.n >= ErrorLinesPerSecond {
		l.held++
		l.suppressed.Add(1)
		return false, 0
	}
	l.n++
	held, l.held = l.held, 0
	return true, held
}

// Suppressed is how many lines the limiter has held back in all. Safe for
// concurrent use.
func (l *Limiter) Suppressed() uint64 { return l.suppressed.Load() }
