// Alerts through a real gateway: a breaker that opens on a failing
// upstream is one webhook POST per episode, and its closing another.

package engine_test

import (
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/alert"
	"github.com/loopgate/loopgate/engine/tlsedge/tlstest"
)

// alertReceiver is a webhook endpoint started by the test.
type alertReceiver struct {
	mu  sync.Mutex
	got []alert.Payload
}

func (a *alertReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var p alert.Payload
	if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&p) != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	a.mu.Lock()
	a.got = append(a.got, p)
	a.mu.Unlock()
}

// of returns the payloads about subject, in arrival order.
func (a *alertReceiver) of(subject string) []alert.Payload {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []alert.Payload
	for _, p := range a.got {
		if p.Subject == subject {
			out = append(out, p)
		}
	}
	return out
}

// A breaker opens (firing), fails its half-open probe and opens again
// (the same episode: suppressed), then closes (resolved). The receiver
// gets exactly those two, and the counters and the error log say so.
func TestAlertBreakerEpisode(t *testing.T) {
	rc := &alertReceiver{}
	hook := "http://" + startUpstream(t, rc) + "/hook"
	up := &flakyUpstream{}
	up.failing.Store(true)
	g := startGateway(t, `
alerts:
  webhooks:
    - {url: "%s", events: [breaker_open], backoff: 10ms}
upstreams:
  - {name: flaky, nodes: ["%s"]}
routes:
  - id: alerting
    prefix: /
    upstream: flaky
    retry: {attempts: 1}
    circuit_breaker: {window: 2, min_calls: 2, open_for: 200ms, half_open_calls: 1}
`, hook, startUpstream(t, up))
	c := g.client(t)
	c.get("/x")
	c.get("/x")
	waitFor(t, "the firing alert", func() bool { return len(rc.of("alerting")) == 1 })
	if p := rc.of("alerting")[0]; p.Event != "breaker_open" || p.Status != "firing" {
		t.Fatalf("first alert %+v", p)
	}
	// The half-open probe fails: OPEN again, within the episode.
	waitFor(t, "a failed half-open probe", func() bool {
		resp, _ := c.get("/x")
		return resp.StatusCode == 500
	})
	waitMetric(t, g.srv, `loopgate_alerts_suppressed_total`, 1)
	up.failing.Store(false)
	waitFor(t, "the breaker to close", func() bool {
		resp, _ := c.get("/x")
		return resp.StatusCode == 200
	})
	waitFor(t, "the resolved alert", func() bool { return len(rc.of("alerting")) == 2 })
	got := rc.of("alerting")
	if got[1].Status != "resolved" || got[1].Since == nil || !got[1].Since.Equal(got[0].Time) {
		t.Fatalf("second alert %+v, want the episode's resolution", got[1])
	}
	s := waitMetric(t, g.srv, `loopgate_alert_deliveries_total`, 2) // counted once the receiver answered
	for series, want := range map[string]float64{
		`loopgate_alerts_total{event="breaker_open",status="firing"}`:   1,
		`loopgate_alerts_total{event="breaker_open",status="resolved"}`: 1,
	} {
		if v := s.get(t, series); v != want {
			t.Errorf("%s = %v, want %v", series, v, want)
		}
	}
	if n := len(rc.of("alerting")); n != 2 {
		t.Fatalf("%d alerts, want 2", n)
	}
}

