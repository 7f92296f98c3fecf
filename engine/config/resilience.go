// The resilience sections: a route's retry policy and circuit breaker,
// their defaults and their validation.

package config

import (
	"fmt"
	"slices"
	"time"

	"github.com/loopgate/loopgate/filters"
)

// Retry is a route's retry policy (docs/resilience.md). A failed attempt
// is tried again on another node when it failed by a connect error or
// connect timeout, a reset before any response byte, a per_try_timeout,
// or a status in on_status, and nothing was sent to the client yet.
type Retry struct {
	// Attempts is how many tries a request gets in all, the first
	// included. Default 2; 1 disables retries.
	Attempts int `yaml:"attempts"`
	// Methods are the methods retried after their bytes reached a node
	// (a reset, a timeout, a retryable status). Any method is retried
	// when its bytes never reached one (a connect failure). Default
	// [GET, HEAD, OPTIONS, PUT, DELETE]: the idempotent methods.
	Methods []string `yaml:"methods,omitempty"`
	// OnStatus are upstream statuses retried as failures: any of 502, 503
	// and 504. Default none.
	OnStatus []int `yaml:"on_status,omitempty"`
	// PerTryTimeout is each attempt's response timeout; an attempt that
	// passes it is retried (its method permitting). Default 0: every
	// attempt has the route's response_timeout and a timeout is final.
	PerTryTimeout Duration `yaml:"per_try_timeout"`
}

// RetryBudget bounds an upstream's retries in flight (Envoy's retry
// budget): at most Percent of its requests in flight, but always
// MinRetries. Past it a failed attempt gets its own error.
type RetryBudget struct {
	Percent    int `yaml:"percent"`     // default 20
	MinRetries int `yaml:"min_retries"` // retries in flight always allowed; default 3
}

// CircuitBreaker is a route's circuit breaker (docs/resilience.md). The
// section's presence enables it: `circuit_breaker: {}` at the top level
// enables it with these defaults on every route, and a route's own section
// overrides fields of the global one (enabled: false turns it off there).
type CircuitBreaker struct {
	Enabled *bool `yaml:"enabled"` // default true where the section is present

	Window   int `yaml:"window"`    // calls in the count-based window; default 10
	MinCalls int `yaml:"min_calls"` // calls the window needs before it can open; default 5, or window if smaller

	FailureRate  int      `yaml:"failure_rate"`   // percent of failed calls that opens it; default 50
	SlowCallRate int      `yaml:"slow_call_rate"` // percent of slow calls that opens it; default 80
	SlowCall     Duration `yaml:"slow_call"`      // a call longer than this is slow; default 60s

	OpenFor       Duration `yaml:"open_for"`        // time in OPEN before HALF_OPEN; default 30s
	HalfOpenCalls int      `yaml:"half_open_calls"` // calls let through in HALF_OPEN; default 3

	// FailureStatuses are the upstream statuses that count as failures,
	// besides connect errors, timeouts and resets. Default every 5xx.
	FailureStatuses []int `yaml:"failure_statuses,omitempty"`
}

// On reports whether the breaker is enabled.
func (b *CircuitBreaker) On() bool { return b != nil && (b.Enabled == nil || *b.Enabled) }

const (
	defaultRetryAttempts     = 2
	defaultRetryBudgetPct    = 20
	defaultRetryBudgetMin    = 3
	defaultBreakerWindow     = 10
	defaultBreakerMinCalls   = 5
	defaultBreakerFailRate   = 50
	defaultBreakerSlowRate   = 80
	defaultBreakerSlowCall   = Duration(60 * time.Second)
	defaultBreakerOpenFor    = Duration(30 * time.Second)
	defaultBreakerHalfOpen   = 3
	maxBreakerWindow         = 1000
	maxRetryAttempts         = 10
	defaultBreakerStatusFrom = 500
)

// DefaultRetryMethods are the methods retried when Retry.Methods is empty.
var DefaultRetryMethods = []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"}

func applyRetryDefaults(r *Retry) {
	setDefault(&r.Attempts, defaultRetryAttempts)
	if len(r.Methods) == 0 {
		r.Methods = slices.Clone(DefaultRetryMethods)
	}
}

