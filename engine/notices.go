// Operator notices: the one-line log messages written once per event
// (a breaker transition, an ejection, a health change, an isolation
// warning), not per request. Many are written on an event loop, so the
// standard logger's output goes through a bounded queue to a writer
// goroutine: a stderr that is slow or blocked (a full pipe to a stalled
// log collector) never blocks a loop. A notice that finds the queue full
// is dropped and counted (loopgate_log_notices_dropped_total).
//
// The writer makes each notice a JSON line of the error log, like the
// error records: {"time":...,"level":...,"event":"notice","message":...}.
// It goes to the server's error log (error_log: path and level), or to
// the standard logger's first output before any server is made.

package engine

import (
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/engine/accesslog"
)

// noticeQueue is how many notices may wait for the writer.
const noticeQueue = 1024

// eventNotice is the error-log event name of a notice.
const eventNotice = "notice"

// notice is one queued line. A zero notice asks the writer to report in on
// synced.
type notice struct {
	at    time.Time
	level string
	text  string
}

// asyncLog is the standard logger's output while a server runs.
type asyncLog struct {
	lines   chan notice
	synced  chan struct{} // the writer has written every line before a zero one
	dropped atomic.Uint64

	// sink is the error log of the server made or run last; nil = out.
	sink atomic.Pointer[accesslog.Writer]
}

var (
	notices     asyncLog
	noticesOnce sync.Once
)

// installNotices puts the queue in front of the standard logger's current
// output, once per process: New calls it, so lines logged while a config
// compiles are JSON already. The logger's own date and time go: the JSON
// line has its time.
func installNotices() {
	noticesOnce.Do(func() {
		notices.start(log.Writer(), noticeQueue)
		log.SetOutput(&notices)
		log.SetFlags(0)
	})
}

// startNotices sends notices to s's error log from now on (New pointed
// them there already; Run points them back, when another server was made
// since).
func startNotices(s *Server) {
	installNotices()
	notices.sink.Store(s.logs)
}

// start makes the queue, of size lines, and its writer to out.
func (a *asyncLog) start(out io.Writer, size int) {
	a.lines = make(chan notice, size)
	a.synced = make(chan struct{})
	go func() {
		for n := range a.lines {
			if n.level == "" {
				a.synced <- struct{}{}
				continue
			}
			ev := accesslog.Event{Level: n.level, Event: eventNotice, Message: n.text}
			if w := a.sink.Load(); w != nil {
				w.EventAt(n.at, ev)
				continue
			}
			_, _ = out.Write(accesslog.AppendEvent(nil, n.at, &ev))
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
	case a.lines <- notice{}:
	case <-t.C:
		return
	}
	select {
	case <-a.synced:
	case <-t.C:
	}
}

// Write queues one standard-logger line, or drops it when the queue is
// full. It never waits. The logger's lines carry no level: they are info,
// but for the ones that say they are a warning ("warning: ...", as the
// isolation and key-length notices word it) and a filter's panic, an error.
func (a *asyncLog) Write(p []byte) (int, error) {
	text := strings.TrimSuffix(string(p), "\n")
	level := accesslog.LevelInfo
	switch {
	case strings.Contains(text, "warning: "):
		level = accesslog.LevelWarn
	case strings.HasPrefix(text, "filters: panic"):
		level = accesslog.LevelError
	}
	a.put(level, text)
	return len(p), nil
}

// put queues text at level, or drops it. It never waits.
func (a *asyncLog) put(level, text string) {
	if a.lines == nil {
		// No server has run: nothing drains a queue yet.
		ev := accesslog.Event{Level: level, Event: eventNotice, Message: text}
		_, _ = os.Stderr.Write(accesslog.AppendEvent(nil, time.Now(), &ev))
		return
	}
	select {
	case a.lines <- notice{at: time.Now(), level: level, text: text}:
	default:
		a.dropped.Add(1)
	}
}

// noticef queues a notice at level, as the standard logger would queue it.
func noticef(level, format string, args ...any) { notices.put(level, fmt.Sprintf(format, args...)) }

var _ io.Writer = (*asyncLog)(nil)
