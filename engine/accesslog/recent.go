// Recent: the last error-log lines, kept for the admin port (GET /errors)
// and the dashboard.

package accesslog

import "bytes"

// RecentLines is how many error-log lines Writer.Recent keeps.
const RecentLines = 50

// recentLineMax bounds one kept line; a longer one is kept cut at it, so
// the ring holds at most RecentLines × recentLineMax bytes.
const recentLineMax = 2048

// recent is a fixed ring of the last error-log lines, oldest overwritten.
// Its slots are cut from one buffer of RecentLines × recentLineMax bytes
// (100 KiB), made with the first line, so keeping a line allocates
// nothing after that. Guarded by Writer.errMu: written by writeErrors
// (the writer goroutine, Event's callers), read by Recent (the admin
// port); never touched by an event loop.
type recent struct {
	slots [RecentLines][]byte
	next  int // the slot the next line goes to
	n     int // slots filled, up to RecentLines
}

// keep copies each newline-ended line of b into the ring.
func (r *recent) keep(b []byte) {
	for len(b) > 0 {
		line := b
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) == 0 {
			continue
		}
		if r.slots[0] == nil {
			buf := make([]byte, RecentLines*recentLineMax)
			for i := range r.slots {
				r.slots[i] = buf[i*recentLineMax : i*recentLineMax : (i+1)*recentLineMax]
			}
		}
		r.slots[r.next] = append(r.slots[r.next][:0], line[:min(len(line), recentLineMax)]...)
		r.next = (r.next + 1) % RecentLines
		r.n = min(r.n+1, RecentLines)
	}
}

// lines copies the kept lines out, oldest first.
func (r *recent) lines() []string {
	out := make([]string, 0, r.n)
	for i := range r.n {
		out = append(out, string(r.slots[(r.next-r.n+i+RecentLines)%RecentLines]))
	}
	return out
}

// Recent is the last RecentLines error-log lines written, oldest first and
// newest last, each without its newline. Any goroutine but a loop's (it
// takes the error log's mutex).
func (w *Writer) Recent() []string {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.recent.lines()
}
