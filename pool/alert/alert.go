// Package alert is where the gateway's parts report the events an operator
// is alerted to: a breaker opened, an isolation limit cut below its
// threshold, every node of an upstream down, Redis lost, a reload refused,
// a certificate near its end.
// It is a leaf, like the rest of pool/, so the policies, the upstreams and
// the filters report without importing the engine; the engine's alert
// dispatcher (engine/alert) installs the sink that queues and sends them.
//
// Raise is called where the event happens, often on an event loop, so the
// sink it calls never waits: it queues the event or drops and counts it.
package alert

import (
	"sync/atomic"
	"time"
)

// Kind names an event, as the webhooks' events lists and the payloads
// spell it.
type Kind string

// The events.
const (
	BreakerOpen   Kind = "breaker_open"         // a route's circuit breaker opened; resolved when it closes
	IsolationLow  Kind = "isolation_low"        // a route's isolation limit below alerts.isolation_threshold % of its base; resolved at or above it
	UpstreamDown  Kind = "upstream_down"        // no node of an upstream in rotation (active checks, ejections or both); resolved when one is back
	RedisLost     Kind = "redis_lost"           // the cluster rate limits lost Redis (shadow quota engaged); resolved when it answers again
	ReloadRefused Kind = "reload_refused"       // a config reload was refused; resolved by the next applied reload
	CertExpiring  Kind = "certificate_expiring" // a listener or upstream client certificate, or a CA file's certificate, expires within 14 days; resolved when a renewal is loaded
)

// Kinds are every event, in the order the docs list them.
var Kinds = [...]Kind{BreakerOpen, IsolationLow, UpstreamDown, RedisLost, ReloadRefused, CertExpiring}

// Event is one report: an episode of Kind about Subject begins (Resolved
// false) or ends (Resolved true).
type Event struct {
	Kind     Kind
	Subject  string // the route, the upstream, the Redis address, "config"
	Resolved bool
	Message  string // what happened, in the words of the error-log notice
	At       time.Time
}

// Sink receives every raised event. It must never wait.
type Sink func(Event)

var (
	sink      atomic.Pointer[Sink]
	threshold atomic.Int64
)

func init() { threshold.Store(DefaultIsolationThreshold) }

// DefaultIsolationThreshold is alerts.isolation_threshold's default, in
// percent of a route's base limit: the isolation article's 50 %.
const DefaultIsolationThreshold = 50

// SetSink installs s as the receiver of every event from now on; nil
// discards them.
func SetSink(s Sink) {
	if s == nil {
		sink.Store(nil)
		return
	}
	sink.Store(&s)
}

// Raise reports e to the sink, stamping its time when unset. It never
// waits; without a sink it does nothing.
func Raise(e Event) {
	s := sink.Load()
	if s == nil {
		return
	}
	if e.At.IsZero() {
		e.At = time.Now()
	}
	(*s)(e)
}

// SetIsolationThreshold sets the percent of a route's base limit below
// which IsolationLow fires.
func SetIsolationThreshold(percent int) { threshold.Store(int64(percent)) }

// IsolationThreshold is the current percent (see SetIsolationThreshold).
func IsolationThreshold() int64 { return threshold.Load() }
