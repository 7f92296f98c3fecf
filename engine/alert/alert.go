// Package alert sends the gateway's alerts (pool/alert's events) to
// webhooks: one JSON POST per event, off the event loops.
//
// Raise (pool/alert) hands an event to Dispatcher.enqueue, which never
// waits: the event goes into a bounded queue, or is dropped and counted.
// One goroutine takes the queue and keeps the open episodes: an event that
// begins an episode already open is a duplicate and suppressed; a
// resolved event ends it, and one with no open episode is ignored. Each
// event that passes is an error-log line, a counter, and a payload queued
// for every webhook that asked for its kind. Each webhook has a goroutine
// and a bounded queue of its own, so a receiver that is down delays only
// its own alerts: it is retried with a doubling backoff, and past the
// queue's bound its new alerts are dropped and counted.
package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/pool/alert"
)

// Bounds: what may wait for the dispatcher, for one webhook, and how many
// episodes may be open at once (routes, upstreams and a few more; past it
// a new episode is dropped and counted).
const (
	eventQueue   = 1024
	webhookQueue = 256
	maxEpisodes  = 4096
	maxBackoff   = time.Minute
)

// Webhook is one receiver.
type Webhook struct {
	URL     string
	Events  []alert.Kind // empty: every event
	Timeout time.Duration
	Retries int           // attempts after the first
	Backoff time.Duration // before the first retry; doubles per retry up to a minute
}

// Options are the dispatcher's settings (config alerts).
type Options struct {
	Webhooks           []Webhook
	IsolationThreshold int // percent
}

// Payload is the JSON body of a POST.
type Payload struct {
	Event   alert.Kind `json:"event"`
	Status  string     `json:"status"` // "firing" or "resolved"
	Subject string     `json:"subject"`
	Message string     `json:"message"`
	Time    time.Time  `json:"time"`
	Since   *time.Time `json:"since,omitempty"` // resolved: when the episode began
}

// Dispatcher queues, deduplicates and sends alerts.
type Dispatcher struct {
	in   chan alert.Event
	done chan struct{}

	mu      sync.Mutex // Start, Configure and Close, off the loops
	opts    Options
	senders atomic.Pointer[[]*sender]
	started bool
	closed  bool

	fired, resolved [len(alert.Kinds)]atomic.Uint64
	suppressed      atomic.Uint64
	dropped         atomic.Uint64 // the event queue, the episodes or a webhook's queue was full
	delivered       atomic.Uint64
	failed          atomic.Uint64 // given up after the last retry, or refused with a 4xx
	retried         atomic.Uint64

	// Owned by run.
	open map[episode]time.Time
}

type episode struct {
	kind    alert.Kind
	subject string
}

// New makes a dispatcher with opts; Start starts it.
func New(opts Options) *Dispatcher {
	d := &Dispatcher{in: make(chan alert.Event, eventQueue), done: make(chan struct{}),
		open: make(map[episode]time.Time), opts: opts}
	empty := []*sender{}
	d.senders.Store(&empty)
	return d
}

// Start starts the dispatcher and its webhooks, and makes it the receiver
// of every raised event (one per process: the server run last).
func (d *Dispatcher) Start() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.started || d.closed {
		return
	}
	d.started = true
	alert.SetIsolationThreshold(d.opts.IsolationThreshold)
	d.startSenders()
	go d.run()
	alert.SetSink(d.enqueue)
}

// startSenders replaces the running webhooks with d.opts's.
func (d *Dispatcher) startSenders() {
	next := make([]*sender, len(d.opts.Webhooks))
	for i, w := range d.opts.Webhooks {
		next[i] = newSender(d, w)
	}
	for _, s := range *d.senders.Swap(&next) {
		s.stop()
	}
}

// Configure replaces the webhooks when they changed, and the threshold (a
// reload). The old webhooks' queued alerts are dropped with them.
func (d *Dispatcher) Configure(opts Options) {
	d.mu.Lock()
	defer d.mu.Unlock()
	same := reflect.DeepEqual(opts.Webhooks, d.opts.Webhooks)
	d.opts = opts
	if !d.started || d.closed {
		return
	}
	alert.SetIsolationThreshold(opts.IsolationThreshold)
	if !same {
		d.startSenders()
	}
}

// Close stops the dispatcher and its webhooks; what they hold is dropped.
func (d *Dispatcher) Close() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return
	}
	d.closed = true
	if !d.started {
		return
	}
	close(d.done)
	empty := []*sender{}
	for _, s := range *d.senders.Swap(&empty) {
		s.stop()
	}
}

// enqueue is the sink: it never waits.
func (d *Dispatcher) enqueue(e alert.Event) {
	select {
	case d.in <- e:
	default:
		d.dropped.Add(1)
	}
}

func (d *Dispatcher) run() {
	for {
		select {
		case <-d.done:
			return
		case e := <-d.in:
			d.handle(e)
		}
	}
}

