package engine

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// blockedWriter stands for a stderr nobody reads: its first Write never
// returns until the test ends.
type blockedWriter struct {
	entered chan []byte
	hold    chan struct{}
}

func (w *blockedWriter) Write(p []byte) (int, error) {
	w.entered <- append([]byte(nil), p...)
	<-w.hold
	return len(p), nil
}

// With the output blocked, a notice never waits: the queue takes what fits
// (a copy: the log package reuses its buffer) and the rest is dropped and
// counted.
func TestNoticesNeverWait(t *testing.T) {
	w := &blockedWriter{entered: make(chan []byte, 1), hold: make(chan struct{})}
	defer close(w.hold)
	var a asyncLog
	a.start(w, 2)
	line := []byte("first\n")
	a.Write(line)
	if got := <-w.entered; !bytes.Contains(got, []byte(`"level":"info","event":"notice","message":"first"}`)) { // the writer now blocks in Write
		t.Fatalf("writer got %q", got)
	}
	copy(line, "XXXXX")
	for range 5 { // 2 fit in the queue, 3 are dropped; none may block
		a.Write(line)
	}
	if d := a.dropped.Load(); d != 3 {
		t.Fatalf("dropped %d, want 3", d)
	}
}

// sync returns once the lines queued before it are written, so a process
// that exits right after logging "stopped" does not lose the line.
func TestNoticesSyncWritesQueuedLines(t *testing.T) {
	w := &blockedWriter{entered: make(chan []byte, 3), hold: make(chan struct{})}
	var a asyncLog
	a.start(w, 8)
	for _, l := range []string{"one\n", "two\n", "stopped\n"} {
		a.Write([]byte(l))
	}
	<-w.entered // the writer holds "one" until released
	go func() {
		// Release the writer once sync's marker is queued behind the lines.
		for len(a.lines) < 3 {
			runtime.Gosched()
		}
		close(w.hold)
	}()
	a.sync(10 * time.Second)
	if got := len(w.entered); got != 2 { // "two" and "stopped", after "one"
		t.Fatalf("sync returned with %d of the 2 lines after the first written", got)
	}
}
