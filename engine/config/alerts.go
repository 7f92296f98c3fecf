// The alerts section: webhooks the gateway POSTs its alerts to (see
// engine/alert and docs/operations.md, "Alerts").

package config

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/loopgate/loopgate/pool/alert"
)

// Alerts configures where alerts go. Default: no webhooks (alerts are
// still error-log lines and counters). It may change on a reload.
type Alerts struct {
	Webhooks []Webhook `yaml:"webhooks,omitempty"`

	// IsolationThreshold is the percent of a route's base concurrency
	// limit below which isolation_low fires, 1 to 100. Default 50.
	IsolationThreshold int `yaml:"isolation_threshold"`
}

// Webhook is one receiver of alerts.
type Webhook struct {
	// URL is an http:// or https:// URL each alert is POSTed to as JSON.
	URL string `yaml:"url"`

	// Events are the event names sent to it (breaker_open, isolation_low,
	// upstream_down, redis_lost, reload_refused, certificate_expiring).
	// Default: every event.
	Events []string `yaml:"events,omitempty"`

	// Timeout bounds one POST. Default 5s.
	Timeout Duration `yaml:"timeout"`

	// Retries is how many times a failed POST (no answer, 5xx, 408, 429)
	// is tried again. Default 5 (0 means the default).
	Retries int `yaml:"retries"`

	// Backoff is the wait before the first retry; it doubles per retry,
	// up to a minute. Default 1s.
	Backoff Duration `yaml:"backoff"`
}

const (
	defaultWebhookTimeout = Duration(5 * time.Second)
	defaultWebhookRetries = 5
	defaultWebhookBackoff = Duration(time.Second)
)

func applyAlertsDefaults(a *Alerts) {
	setDefault(&a.IsolationThreshold, alert.DefaultIsolationThreshold)
	for i := range a.Webhooks {
		w := &a.Webhooks[i]
		setDefault(&w.Timeout, defaultWebhookTimeout)
		setDefault(&w.Retries, defaultWebhookRetries)
		setDefault(&w.Backoff, defaultWebhookBackoff)
	}
}

func (c *Config) validateAlerts(p *problems) {
	a := &c.Alerts
	if a.IsolationThreshold < 1 || a.IsolationThreshold > 100 {
		p.add("alerts.isolation_threshold", "%d is not a percent from 1 to 100", a.IsolationThreshold)
	}
	for i, w := range a.Webhooks {
		path := fmt.Sprintf("alerts.webhooks[%d]", i)
		u, err := url.Parse(w.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.add(path+".url", "%q is not an http:// or https:// URL", w.URL)
		}
		for j, e := range w.Events {
			if !slices.Contains(alert.Kinds[:], alert.Kind(e)) {
				p.add(fmt.Sprintf("%s.events[%d]", path, j), "unknown event %q; want one of %s", e, kindList())
			}
		}
		positive(p, path+".timeout", w.Timeout)
		positive(p, path+".backoff", w.Backoff)
		if w.Retries < 0 {
			p.add(path+".retries", "%d is negative", w.Retries)
		}
	}
}

func kindList() string {
	s := make([]string, len(alert.Kinds))
	for i, k := range alert.Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}
