// Operator notices: the one-line log messages written once per event
// (a breaker transition, an ejection, a health change, an isolation
// warning), not per request. Many are written on an event loop, so the
// standard logger's output goes through a bounded queue to a writer
// goroutine: a stderr that is slow or blocked (a full pipe to a stalled
// log collector) never blocks a loop. A notice that finds the queue full
// is dropped and counted (loopgate_log_notices_dropped_total).

package engine

import (
	"io"
	"log"
	"sync"
	"sync/atomic"
)

// noticeQueue is how many notices may wait for the writer.
const noticeQueue = 1024

// asyncLog is the standard logger's output while a server runs.
type asyncLog struct {
	lines   chan []byte
	dropped atomic.Uint64
}

var (
	notices     asyncLog
	noticesOnce sync.Once
)

// startNotices puts the queue in front of the standard logger's current
// output, once per process.
func startNotices() {
	noticesOnce.Do(func() {
		notices.start(log.Writer(), noticeQueue)
		log.SetOutput(&notices)
	})
}

// start makes the queue, of size lines, and its writer to out.
func (a *asyncLog) start(out io.Writer, size int) {
	a.lines = make(chan []byte, size)
	go func() {
		for line := range a.lines {
			_, _ = out.Write(line)
		}
	}()
}

// Write queues a copy of p (the log package reuses its buffer), or drops
// it when the queue is full. It never waits.
func (a *asyncLog) Write(p []byte) (int, error) {
	select {
	case a.lines <- append([]byte(nil), p...):
	default:
		a.dropped.Add(1)
	}
	return len(p), nil
}

var _ io.Writer = (*asyncLog)(nil)
