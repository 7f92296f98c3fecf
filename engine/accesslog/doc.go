// Package accesslog carries the gateway's two logs from the event loops to
// their files without ever making a loop wait: the access log (one JSON
// line per finished request) and the error log (one JSON line per
// gateway-made error, rate-limited, plus the control plane's events).
//
// The path of a line:
//
//	loop: Ring.Reserve ─▶ fill the fixed-size Record in place ─▶ Ring.Commit
//	      (ring full: the line is dropped and counted, never waited for)
//	writer goroutine, every 10 ms: Ring.At ─▶ format a batch with sonic
//	      ─▶ Ring.Release ─▶ buffered write to the file, stdout or stderr
//
// Each loop has its own rings (one for access records, one for error
// records), each with one producer (the loop) and one consumer (the
// writer), so a ring is two atomic counters and no lock. A Record is fixed
// size: bytes that live in request buffers (method, path, request ID) are
// copied in, bounded; strings are the config's own immutable ones (route
// id, node address, error messages), so filling a record allocates
// nothing. The writer formats from the slots themselves and releases them
// after, and reuses its buffers; sonic costs one small allocation per call,
// so access lines are encoded in batches of up to 128 (see batchLines).
//
// Times: a Record holds the loop's monotonic clock (loopstat.Now); the
// writer turns it into wall-clock time with an offset it re-reads on
// every pass, so the loop never reads the wall clock.
//
// The error log goes to the error output (stderr by default) even when the
// access log is off. Lines from loops pass a per-loop Limiter first;
// events from other goroutines (a reload's result) are written at once
// with Writer.Event.
package accesslog
