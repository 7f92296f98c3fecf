package alert_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	enginealert "github.com/loopgate/loopgate/engine/alert"
	"github.com/loopgate/loopgate/pool/alert"
)

// receiver is a webhook endpoint that records what it got and answers
// with the statuses it is told to, in turn (then 200).
type receiver struct {
	mu       sync.Mutex
	got      []enginealert.Payload
	attempts []time.Time
	answers  []int
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p enginealert.Payload
	if err := json.NewDecoder(r.Body).Decode(&p); err != nil || r.Header.Get("Content-Type") != "application/json" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.attempts = append(rc.attempts, time.Now())
	if len(rc.answers) > 0 {
		st := rc.answers[0]
		rc.answers = rc.answers[1:]
		w.WriteHeader(st)
		return
	}
	rc.got = append(rc.got, p)
}

func (rc *receiver) payloads() []enginealert.Payload {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]enginealert.Payload(nil), rc.got...)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func metrics(d *enginealert.Dispatcher) string {
	var b strings.Builder
	d.WritePrometheus(&b)
	return b.String()
}

// TestWebhookRetriesDedupResolves: a receiver answering 500 twice is
// retried with a doubling backoff until it takes the alert; a second
// firing of the same episode is suppressed; the resolved event follows
// with the episode's start; a kind the webhook did not ask for is not sent.
func TestWebhookRetriesDedupResolves(t *testing.T) {
	rc := &receiver{answers: []int{500, 500}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	backoff := 50 * time.Millisecond
	d := enginealert.New(enginealert.Options{IsolationThreshold: 50, Webhooks: []enginealert.Webhook{{
		URL: srv.URL, Events: []alert.Kind{alert.BreakerOpen}, Timeout: time.Second, Retries: 3, Backoff: backoff}}})
	defer d.Close()
	d.Start()
	defer alert.SetSink(nil)

	alert.Raise(alert.Event{Kind: alert.BreakerOpen, Subject: "r1", Message: "closed -> open"})
	alert.Raise(alert.Event{Kind: alert.BreakerOpen, Subject: "r1", Message: "half_open -> open"}) // same episode
	alert.Raise(alert.Event{Kind: alert.UpstreamDown, Subject: "u1"})                              // not asked for
	alert.Raise(alert.Event{Kind: alert.BreakerOpen, Subject: "r1", Resolved: true, Message: "half_open -> closed"})
	alert.Raise(alert.Event{Kind: alert.BreakerOpen, Subject: "r1", Resolved: true}) // nothing open: ignored

	waitFor(t, "two deliveries", func() bool { return len(rc.payloads()) >= 2 })
	got := rc.payloads()
	if len(got) != 2 || got[0].Status != "firing" || got[0].Subject != "r1" || got[0].Event != alert.BreakerOpen ||
		got[0].Message != "closed -> open" || got[1].Status != "resolved" || got[1].Since == nil || !got[1].Since.Equal(got[0].Time) {
		t.Fatalf("payloads %+v", got)
	}
	rc.mu.Lock()
	at := rc.attempts
	rc.mu.Unlock()
	if len(at) != 4 { // 500, 500, firing taken, resolved taken
		t.Fatalf("%d attempts, want 4", len(at))
	}
	// The backoff doubles: the second retry waited at least twice the first's minimum.
	if d1, d2 := at[1].Sub(at[0]), at[2].Sub(at[1]); d1 < backoff || d2 < 2*backoff {
		t.Fatalf("retries after %v and %v, want at least %v and %v", d1, d2, backoff, 2*backoff)
	}
	// A delivery is counted once the dispatcher has read the receiver's
	// answer, which may be after the receiver has the payload.
	wants := []string{
		`loopgate_alerts_total{event="breaker_open",status="firing"} 1`,
		`loopgate_alerts_total{event="breaker_open",status="resolved"} 1`,
		`loopgate_alerts_total{event="upstream_down",status="firing"} 1`,
		"loopgate_alerts_suppressed_total 1",
		"loopgate_alert_delivery_retries_total 2",
		"loopgate_alert_deliveries_total 2",
	}
	var m string
	lacking := func() []string {
		m = metrics(d)
		var out []string
		for _, want := range wants {
			if !strings.Contains(m, want) {
				out = append(out, want)
			}
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for l := lacking(); len(l) > 0; l = lacking() {
		if time.Now().After(deadline) {
			t.Fatalf("metrics lack %q:\n%s", l, m)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// A new episode after the resolved one is sent again.
	alert.Raise(alert.Event{Kind: alert.BreakerOpen, Subject: "r1"})
	waitFor(t, "the next episode", func() bool { return len(rc.payloads()) == 3 })
}

// TestWebhookDownBoundedAndNonBlocking: a receiver that is down is retried
// until the last retry, then given up; while it is, raising never waits
// and what does not fit its queue is dropped and counted.
func TestWebhookDownBoundedAndNonBlocking(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there now: every POST fails to connect
	d := enginealert.New(enginealert.Options{Webhooks: []enginealert.Webhook{{
		URL: url, Timeout: time.Second, Retries: 2, Backoff: time.Hour}}})
	defer d.Close()
	d.Start()
	defer alert.SetSink(nil)
	const n = 3000 // more than the dispatcher's and the webhook's queues hold
	for i := range n {
		alert.Raise(alert.Event{Kind: alert.UpstreamDown, Subject: "u" + strconv.Itoa(i)}) // each its own episode
	}
	waitFor(t, "the first retry", func() bool { return strings.Contains(metrics(d), "loopgate_alert_delivery_retries_total 1") })
	// What is held is bounded: the webhook's queue (256) and the one alert
	// its sender is retrying; every other alert is dropped and counted,
	// whether at the dispatcher's queue or the webhook's. 2744 if the
	// sender took its alert only after the last one was queued.
	waitFor(t, "every alert queued or dropped", func() bool {
		v := counter(t, metrics(d), "loopgate_alerts_dropped_total")
		return v == n-256-1 || v == n-256
	})
}

// counter reads one unlabelled counter from the dispatcher's series.
func counter(t *testing.T, page, name string) int {
	t.Helper()
	for _, line := range strings.Split(page, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return n
		}
	}
	t.Fatalf("no %s in\n%s", name, page)
	return 0
}

// TestWebhookDeliversOnceBackUp: an alert for a receiver that is down is
// retried, and arrives once when a receiver listens at that address again.
func TestWebhookDeliversOnceBackUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down: every POST fails to connect
	d := enginealert.New(enginealert.Options{Webhooks: []enginealert.Webhook{{
		URL: "http://" + addr + "/hook", Timeout: time.Second, Retries: 1000, Backoff: 10 * time.Millisecond}}})
	defer d.Close()
	d.Start()
	defer alert.SetSink(nil)
	alert.Raise(alert.Event{Kind: alert.BreakerOpen, Subject: "r1", Message: "closed -> open"})
	waitFor(t, "two retries", func() bool { return counter(t, metrics(d), "loopgate_alert_delivery_retries_total") >= 2 })

	ln, err = net.Listen("tcp", addr) // back, at the same address
	if err != nil {
		t.Skipf("the receiver's port was taken meanwhile: %v", err)
	}
	rc := &receiver{}
	srv := &http.Server{Handler: rc}
	go srv.Serve(ln)
	defer srv.Close()
	waitFor(t, "the delivery", func() bool { return counter(t, metrics(d), "loopgate_alert_deliveries_total") == 1 })
	if got := rc.payloads(); len(got) != 1 || got[0].Subject != "r1" || got[0].Status != "firing" {
		t.Fatalf("payloads %+v", got)
	}
}

// TestWebhookGivesUp: a receiver answering 503 every time gets 1+retries
// attempts, then the alert counts as failed.
func TestWebhookGivesUp(t *testing.T) {
	rc := &receiver{answers: []int{503, 503, 503, 503, 503}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	d := enginealert.New(enginealert.Options{Webhooks: []enginealert.Webhook{{
		URL: srv.URL, Timeout: time.Second, Retries: 2, Backoff: time.Millisecond}}})
	defer d.Close()
	d.Start()
	defer alert.SetSink(nil)
	alert.Raise(alert.Event{Kind: alert.ReloadRefused, Subject: "config"})
	waitFor(t, "the failure", func() bool { return strings.Contains(metrics(d), "loopgate_alert_delivery_failures_total 1") })
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.attempts) != 3 {
		t.Fatalf("%d attempts, want 3", len(rc.attempts))
	}
}

// A reload that changes the webhooks sends the next alerts to the new
// ones only; one that keeps them keeps their goroutines and queues.
func TestConfigureReplacesWebhooks(t *testing.T) {
	first, second := &receiver{}, &receiver{}
	s1, s2 := httptest.NewServer(first), httptest.NewServer(second)
	defer s1.Close()
	defer s2.Close()
	hook := func(url string) []enginealert.Webhook {
		return []enginealert.Webhook{{URL: url, Timeout: time.Second, Retries: 1, Backoff: time.Millisecond}}
	}
	d := enginealert.New(enginealert.Options{Webhooks: hook(s1.URL)})
	defer d.Close()
	d.Start()
	defer alert.SetSink(nil)
	alert.Raise(alert.Event{Kind: alert.RedisLost, Subject: "a"})
	waitFor(t, "the first receiver", func() bool { return len(first.payloads()) == 1 })
	d.Configure(enginealert.Options{Webhooks: hook(s1.URL)}) // unchanged
	alert.Raise(alert.Event{Kind: alert.RedisLost, Subject: "b"})
	waitFor(t, "the first receiver again", func() bool { return len(first.payloads()) == 2 })
	d.Configure(enginealert.Options{Webhooks: hook(s2.URL)})
	alert.Raise(alert.Event{Kind: alert.RedisLost, Subject: "a", Resolved: true}) // the episode outlives the change
	waitFor(t, "the second receiver", func() bool { return len(second.payloads()) == 1 })
	if p := second.payloads()[0]; p.Subject != "a" || p.Status != "resolved" {
		t.Fatalf("second receiver got %+v", p)
	}
	if n := len(first.payloads()); n != 2 {
		t.Fatalf("the replaced receiver got %d alerts, want 2", n)
	}
}
