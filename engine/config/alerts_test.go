// The alerts section: its defaults and its checks.

package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestAlertsDefaults(t *testing.T) {
	got := mustParse(t, "alerts:\n  webhooks:\n    - url: http://127.0.0.1:9/h\n      events: [breaker_open]\n").Alerts
	want := Alerts{IsolationThreshold: 50, Webhooks: []Webhook{{URL: "http://127.0.0.1:9/h", Events: []string{"breaker_open"},
		Timeout: Duration(5 * time.Second), Retries: 5, Backoff: Duration(time.Second)}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("alerts %+v, want %+v", got, want)
	}
}

func TestAlertsErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"alerts: {isolation_threshold: 101}\n", "alerts.isolation_threshold: 101 is not a percent from 1 to 100"},
		{"alerts:\n  webhooks: [{url: \"ftp://x/y\"}]\n", `alerts.webhooks[0].url: "ftp://x/y" is not an http:// or https:// URL`},
		{"alerts:\n  webhooks: [{url: \"http://x/\", events: [breaker_opened]}]\n",
			`alerts.webhooks[0].events[0]: unknown event "breaker_opened"; want one of breaker_open, isolation_low, upstream_down, redis_lost, reload_refused, certificate_expiring`},
		{"alerts:\n  webhooks: [{url: \"http://x/\", retries: -1}]\n", "alerts.webhooks[0].retries: -1 is negative"},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.yaml, err, c.want)
		}
	}
}