func applyRetryBudgetDefaults(b *RetryBudget) {
	setDefault(&b.Percent, defaultRetryBudgetPct)
	setDefault(&b.MinRetries, defaultRetryBudgetMin)
}

// overlay is a route's effective section: a copy of the global one with
// merge setting over it what the route's own sets; nil when neither is
// present.
func overlay[T any](global, own *T, merge func(dst, own *T)) *T {
	if global == nil && own == nil {
		return nil
	}
	v := new(T)
	if global != nil {
		*v = *global
	}
	if own != nil {
		merge(v, own)
	}
	return v
}

// routeBreaker is a route's effective breaker: its own section over the
// global one, defaults filled in; nil when neither is present.
func routeBreaker(global, own *CircuitBreaker) *CircuitBreaker {
	b := overlay(global, own, mergeBreaker)
	if b == nil {
		return nil
	}
	setDefault(&b.Window, defaultBreakerWindow)
	setDefault(&b.MinCalls, min(defaultBreakerMinCalls, b.Window))
	setDefault(&b.FailureRate, defaultBreakerFailRate)
	setDefault(&b.SlowCallRate, defaultBreakerSlowRate)
	setDefault(&b.SlowCall, defaultBreakerSlowCall)
	setDefault(&b.OpenFor, defaultBreakerOpenFor)
	setDefault(&b.HalfOpenCalls, defaultBreakerHalfOpen)
	if len(b.FailureStatuses) == 0 {
		for s := defaultBreakerStatusFrom; s < 600; s++ {
			b.FailureStatuses = append(b.FailureStatuses, s)
		}
	}
	return b
}

// mergeBreaker sets in b every field own sets.
func mergeBreaker(b, own *CircuitBreaker) {
	if own.Enabled != nil {
		b.Enabled = own.Enabled
	}
	setIf(&b.Window, own.Window)
	setIf(&b.MinCalls, own.MinCalls)
	setIf(&b.FailureRate, own.FailureRate)
	setIf(&b.SlowCallRate, own.SlowCallRate)
	setIf(&b.SlowCall, own.SlowCall)
	setIf(&b.OpenFor, own.OpenFor)
	setIf(&b.HalfOpenCalls, own.HalfOpenCalls)
	if len(own.FailureStatuses) > 0 {
		b.FailureStatuses = own.FailureStatuses
	}
}

func setIf[T comparable](field *T, v T) {
	var zero T
	if v != zero {
		*field = v
	}
}

func validateRetry(p *problems, path string, r *Retry) {
	if r.Attempts < 1 || r.Attempts > maxRetryAttempts {
		p.add(path+".attempts", "%d: want 1 to %d (1 disables retries)", r.Attempts, maxRetryAttempts)
	}
	for i, m := range r.Methods {
		if !filters.IsToken(m) {
			p.add(fmt.Sprintf("%s.methods[%d]", path, i), "%q is not a method name", m)
		}
	}
	for i, s := range r.OnStatus {
		if s != 502 && s != 503 && s != 504 {
			p.add(fmt.Sprintf("%s.on_status[%d]", path, i), "%d: only 502, 503 and 504 may be retried", s)
		}
	}
	if r.PerTryTimeout < 0 {
		p.add(path+".per_try_timeout", "must not be negative (0 = the route's response_timeout), got %v", r.PerTryTimeout)
	}
}

func validateRetryBudget(p *problems, path string, b *RetryBudget) {
	if b.Percent < 1 || b.Percent > 100 {
		p.add(path+".percent", "%d: want 1 to 100", b.Percent)
	}
	positive(p, path+".min_retries", b.MinRetries)
}

