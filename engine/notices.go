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
	"time"
)

// noticeQueue is how many notices may wait for the writer.
const noticeQueue = 1024

// asyncLog is the standard logger's output while a server runs.
type asyncLog struct {
	lines   chan []byte   // a nil line asks the writer to report in on synced
	synced  chan struct{} // the writer has written every line before a nil one
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
	a.synced = make(chan struct{})
	go func() {
		for line := range a.lines {
			if line == nil {
				a.synced <- struct{}{}
				continue
			}
			_, _ = out.Write(line)
		}
	}()
}

// SyncNotices waits, up to a second, until the notices logged so far are
// written: a process calls it before it exits, or its last lines ("stopped")
// would be lost with the queue. Off the loops only.
func SyncNotices() {
	if notices.lines != nil {
		notices.sync(time.Second)
	}
}

// sync waits up to timeout until every line queued before it is written.
func (a *asyncLog) sync(timeout time.Duration) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case a.lines <- nil:
	case <-t.C:
		return
	}
	select {
	case <-a.synced:
	case <-t.C:
	}
}

// Write queues a copy of p (the log package reuses its buffer), or drops
// it when the queue is full. It never waits.
func (a *asyncLog) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil // a nil line is sync's marker
	}
	select {
	case a.lines <- append([]byte(nil), p...):
	default:
		a.dropped.Add(1)
	}
	return len(p), nil
}

var _ io.Writer = (*asyncLog)(nil)
