package engine

import (
	"bytes"
	"testing"
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
	if got := <-w.entered; !bytes.Equal(got, []byte("first\n")) { // the writer now blocks in Write
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