func validateBreaker(p *problems, path string, b *CircuitBreaker) {
	if b.Window < 1 || b.Window > maxBreakerWindow {
		p.add(path+".window", "%d: want 1 to %d calls", b.Window, maxBreakerWindow)
	}
	if b.MinCalls < 1 || b.MinCalls > b.Window {
		p.add(path+".min_calls", "%d: want 1 to window (%d)", b.MinCalls, b.Window)
	}
	percent(p, path+".failure_rate", b.FailureRate)
	percent(p, path+".slow_call_rate", b.SlowCallRate)
	positive(p, path+".slow_call", b.SlowCall)
	positive(p, path+".open_for", b.OpenFor)
	positive(p, path+".half_open_calls", b.HalfOpenCalls)
	for i, s := range b.FailureStatuses {
		if s < 100 || s > 599 {
			p.add(fmt.Sprintf("%s.failure_statuses[%d]", path, i), "%d is not an HTTP status", s)
		}
	}
}

func percent(p *problems, path string, v int) {
	if v < 1 || v > 100 {
		p.add(path, "%d: want a percentage from 1 to 100", v)
	}
}

// Outlier is an upstream's passive outlier ejection (docs/resilience.md):
// a node whose calls fail Consecutive times in a row (connect errors,
// resets, timeouts, 5xx) leaves rotation for BaseEjection × 2^(k−1) on its
// k-th ejection, capped at MaxEjection, with at most MaxEjectedPercent of
// the upstream's nodes out at once. On by default.
type Outlier struct {
	Enabled           *bool    `yaml:"enabled"`             // default true
	Consecutive       int      `yaml:"consecutive"`         // default 5
	BaseEjection      Duration `yaml:"base_ejection"`       // default 30s
	MaxEjection       Duration `yaml:"max_ejection"`        // default 300s
	MaxEjectedPercent int      `yaml:"max_ejected_percent"` // default 50; a one-node upstream is never ejected
}

// On reports whether ejection is enabled.
func (o *Outlier) On() bool { return o.Enabled == nil || *o.Enabled }

const (
	defaultOutlierConsecutive = 5
	defaultOutlierBase        = Duration(30 * time.Second)
	defaultOutlierMax         = Duration(300 * time.Second)
	defaultOutlierMaxPercent  = 50
)

func applyOutlierDefaults(o *Outlier) {
	setDefault(&o.Consecutive, defaultOutlierConsecutive)
	setDefault(&o.BaseEjection, defaultOutlierBase)
	setDefault(&o.MaxEjection, defaultOutlierMax)
	setDefault(&o.MaxEjectedPercent, defaultOutlierMaxPercent)
}

func validateOutlier(p *problems, path string, o *Outlier) {
	positive(p, path+".consecutive", o.Consecutive)
	positive(p, path+".base_ejection", o.BaseEjection)
	if o.MaxEjection < o.BaseEjection {
		p.add(path+".max_ejection", "%v is shorter than base_ejection %v", o.MaxEjection, o.BaseEjection)
	}
	percent(p, path+".max_ejected_percent", o.MaxEjectedPercent)
}

// HealthCheck is an upstream's active health check (docs/resilience.md):
// its presence enables it. Probes run off the event loops.
type HealthCheck struct {
	Type     string `yaml:"type"`               // "http" or "tcp" (a connect is the whole check); default http
	Method   string `yaml:"method"`             // default GET
	Path     string `yaml:"path"`               // default "/"
	Host     string `yaml:"host,omitempty"`     // Host header; default the node's address
	Expected []int  `yaml:"expected,omitempty"` // passing statuses; default [200]

	Timeout            Duration `yaml:"timeout"`             // per probe; default 2s
	HealthyThreshold   int      `yaml:"healthy_threshold"`   // passes in a row that bring a node back; default 2
	UnhealthyThreshold int      `yaml:"unhealthy_threshold"` // failures in a row that take it down; default 3

	Interval         Duration `yaml:"interval"`          // new, flapping or recently failed nodes; default 30s
	StableInterval   Duration `yaml:"stable_interval"`   // after stable_after passes in a row; default 2m
	DegradedInterval Duration `yaml:"degraded_interval"` // after degraded_after failures in a row; default 3m
	StableAfter      int      `yaml:"stable_after"`      // default 10
	DegradedAfter    int      `yaml:"degraded_after"`    // default 5

	// PanicThreshold: when fewer than this percent of the nodes are
	// healthy (but some are), traffic goes to all nodes, as Envoy does.
	// Default 50; every node down is a 503, code 50301.
	PanicThreshold *int `yaml:"panic_threshold"`
}