// handle deduplicates e, logs and counts it, and queues it for the
// webhooks.
func (d *Dispatcher) handle(e alert.Event) {
	i := slices.Index(alert.Kinds[:], e.Kind)
	if i < 0 {
		d.dropped.Add(1) // a kind the counters do not know: a bug, never worth a crash
		return
	}
	k := episode{e.Kind, e.Subject}
	p := Payload{Event: e.Kind, Subject: e.Subject, Message: e.Message, Time: e.At.UTC(), Status: "firing"}
	if e.Resolved {
		since, ok := d.open[k]
		if !ok {
			return // nothing open to resolve
		}
		delete(d.open, k)
		p.Status, p.Since = "resolved", &since
		d.resolved[i].Add(1)
		log.Printf("alert %s %s resolved: %s", e.Kind, e.Subject, e.Message)
	} else {
		if _, dup := d.open[k]; dup {
			d.suppressed.Add(1)
			return
		}
		if len(d.open) >= maxEpisodes {
			d.dropped.Add(1)
			return
		}
		d.open[k] = p.Time
		d.fired[i].Add(1)
		log.Printf("warning: alert %s %s firing: %s", e.Kind, e.Subject, e.Message)
	}
	body, _ := json.Marshal(&p) // a struct of strings and times: cannot fail
	for _, s := range *d.senders.Load() {
		if len(s.w.Events) > 0 && !slices.Contains(s.w.Events, e.Kind) {
			continue
		}
		select {
		case s.q <- body:
		default:
			d.dropped.Add(1)
		}
	}
}

// sender posts one webhook's alerts, in order, retrying each.
type sender struct {
	d      *Dispatcher
	w      Webhook
	q      chan []byte
	ctx    context.Context
	cancel context.CancelFunc
	client *http.Client
}

func newSender(d *Dispatcher, w Webhook) *sender {
	ctx, cancel := context.WithCancel(context.Background())
	s := &sender{d: d, w: w, q: make(chan []byte, webhookQueue), ctx: ctx, cancel: cancel,
		client: &http.Client{Timeout: w.Timeout}}
	go s.run()
	return s
}

func (s *sender) stop() { s.cancel() }

func (s *sender) run() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case body := <-s.q:
			s.deliver(body)
		}
	}
}

// deliver posts body until a 2xx answer, a refusal that a retry cannot
// change (a 4xx other than 408 and 429), or the last retry.
func (s *sender) deliver(body []byte) {
	wait := s.w.Backoff
	for attempt := 0; ; attempt++ {
		status, err := s.post(body)
		switch {
		case err == nil && status/100 == 2:
			s.d.delivered.Add(1)
			return
		case err == nil && status/100 == 4 && status != http.StatusRequestTimeout && status != http.StatusTooManyRequests:
			s.d.failed.Add(1)
			log.Printf("warning: alert webhook %s refused an alert: status %d; not retried", s.w.URL, status)
			return
		case s.ctx.Err() != nil:
			return
		case attempt >= s.w.Retries:
			s.d.failed.Add(1)
			why := fmt.Sprint(err)
			if err == nil {
				why = fmt.Sprintf("status %d", status)
			}
			log.Printf("warning: alert webhook %s: %s; gave up after %d attempts", s.w.URL, why, attempt+1)
			return
		}
		s.d.retried.Add(1)
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, maxBackoff)
	}
}

func (s *sender) post(body []byte) (int, error) {
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.w.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "loopgate-alerts")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	resp.Body.Close()
	return resp.StatusCode, nil
}

// WritePrometheus writes the alert counters.
func (d *Dispatcher) WritePrometheus(w io.Writer) {
	var b bytes.Buffer
	b.WriteString("# HELP loopgate_alerts_total Alerts raised, by event and status (firing, resolved); duplicates within an episode are not counted here.\n# TYPE loopgate_alerts_total counter\n")
	for i, k := range alert.Kinds {
		fmt.Fprintf(&b, "loopgate_alerts_total{event=%q,status=\"firing\"} %d\n", k, d.fired[i].Load())
		fmt.Fprintf(&b, "loopgate_alerts_total{event=%q,status=\"resolved\"} %d\n", k, d.resolved[i].Load())
	}
	counter := func(name, help string, v uint64) {
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", name, help, name, name, v)
	}
	counter("loopgate_alerts_suppressed_total", "Alerts suppressed as duplicates of an open episode.", d.suppressed.Load())
	counter("loopgate_alerts_dropped_total", "Alerts dropped because a bounded queue (the dispatcher's or a webhook's) or the open episodes were full.", d.dropped.Load())
	counter("loopgate_alert_deliveries_total", "Alert POSTs a webhook answered 2xx.", d.delivered.Load())
	counter("loopgate_alert_delivery_retries_total", "Alert POSTs retried after a failure or a 5xx, 408 or 429 answer.", d.retried.Load())
	counter("loopgate_alert_delivery_failures_total", "Alerts given up on: refused with a 4xx, or failed after the last retry.", d.failed.Load())
	_, _ = w.Write(b.Bytes())
}
