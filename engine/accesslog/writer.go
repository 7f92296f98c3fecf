// Writer: the goroutine that drains every loop's rings and writes the
// lines, and the file it writes to.

package accesslog

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/pool/loopstat"
)

// Options configure a Writer.
type Options struct {
	// Path is where access lines go: "stdout", "stderr", or a file opened
	// for appending (created 0644). "" = no access log; the error log is
	// written anyway.
	Path     string
	Loops    int // event loops, one ring pair each
	RingSize int // access records per loop ring

	// Fields are the access line's fields, in order, as config's
	// access_log.format names them; nil = the standard line.
	Fields []string

	// ErrorPath is where the error log goes: "stdout", "stderr" or a file
	// opened for appending; "" = stderr.
	ErrorPath string
	// ErrorLevel is the least severe error-log line written (LevelDebug
	// to LevelError); "" = LevelInfo.
	ErrorLevel string
	// ErrorOut, when set, is the error log instead of ErrorPath.
	ErrorOut io.Writer
}

// Path values that name the process's streams.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// PassInterval is how often the writer drains the rings while records
// arrive. A ring must hold what a loop finishes in that time: 4096 slots
// last 40 ms at 100,000 requests per second on one loop. After a pass that
// found every ring empty the writer sleeps until a loop commits a record,
// so an idle gateway does not wake it 100 times a second.
const PassInterval = 10 * time.Millisecond

// errorRingSize is each loop's error ring. The Limiter lets 10 lines a
// second through, so it never fills unless the writer is stuck.
const errorRingSize = 64

// flushAt is the pending bytes past which a pass writes before going on,
// so a backlog never builds one huge buffer.
const flushAt = 64 << 10

// Writer owns the rings and the writer goroutine. Start it once, Stop it
// once after the loops have stopped. Its methods are safe for concurrent
// use unless they say otherwise.
type Writer struct {
	access []*Ring // by loop; nil when the access log is off
	errs   []*Ring // by loop

	path     string
	file     *os.File  // the access log file, or nil (stdout, stderr, off); owned by run
	out      io.Writer // where access lines go; owned by run
	errPath  string
	errMin   int // the least severe level written (levelRank)
	errMu    sync.Mutex
	errOut   io.Writer // guarded by errMu, which also orders its lines
	errFile  *os.File  // the error log file, or nil (a stream); guarded by errMu
	recent   recent    // the last lines written, for Recent; guarded by errMu
	lines    atomic.Uint64
	failures atomic.Uint64 // writes that failed; their lines are lost

	wake      wake // shared by every ring
	reopen    chan struct{}
	stop      chan struct{}
	done      chan struct{}
	started   atomic.Bool
	stopOnce  sync.Once
	fmt       *formatter // owned by run, or by Stop once run is over
	buf, ebuf []byte     // lines waiting to be written; owned as fmt
}

// New opens the access log (if any) and makes the rings. The file is
// opened now, so a path that cannot be written fails at startup.
func New(o Options) (*Writer, error) {
	if err := pretouchOnce(); err != nil {
		return nil, fmt.Errorf("accesslog: compiling the line encoders: %w", err)
	}
	w := &Writer{path: o.Path, errPath: o.ErrorPath, errMin: levelRank(o.ErrorLevel), reopen: make(chan struct{}, 1),
		fmt: newFormatter(o.Fields), stop: make(chan struct{}), done: make(chan struct{})}
	w.wake.ch = make(chan struct{}, 1)
	switch {
	case o.ErrorOut != nil:
		w.errOut, w.errPath = o.ErrorOut, ""
	case o.ErrorPath == "" || o.ErrorPath == Stderr:
		w.errOut = os.Stderr
	case o.ErrorPath == Stdout:
		w.errOut = os.Stdout
	default:
		f, err := openLog("error_log", o.ErrorPath)
		if err != nil {
			return nil, err
		}
		w.errFile, w.errOut = f, f
	}
	w.errs = make([]*Ring, o.Loops)
	for i := range w.errs {
		w.errs[i] = NewRing(errorRingSize)
		w.errs[i].wake = &w.wake
	}
	if o.Path == "" {
		return w, nil
	}
	switch o.Path {
	case Stdout:
		w.out = os.Stdout
	case Stderr:
		w.out = os.Stderr
	default:
		f, err := openLog("access_log", o.Path)
		if err != nil {
			return nil, err
		}
		w.file, w.out = f, f
	}
	w.access = make([]*Ring, o.Loops)
	for i := range w.access {
		w.access[i] = NewRing(o.RingSize)
		w.access[i].wake = &w.wake
	}
	w.buf = make([]byte, 0, flushAt+4<<10)
	return w, nil
}

