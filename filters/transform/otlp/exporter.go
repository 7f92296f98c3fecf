// The Exporter: the loops' rings and the one sender goroutine that posts
// their spans.

package otlp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Retries of one batch after its first post fails (a network error, 408,
// 429 or a 5xx), with a backoff from retryBackoff doubling per retry.
const (
	retries      = 3
	retryBackoff = 200 * time.Millisecond
)

// Exporter queues the loops' spans and posts them. Record is for the event
// loops; the other methods are safe for concurrent use.
type Exporter struct {
	start sync.Once
	rings atomic.Pointer[[]*ring] // one per loop; set once by Start

	wake chan struct{} // a ring reached a batch; capacity 1
	quit chan struct{}
	done chan struct{}
	stop sync.Once

	exported atomic.Uint64 // spans a collector took (2xx)
	failed   atomic.Uint64 // spans of batches given up on
	posts    atomic.Uint64 // posts made, retries included

	// Owned by the sender goroutine.
	client http.Client
	body   []byte
	batch  []Span
}

// New returns an exporter that exports nothing until Start.
func New() *Exporter {
	return &Exporter{wake: make(chan struct{}, 1), quit: make(chan struct{}), done: make(chan struct{})}
}

// Start makes the loops' rings, queueSize spans each, and starts the
// sender. Only the first call does anything: the rings stay as they are
// across reloads.
func (e *Exporter) Start(loops, queueSize int) {
	e.start.Do(func() {
		rings := make([]*ring, loops)
		for i := range rings {
			rings[i] = newRing(queueSize)
		}
		e.rings.Store(&rings)
		go e.send()
	})
}

// Record queues s, a span of a request served by loop, for the collector
// o names. It never waits and does not allocate: a full ring drops s and
// counts it. Called on event loop loop only, after Start.
func (e *Exporter) Record(loop int, o *Options, s *Span) {
	r := (*e.rings.Load())[loop]
	wake := false
	if r.opts.Load() != o {
		r.opts.Store(o) // a new config's first span: the sender takes its interval
		wake = true
	}
	if n := r.push(s); wake || n == uint64(o.BatchSize) {
		select {
		case e.wake <- struct{}{}:
		default: // the sender is awake already
		}
	}
}

// Close posts what the rings hold, once, and stops the sender.
func (e *Exporter) Close() {
	e.stop.Do(func() {
		close(e.quit)
		e.start.Do(func() { close(e.done) }) // never started: nothing to wait for
		<-e.done
	})
}

// send is the sender goroutine: it drains every ring at each wake and
// every flush interval (the latest config's; no timer before the first
// span), and once more when the exporter closes.
func (e *Exporter) send() {
	defer close(e.done)
	t := time.NewTimer(time.Hour)
	t.Stop()
	var tick <-chan time.Time // nil until a span says which interval
	defer t.Stop()
	for {
		select {
		case <-e.quit:
			e.drain(true)
			return
		case <-e.wake:
		case <-tick:
		}
		if o := e.drain(false); o != nil {
			t.Reset(o.FlushInterval)
			tick = t.C
		}
	}
}

// drain posts every ring's spans in batches, each with its ring's latest
// options, and returns the last options seen. Closing, it posts without
// retrying.
func (e *Exporter) drain(closing bool) *Options {
	var last *Options
	for _, r := range *e.rings.Load() {
		o := r.opts.Load()
		if o == nil {
			continue
		}
		last = o
		for r.len() > 0 {
			e.batch = e.batch[:0]
			r.pop(o.BatchSize, func(s *Span) { e.batch = append(e.batch, *s) })
			e.post(o, e.batch, closing)
		}
	}
	return last
}

// post sends one batch, retrying unless closing.
func (e *Exporter) post(o *Options, spans []Span, closing bool) {
	e.body = Encode(e.body[:0], o.ServiceName, spans)
	backoff := retryBackoff
	for attempt := 0; ; attempt++ {
		retry, err := e.postOnce(o, e.body)
		if err == nil {
			e.exported.Add(uint64(len(spans)))
			return
		}
		if !retry || closing || attempt == retries {
			e.failed.Add(uint64(len(spans)))
			return
		}
		select {
		case <-time.After(backoff):
		case <-e.quit:
			e.failed.Add(uint64(len(spans)))
			return
		}
		backoff *= 2
	}
}

// postOnce makes one post, and says whether a failure is worth a retry.
func (e *Exporter) postOnce(o *Options, body []byte) (retry bool, err error) {
	e.posts.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.Endpoint, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range o.Headers {
		req.Header.Set(k, v)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return true, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // so the connection is reused
	resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return false, nil
	case c == http.StatusRequestTimeout, c == http.StatusTooManyRequests, c >= 500:
		return true, fmt.Errorf("collector answered %d", c)
	default:
		return false, fmt.Errorf("collector answered %d", c)
	}
}

// WriteMetrics writes the exporter's series in the Prometheus text format.
func (e *Exporter) WriteMetrics(w io.Writer) {
	var dropped uint64
	if rings := e.rings.Load(); rings != nil {
		for _, r := range *rings {
			dropped += r.dropped.Load()
		}
	}
	for _, m := range []struct {
		name, help string
		v          uint64
	}{
		{"loopgate_trace_spans_exported_total", "Spans the OTLP collector took.", e.exported.Load()},
		{"loopgate_trace_spans_dropped_total", "Spans dropped because the loop's export queue was full (trace_context.otlp.queue_size).", dropped},
		{"loopgate_trace_spans_failed_total", "Spans of batches the collector refused, or that failed after the last retry.", e.failed.Load()},
		{"loopgate_trace_export_posts_total", "Posts to the OTLP collector, retries included.", e.posts.Load()},
	} {
		fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", m.name, m.help, m.name, m.name, m.v)
	}
}