// Every node of an upstream failing its health checks is one
// upstream_down alert, whatever order they fall in; the first node back
// resolves it, and a second node back sends nothing more.
func TestAlertUpstreamDown(t *testing.T) {
	rc := &alertReceiver{}
	hook := "http://" + startUpstream(t, rc) + "/hook"
	a, b := &checkedNode{}, &checkedNode{}
	addrA, addrB := startUpstream(t, a), startUpstream(t, b)
	g := startGateway(t, "alerts:\n  webhooks: [{url: \"%s\", events: [upstream_down]}]\n"+healthChecked, hook, nodeList(addrA, addrB))
	a.sick.Store(true)
	healthy(t, g, addrA, 0)
	b.sick.Store(true)
	healthy(t, g, addrB, 0)
	waitFor(t, "the firing alert", func() bool { return len(rc.of("backend")) == 1 })
	if p := rc.of("backend")[0]; p.Event != "upstream_down" || p.Status != "firing" {
		t.Fatalf("alert %+v", p)
	}
	b.sick.Store(false)
	healthy(t, g, addrB, 1)
	a.sick.Store(false)
	healthy(t, g, addrA, 1)
	waitFor(t, "the resolved alert", func() bool { return len(rc.of("backend")) == 2 })
	if p := rc.of("backend")[1]; p.Status != "resolved" || !strings.Contains(p.Message, addrB) {
		t.Fatalf("alert %+v, want resolved by %s", p, addrB)
	}
	waitMetric(t, g.srv, `loopgate_alert_deliveries_total`, 2)
	if n := len(rc.of("backend")); n != 2 {
		t.Fatalf("%d alerts, want 2", n)
	}
}

// A route's isolation limit cut below alerts.isolation_threshold of its
// base is one isolation_low alert; growing back above it resolves it.
func TestAlertIsolationLow(t *testing.T) {
	rc := &alertReceiver{}
	hook := "http://" + startUpstream(t, rc) + "/hook"
	var slow atomic.Bool
	slowUp := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slow.Load() {
			time.Sleep(150 * time.Millisecond) // the upstream's slowness under test, not synchronisation
		}
		io.WriteString(w, "ok")
	}))
	g := startGateway(t, `
alerts:
  isolation_threshold: 25
  webhooks: [{url: "%s", events: [isolation_low]}]
isolation: {limit: 12, floor: 2, step: 5, slow_call: 100ms, window: 100ms, min_samples: 5, slow_ratio: 30, cold_start: 5}
upstreams:
  - {name: slow, nodes: ["%s"]}
routes:
  - {id: cut, prefix: /, upstream: slow}
`, hook, slowUp)
	burst := func(n int) {
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() { defer wg.Done(); fetch(g.url("/x")) }()
		}
		wg.Wait()
	}
	burst(1)
	slow.Store(true)
	waitFor(t, "the isolation_low alert", func() bool {
		burst(8)
		return len(rc.of("cut")) == 1
	})
	if p := rc.of("cut")[0]; p.Event != "isolation_low" || p.Status != "firing" || !strings.Contains(p.Message, "below 25% of its base 12") {
		t.Fatalf("alert %+v", p)
	}
	slow.Store(false)
	waitFor(t, "the resolved alert", func() bool {
		burst(2)
		return len(rc.of("cut")) == 2
	})
	if p := rc.of("cut")[1]; p.Status != "resolved" {
		t.Fatalf("alert %+v", p)
	}
}