func openLog(key, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return f, nil
}

// Access is loop's access ring, or nil when the access log is off.
func (w *Writer) Access(loop int) *Ring {
	if w.access == nil {
		return nil
	}
	return w.access[loop]
}

// Errors is loop's error ring.
func (w *Writer) Errors(loop int) *Ring { return w.errs[loop] }

// Dropped sums the records the rings refused: access records, then error
// records.
func (w *Writer) Dropped() (access, errs uint64) {
	for _, r := range w.access {
		access += r.Dropped()
	}
	for _, r := range w.errs {
		errs += r.Dropped()
	}
	return access, errs
}

// Lines is how many access lines have been written.
func (w *Writer) Lines() uint64 { return w.lines.Load() }

// WriteFailures is how many writes failed (a full disk, a closed stdout);
// the lines in them are lost.
func (w *Writer) WriteFailures() uint64 { return w.failures.Load() }

// Start runs the writer goroutine. Call it once.
func (w *Writer) Start() {
	w.started.Store(true)
	go w.run()
}

// Stop writes what the rings still hold, closes the access log file, and
// ends the goroutine. The loops must have stopped producing. Later calls
// do nothing. The error log stays open: a process writes its last lines
// (that it stopped) after its server has.
func (w *Writer) Stop() {
	w.stopOnce.Do(func() {
		if w.started.Load() {
			close(w.stop)
			<-w.done
		} else {
			w.pass()
		}
		if w.file != nil {
			_ = w.file.Close()
			w.file = nil
		}
	})
}

// Reopen asks the writer to reopen the access and error log files at their
// paths, for logrotate (SIGUSR1): lines go to the new files from the next
// pass. It never waits; a request already pending covers this one. Before
// Start, or after Stop, only the error log is reopened, at once.
func (w *Writer) Reopen() {
	if !w.started.Load() {
		w.reopenErrors()
		return
	}
	select {
	case w.reopen <- struct{}{}:
	default:
	}
}

// SetErrorOutput sends the error log to out from now on (error_log.path
// is not reopened any more).
func (w *Writer) SetErrorOutput(out io.Writer) {
	w.errMu.Lock()
	w.errOut = out
	w.errPath = ""
	w.errMu.Unlock()
}

// Event writes one error-log line now, unless its level is below
// error_log.level, from any goroutine but a loop's (it encodes and writes
// synchronously).
func (w *Writer) Event(ev Event) { w.EventAt(time.Now(), ev) }

// EventAt is Event for something that happened at t.
func (w *Writer) EventAt(t time.Time, ev Event) {
	if levelRank(ev.Level) < w.errMin {
		return
	}
	w.writeErrors(AppendEvent(nil, t, &ev))
}

// AppendEvent appends ev as one error-log line, its Time set to t, to dst.
// It allocates: for lines off the hot path.
func AppendEvent(dst []byte, t time.Time, ev *Event) []byte {
	ev.Time = t.UTC().Format(timeLayout)
	return appendLine(dst, ev)
}

// levelRank orders the levels, least severe first; "" and unknown names
// rank as LevelInfo.
func levelRank(level string) int {
	switch level {
	case LevelDebug:
		return 0
	case LevelWarn:
		return 2
	case LevelError:
		return 3
	}
	return 1
}