// HealthChecks bound the prober, for every upstream together.
type HealthChecks struct {
	MaxInFlight int `yaml:"max_in_flight"` // probes in flight at once; default 20
	Batch       int `yaml:"batch"`         // probes started per 100 ms tick at most; default 100
}

const (
	HealthHTTP = "http"
	HealthTCP  = "tcp"
)

func applyHealthCheckDefaults(h *HealthCheck) {
	setDefault(&h.Type, HealthHTTP)
	setDefault(&h.Method, "GET")
	setDefault(&h.Path, "/")
	if len(h.Expected) == 0 {
		h.Expected = []int{200}
	}
	setDefault(&h.Timeout, Duration(2*time.Second))
	setDefault(&h.HealthyThreshold, 2)
	setDefault(&h.UnhealthyThreshold, 3)
	setDefault(&h.Interval, Duration(30*time.Second))
	setDefault(&h.StableInterval, Duration(2*time.Minute))
	setDefault(&h.DegradedInterval, Duration(3*time.Minute))
	setDefault(&h.StableAfter, 10)
	setDefault(&h.DegradedAfter, 5)
	if h.PanicThreshold == nil {
		p := 50
		h.PanicThreshold = &p
	}
}

func applyHealthChecksDefaults(h *HealthChecks) {
	setDefault(&h.MaxInFlight, 20)
	setDefault(&h.Batch, 100)
}

func validateHealthCheck(p *problems, path string, h *HealthCheck) {
	if h.Type != HealthHTTP && h.Type != HealthTCP {
		p.add(path+".type", "%q: want %s or %s", h.Type, HealthHTTP, HealthTCP)
	}
	if !filters.IsToken(h.Method) {
		p.add(path+".method", "%q is not a method name", h.Method)
	}
	if len(h.Path) == 0 || h.Path[0] != '/' || containsCTL(h.Path) {
		p.add(path+".path", "%q: want an origin-form path starting with '/'", h.Path)
	}
	if containsCTL(h.Host) {
		p.add(path+".host", "%q holds control characters", h.Host)
	}
	for i, s := range h.Expected {
		if s < 100 || s > 599 {
			p.add(fmt.Sprintf("%s.expected[%d]", path, i), "%d is not an HTTP status", s)
		}
	}
	positive(p, path+".timeout", h.Timeout)
	positive(p, path+".healthy_threshold", h.HealthyThreshold)
	positive(p, path+".unhealthy_threshold", h.UnhealthyThreshold)
	positive(p, path+".interval", h.Interval)
	positive(p, path+".stable_interval", h.StableInterval)
	positive(p, path+".degraded_interval", h.DegradedInterval)
	positive(p, path+".stable_after", h.StableAfter)
	positive(p, path+".degraded_after", h.DegradedAfter)
	if *h.PanicThreshold < 0 || *h.PanicThreshold > 100 {
		p.add(path+".panic_threshold", "%d: want 0 to 100 (0 disables panic routing)", *h.PanicThreshold)
	}
}

func containsCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// Isolation is a route's adaptive slow-call isolation (docs/resilience.md):
// a concurrency limit on its upstream calls that shrinks to Floor when a
// window's calls are slow and grows back by Step per healthy window, and a
// cap on the route's share of each of its upstream's connection pools. It
// is on for every route by default: a slow route must not take the others
// on its upstream down with it. A route's section overrides the global one
// field by field; `isolation: {enabled: false}` turns it off (globally, or
// on one route).
type Isolation struct {
	Enabled *bool `yaml:"enabled"` // default true

	Limit      int      `yaml:"limit"`       // concurrent upstream calls of the route; default 200; past it 429, code 42901
	Floor      int      `yaml:"floor"`       // the limit in a slow window; default 5, or limit if smaller
	Step       int      `yaml:"step"`        // added per healthy window, up to limit; default 50
	SlowCall   Duration `yaml:"slow_call"`   // a call longer than this is slow; default 1s
	Window     Duration `yaml:"window"`      // default 3s
	MinSamples int      `yaml:"min_samples"` // calls a window needs before it can shrink the limit; default 20
	SlowRatio  int      `yaml:"slow_ratio"`  // percent of slow calls that shrinks it; default 30
	ColdStart  int      `yaml:"cold_start"`  // calls after a start or reload before any shrink; default 50

	// Queue is how many requests over the limit may wait for a permit,
	// all loops together; default 1000, and an explicit 0 answers every
	// excess request at once. A waiting request holds its client
	// connection, not an upstream one.
	Queue        *int     `yaml:"queue"`
	QueueTimeout Duration `yaml:"queue_timeout"` // the longest wait for a permit; then 429, code 42901; default 100ms

	// MaxPoolShare is the percent of max_conns of each node's pool on
	// each loop that the route's calls may hold (connected, dialing or
	// waiting for a connection); a call past it gets 503, code 50302, at
	// once, so the other routes on the upstream always find connections.
	// Default 80; 100 lets one route take the whole pool.
	MaxPoolShare int `yaml:"max_pool_share"`
}

