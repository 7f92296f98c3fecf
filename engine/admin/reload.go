// Reloader: the debounced reload every trigger goes through.

package admin

import (
	"context"
	"errors"
	"sync"
	"time"
)

// Window is how long a Reloader waits after the first trigger of a burst
// before reloading: every trigger in that time shares the one reload.
const Window = 100 * time.Millisecond

// Result is what one reload did.
type Result struct {
	Trigger  string // the first trigger of the burst: "SIGHUP", "POST /reload"
	Triggers int    // how many triggers the reload served
	Changes  string // what changed, when the reload was applied
	Err      error  // why it was refused; nil when applied
	// Took is how long the reload ran, from re-reading the file (its
	// settle reads included) to the new version applied, without the
	// debounce window before it.
	Took time.Duration
}

// ReloadOptions are what a trigger asks of the reload that serves it.
type ReloadOptions struct {
	// AllowEmpty lets the reload apply a config that removes every route
	// or every upstream (engine.ReloadOptions.AllowEmpty). A reload that
	// serves several triggers allows it when any of them asked: they all
	// re-read the same file at the same moment.
	AllowEmpty bool
}

// ConfigError marks a reload refused because of the config file itself: it
// cannot be read, parsed or validated. POST /reload answers it with 422;
// other refusals get 409.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ErrStopped is the result of triggers still waiting when the Reloader
// stops.
var ErrStopped = errors.New("admin: shutting down; not reloaded")

// Reloader runs reloads one at a time, coalescing triggers (see Window).
// Its methods are safe for concurrent use.
type Reloader struct {
	reload func(ReloadOptions) (string, error)
	report func(Result)
	after  func(time.Duration) <-chan time.Time // time.After, or a test's clock

	mu      sync.Mutex
	next    *Pending // triggers waiting for the next reload; guarded by mu
	stopped bool     // Stop has run: no reload will come; guarded by mu

	kick     chan struct{} // a new Pending was made
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// Pending is one reload that triggers wait for.
type Pending struct {
	first  string
	n      int           // guarded by the Reloader's mu until the reload takes it
	opts   ReloadOptions // every trigger's options merged; guarded like n
	done   chan struct{}
	result Result // set before done is closed
}

// NewReloader returns a running Reloader. reload re-reads the config and
// applies it, returning what changed or why not; report is called with
// every result (to log it). Stop ends it.
func NewReloader(reload func(ReloadOptions) (string, error), report func(Result)) *Reloader {
	return newReloader(reload, report, time.After)
}

func newReloader(reload func(ReloadOptions) (string, error), report func(Result), after func(time.Duration) <-chan time.Time) *Reloader {
	r := &Reloader{reload: reload, report: report, after: after,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go r.run()
	return r
}

// Trigger asks for a reload with the default options; see TriggerWith.
func (r *Reloader) Trigger(name string) *Pending { return r.TriggerWith(name, ReloadOptions{}) }

// TriggerWith asks for a reload with o and returns the one that will serve
// it. It never waits. After Stop the Pending is already done, with
// ErrStopped.
func (r *Reloader) TriggerWith(name string, o ReloadOptions) *Pending {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		p := &Pending{first: name, n: 1, done: make(chan struct{})}
		p.result = Result{Trigger: name, Triggers: 1, Err: ErrStopped}
		close(p.done)
		return p
	}
	if r.next == nil {
		r.next = &Pending{first: name, done: make(chan struct{})}
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	r.next.n++
	r.next.opts.AllowEmpty = r.next.opts.AllowEmpty || o.AllowEmpty
	return r.next
}

// Wait returns the reload's result, or ctx's error if it ends first.
func (p *Pending) Wait(ctx context.Context) (Result, error) {
	select {
	case <-p.done:
		return p.result, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Stop ends the Reloader after the reload in progress, if any. Triggers
// still waiting, and any that come later, get ErrStopped.
func (r *Reloader) Stop() {
	r.stopOnce.Do(func() {
		close(r.stop)
		<-r.done
		r.mu.Lock()
		p := r.next
		r.next = nil
		r.stopped = true
		r.mu.Unlock()
		if p != nil {
			p.result = Result{Trigger: p.first, Triggers: p.n, Err: ErrStopped}
			close(p.done)
		}
	})
}

func (r *Reloader) run() {
	defer close(r.done)
	for {
		select {
		case <-r.stop:
			return
		case <-r.kick:
		}
		select {
		case <-r.stop:
			return
		case <-r.after(Window):
		}
		r.mu.Lock()
		p := r.next
		r.next = nil // triggers from now on wait for the next reload
		r.mu.Unlock()
		if p == nil {
			continue
		}
		start := time.Now()
		changes, err := r.reload(p.opts)
		p.result = Result{Trigger: p.first, Triggers: p.n, Changes: changes, Err: err, Took: time.Since(start)}
		r.report(p.result)
		close(p.done)
	}
}