func (w *Writer) run() {
	defer close(w.done)
	t := time.NewTicker(PassInterval)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			w.pass()
			return
		case <-w.reopen:
			w.pass()
			w.reopenFile()
			w.reopenErrors()
		case <-t.C:
			// Every ring empty: sleep until a record comes, and write it
			// at once (a wake-up left over from before may find none).
			for w.pass() == 0 {
				if w.sleep(t) {
					w.pass()
					return
				}
			}
		}
	}
}

// sleep waits, with the ticker stopped, until a loop commits a record, a
// reopen is asked for or Stop is called (then it reports true). It is
// called after a pass that found every ring empty.
func (w *Writer) sleep(t *time.Ticker) (stopped bool) {
	t.Stop()
	defer t.Reset(PassInterval)
	w.wake.sleeping.Store(true)
	if w.pending() { // committed before sleeping was set: no wake-up comes
		w.wake.sleeping.Store(false)
		return false
	}
	select {
	case <-w.stop:
		return true
	case <-w.reopen:
		w.wake.sleeping.Store(false)
		w.reopenFile()
		w.reopenErrors()
	case <-w.wake.ch:
	}
	return false
}

// pending reports whether any ring holds a record.
func (w *Writer) pending() bool {
	for _, r := range w.errs {
		if r.Pending() > 0 {
			return true
		}
	}
	for _, r := range w.access {
		if r.Pending() > 0 {
			return true
		}
	}
	return false
}

// pass drains every ring once (at most one ring's worth of records each, so
// a loop producing as fast as the writer reads cannot hold it) and writes
// the lines. It returns how many records it took.
func (w *Writer) pass() (records int) {
	f := w.fmt
	f.offset = time.Now().UnixNano() - loopstat.Now()
	for _, r := range w.errs {
		for n := r.Pending(); n > 0; n-- {
			records++
			w.ebuf = f.appendError(w.ebuf, r.At(0))
			r.Release(1)
		}
	}
	if len(w.ebuf) > 0 {
		w.writeErrors(w.ebuf)
		w.ebuf = w.ebuf[:0]
	}
	for _, r := range w.access {
		for left := r.Pending(); left > 0; {
			n := min(left, batchLines)
			w.buf = f.appendAccess(w.buf, r, n)
			r.Release(n)
			records += n
			w.lines.Add(uint64(n))
			left -= n
			if len(w.buf) >= flushAt {
				w.flush()
			}
		}
	}
	w.flush()
	return records
}

func (w *Writer) flush() {
	if len(w.buf) == 0 {
		return
	}
	if _, err := w.out.Write(w.buf); err != nil {
		w.failures.Add(1)
	}
	w.buf = w.buf[:0]
}

func (w *Writer) writeErrors(b []byte) {
	w.errMu.Lock()
	_, err := w.errOut.Write(b)
	w.recent.keep(b)
	w.errMu.Unlock()
	if err != nil {
		w.failures.Add(1)
	}
}

// reopenFile opens the path again and swaps the new file in. If it cannot
// be opened, lines keep going to the old file and the error log says why.
func (w *Writer) reopenFile() {
	if w.file == nil {
		return // stdout, stderr or off: nothing to reopen
	}
	f, err := openLog("access_log", w.path)
	if err != nil {
		w.Event(Event{Level: LevelError, Event: "access_log_reopen", Error: err.Error()})
		return
	}
	old := w.file
	w.file, w.out = f, f
	_ = old.Close()
}

// reopenErrors is reopenFile for the error log. Any goroutine.
func (w *Writer) reopenErrors() {
	w.errMu.Lock()
	if w.errFile == nil || w.errPath == "" {
		w.errMu.Unlock()
		return // a stream, or SetErrorOutput replaced the file
	}
	f, err := openLog("error_log", w.errPath)
	if err == nil {
		old := w.errFile
		w.errFile, w.errOut = f, f
		_ = old.Close()
	}
	w.errMu.Unlock()
	if err != nil {
		w.Event(Event{Level: LevelError, Event: "error_log_reopen", Error: err.Error()})
	}
}