// On reports whether isolation is enabled.
func (s *Isolation) On() bool { return s != nil && (s.Enabled == nil || *s.Enabled) }

// defaultPoolShare is Isolation.MaxPoolShare's default: a route keeps a
// fifth of each pool free for the upstream's other routes, and a route
// alone on its upstream loses little (it is held to limit, 200 calls over
// all loops, far below the 1024 connections per loop of max_conns).
const defaultPoolShare = 80

// routeIsolation is a route's effective isolation: its own section over
// the global one, defaults filled in. Neither present is the defaults:
// isolation is on unless a section turns it off.
func routeIsolation(global, own *Isolation) *Isolation {
	s := overlay(global, own, mergeIsolation)
	if s == nil {
		s = new(Isolation)
	}
	setDefault(&s.Limit, 200)
	setDefault(&s.Floor, min(5, s.Limit))
	setDefault(&s.Step, 50)
	setDefault(&s.SlowCall, Duration(time.Second))
	setDefault(&s.Window, Duration(3*time.Second))
	setDefault(&s.MinSamples, 20)
	setDefault(&s.SlowRatio, 30)
	setDefault(&s.ColdStart, 50)
	if s.Queue == nil {
		queue := 1000
		s.Queue = &queue
	}
	setDefault(&s.QueueTimeout, Duration(100*time.Millisecond))
	setDefault(&s.MaxPoolShare, defaultPoolShare)
	return s
}

// mergeIsolation sets in s every field own sets.
func mergeIsolation(s, own *Isolation) {
	if own.Enabled != nil {
		s.Enabled = own.Enabled
	}
	setIf(&s.Limit, own.Limit)
	setIf(&s.Floor, own.Floor)
	setIf(&s.Step, own.Step)
	setIf(&s.SlowCall, own.SlowCall)
	setIf(&s.Window, own.Window)
	setIf(&s.MinSamples, own.MinSamples)
	setIf(&s.SlowRatio, own.SlowRatio)
	setIf(&s.ColdStart, own.ColdStart)
	if own.Queue != nil {
		s.Queue = own.Queue
	}
	setIf(&s.QueueTimeout, own.QueueTimeout)
	setIf(&s.MaxPoolShare, own.MaxPoolShare)
}

func validateIsolation(p *problems, path string, s *Isolation) {
	positive(p, path+".limit", s.Limit)
	if s.Floor < 1 || s.Floor > s.Limit {
		p.add(path+".floor", "%d: want 1 to limit (%d)", s.Floor, s.Limit)
	}
	positive(p, path+".step", s.Step)
	positive(p, path+".slow_call", s.SlowCall)
	positive(p, path+".window", s.Window)
	positive(p, path+".min_samples", s.MinSamples)
	percent(p, path+".slow_ratio", s.SlowRatio)
	if s.ColdStart < 0 {
		p.add(path+".cold_start", "must not be negative, got %d", s.ColdStart)
	}
	if *s.Queue < 0 {
		p.add(path+".queue", "must not be negative, got %d", *s.Queue)
	}
	positive(p, path+".queue_timeout", s.QueueTimeout)
	percent(p, path+".max_pool_share", s.MaxPoolShare)
}
