// The ring of recent error-log lines behind GET /errors.

package accesslog

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Recent keeps the last RecentLines lines as written, newest last, while
// another goroutine reads it: every read is a run of consecutive lines in
// order, never more than RecentLines.
func TestWriterRecentLines(t *testing.T) {
	var errOut syncBuffer
	w := startWriter(t, Options{ErrorOut: &errOut})
	if got := w.Recent(); len(got) != 0 {
		t.Fatalf("recent lines before any: %q", got)
	}
	const total = 4 * RecentLines
	seq := func(line string) int {
		var ev struct{ Error string }
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Errorf("line %q: %v", line, err)
			return -1
		}
		var n int
		fmt.Sscanf(ev.Error, "n=%d", &n)
		return n
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() { // the reader, concurrent with the writing below
		defer wg.Done()
		for {
			got := w.Recent()
			if len(got) > RecentLines {
				t.Errorf("%d lines kept, more than %d", len(got), RecentLines)
				return
			}
			for i := 1; i < len(got); i++ {
				if a, b := seq(got[i-1]), seq(got[i]); b != a+1 {
					t.Errorf("line %d is n=%d after n=%d", i, b, a)
					return
				}
			}
			select {
			case <-done:
				return
			default:
			}
		}
	}()
	for i := range total {
		w.Event(Event{Level: LevelError, Event: "reload", Error: fmt.Sprintf("n=%d", i)})
	}
	close(done)
	wg.Wait()
	got := w.Recent()
	written := strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n")
	if len(got) != RecentLines || len(written) != total {
		t.Fatalf("%d lines kept of %d written, want %d", len(got), len(written), RecentLines)
	}
	for i, line := range got {
		if want := written[total-RecentLines+i]; line != want {
			t.Fatalf("kept line %d %q, want the written %q", i, line, want)
		}
	}
	if seq(got[len(got)-1]) != total-1 {
		t.Fatalf("newest kept line %q, want n=%d", got[len(got)-1], total-1)
	}

	// A line over recentLineMax is kept cut, the ring's bytes bounded.
	w.Event(Event{Level: LevelError, Event: "reload", Error: strings.Repeat("x", 3*recentLineMax)})
	if got := w.Recent(); len(got[len(got)-1]) != recentLineMax {
		t.Fatalf("a long line kept as %d bytes, want %d", len(got[len(got)-1]), recentLineMax)
	}
}