// A listener certificate that expires within 14 days is one
// certificate_expiring alert; a reload onto a certificate that does not
// resolves it.
func TestAlertCertificateExpiring(t *testing.T) {
	rc := &alertReceiver{}
	hook := "http://" + startUpstream(t, rc) + "/hook"
	ca := tlstest.NewCA(t, "alert test CA")
	soon := ca.Leaf(tlstest.LeafOptions{Names: []string{"127.0.0.1"}, NotAfter: time.Now().Add(3 * 24 * time.Hour)})
	later := ca.Leaf(tlstest.LeafOptions{Names: []string{"127.0.0.1"}, NotAfter: time.Now().Add(90 * 24 * time.Hour)})
	const cfg = `
alerts:
  webhooks: [{url: "%s", events: [certificate_expiring]}]
listeners:
  - address: 127.0.0.1:0
    tls:
      certificates: [{cert: %s, key: %s}]
upstreams:
  - {name: u, nodes: ["%s"]}
routes:
  - {prefix: /, upstream: u}
`
	up := startUpstream(t, okHandler)
	g := startGateway(t, cfg, hook, soon.CertFile, soon.KeyFile, up)
	waitFor(t, "the firing alert", func() bool { return len(rc.of(soon.CertFile)) == 1 })
	if p := rc.of(soon.CertFile)[0]; p.Event != "certificate_expiring" || p.Status != "firing" || !strings.Contains(p.Message, "expires on") {
		t.Fatalf("alert %+v", p)
	}
	// The same path, a certificate valid for longer: as a renewal writes it.
	for _, f := range [][2]string{{later.CertFile, soon.CertFile}, {later.KeyFile, soon.KeyFile}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g.reload(t, cfg, hook, soon.CertFile, soon.KeyFile, up)
	waitFor(t, "the resolved alert", func() bool { return len(rc.of(soon.CertFile)) == 2 })
	if p := rc.of(soon.CertFile)[1]; p.Status != "resolved" {
		t.Fatalf("alert %+v", p)
	}
}

// An upstream's client certificate and CA file that end within 14 days
// are a certificate_expiring alert each (the test CA lasts a day); a
// reload onto renewed files resolves both.
func TestAlertUpstreamCertificatesExpiring(t *testing.T) {
	rc := &alertReceiver{}
	hook := "http://" + startUpstream(t, rc) + "/hook"
	ca := tlstest.NewCA(t, "upstream alert CA")
	soon := ca.Leaf(tlstest.LeafOptions{Names: []string{"gateway"}, Client: true, NotAfter: time.Now().Add(5 * 24 * time.Hour)})
	later := ca.Leaf(tlstest.LeafOptions{Names: []string{"gateway"}, Client: true, NotAfter: time.Now().Add(90 * 24 * time.Hour)})
	const cfg = `
alerts:
  webhooks: [{url: "%s", events: [certificate_expiring]}]
upstreams:
  - {name: u, nodes: ["%s"], tls: {ca: %s, client_cert: %s, client_key: %s}}
routes:
  - {prefix: /, upstream: u}
`
	up := closedPort(t) // never called: the files are what is checked
	g := startGateway(t, cfg, hook, up, ca.File, soon.CertFile, soon.KeyFile)
	waitFor(t, "both firing alerts", func() bool { return len(rc.of(soon.CertFile)) == 1 && len(rc.of(ca.File)) == 1 })
	if p := rc.of(soon.CertFile)[0]; p.Status != "firing" || !strings.Contains(p.Message, "upstream client certificate "+soon.CertFile+" expires on") {
		t.Fatalf("client certificate alert %+v", p)
	}
	if p := rc.of(ca.File)[0]; p.Status != "firing" || !strings.Contains(p.Message, "CA certificate in "+ca.File+" expires on") {
		t.Fatalf("CA alert %+v", p)
	}
	// Renewals at the same paths: a client certificate and, for the CA
	// file, a certificate that ends in 90 days (the later leaf alone,
	// without the day-long CA its file chains to).
	for _, f := range [][2]string{{later.CertFile, soon.CertFile}, {later.KeyFile, soon.KeyFile}, {later.CertFile, ca.File}} {
		b, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		if f[1] == ca.File {
			leaf, _ := pem.Decode(b)
			b = pem.EncodeToMemory(leaf)
		}
		if err := os.WriteFile(f[1], b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	g.reload(t, cfg, hook, up, ca.File, soon.CertFile, soon.KeyFile)
	waitFor(t, "both resolved alerts", func() bool { return len(rc.of(soon.CertFile)) == 2 && len(rc.of(ca.File)) == 2 })
	if a, b := rc.of(soon.CertFile)[1], rc.of(ca.File)[1]; a.Status != "resolved" || b.Status != "resolved" {
		t.Fatalf("alerts %+v, %+v", a, b)
	}
}
