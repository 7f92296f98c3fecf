// The policies' config sections: their types, their defaults (written
// once, in the field comments and in Provision or the Route functions)
// and their validation, which only rejects.

package policy

import (
	"fmt"
	"slices"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool/units"
)

// Report is how Validate names a problem: key relative to the section
// ("window", "methods[1]"), then the reason. engine/config adds the
// section's path and line.
type Report func(key, format string, args ...any)

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
	PerTryTimeout units.Duration `yaml:"per_try_timeout"`
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

	FailureRate  int            `yaml:"failure_rate"`   // percent of failed calls that opens it; default 50
	SlowCallRate int            `yaml:"slow_call_rate"` // percent of slow calls that opens it; default 80
	SlowCall     units.Duration `yaml:"slow_call"`      // a call longer than this is slow; default 60s

	OpenFor       units.Duration `yaml:"open_for"`        // time in OPEN before HALF_OPEN; default 30s
	HalfOpenCalls int            `yaml:"half_open_calls"` // calls let through in HALF_OPEN; default 3

	// FailureStatuses are the upstream statuses that count as failures,
	// besides connect errors, timeouts and resets. Default every 5xx.
	FailureStatuses []int `yaml:"failure_statuses,omitempty"`
}

// On reports whether the breaker is enabled.
func (b *CircuitBreaker) On() bool { return b != nil && (b.Enabled == nil || *b.Enabled) }

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

	Limit      int            `yaml:"limit"`       // concurrent upstream calls of the route; default 200; past it 429, code 42901
	Floor      int            `yaml:"floor"`       // the limit in a slow window; default 5, or limit if smaller
	Step       int            `yaml:"step"`        // added per healthy window, up to limit; default 50
	SlowCall   units.Duration `yaml:"slow_call"`   // a call longer than this is slow; default 1s
	Window     units.Duration `yaml:"window"`      // default 3s
	MinSamples int            `yaml:"min_samples"` // calls a window needs before it can shrink the limit; default 20
	SlowRatio  int            `yaml:"slow_ratio"`  // percent of slow calls that shrinks it; default 30
	ColdStart  int            `yaml:"cold_start"`  // calls after a start or reload before any shrink; default 50

	// Queue is how many requests over the limit may wait for a permit,
	// all loops together; default 1000, and an explicit 0 answers every
	// excess request at once. A waiting request holds its client
	// connection, not an upstream one.
	Queue        *int           `yaml:"queue"`
	QueueTimeout units.Duration `yaml:"queue_timeout"` // the longest wait for a permit; then 429, code 42901; default 100ms

	// MaxPoolShare is the percent of max_conns of each node's pool on
	// each loop that the route's calls may hold (connected, dialing or
	// waiting for a connection); a call past it gets 503, code 50302, at
	// once, so the other routes on the upstream always find connections.
	// Default 80; 100 lets one route take the whole pool.
	MaxPoolShare int `yaml:"max_pool_share"`
}

// On reports whether isolation is enabled.
func (s *Isolation) On() bool { return s != nil && (s.Enabled == nil || *s.Enabled) }

// The defaults the field comments state.
const (
	DefaultRetryAttempts   = 2
	DefaultBudgetPercent   = 20
	DefaultBudgetMin       = 3
	DefaultBreakerWindow   = 10
	DefaultBreakerMinCalls = 5
	DefaultBreakerFailRate = 50
	DefaultBreakerSlowRate = 80
	DefaultBreakerSlowCall = units.Duration(60 * time.Second)
	DefaultBreakerOpenFor  = units.Duration(30 * time.Second)
	DefaultBreakerHalfOpen = 3

	// DefaultPoolShare is Isolation.MaxPoolShare's default: a route keeps
	// a fifth of each pool free for the upstream's other routes, and a
	// route alone on its upstream loses little (it is held to limit, 200
	// calls over all loops, far below the 1024 connections per loop of
	// max_conns).
	DefaultPoolShare = 80

	maxBreakerWindow         = 1000
	maxRetryAttempts         = 10
	defaultBreakerStatusFrom = 500
)

// DefaultRetryMethods are the methods retried when Retry.Methods is empty.
var DefaultRetryMethods = []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"}

// defaultMethods is DefaultRetryMethods as the routes that leave methods
// unset share it, never modified: a copy in each cost 80 bytes a route.
// Clipped, so an append to one route's list copies it.
var defaultMethods = slices.Clip(slices.Clone(DefaultRetryMethods))

// Provision fills in the defaults of a route's retry policy.
func (r *Retry) Provision() {
	setDefault(&r.Attempts, DefaultRetryAttempts)
	if len(r.Methods) == 0 {
		r.Methods = defaultMethods
	}
}

// Provision fills in the defaults of an upstream's retry budget.
func (b *RetryBudget) Provision() {
	setDefault(&b.Percent, DefaultBudgetPercent)
	setDefault(&b.MinRetries, DefaultBudgetMin)
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

// RouteBreaker is a route's effective breaker: its own section over the
// global one, defaults filled in; nil when neither is present.
func RouteBreaker(global, own *CircuitBreaker) *CircuitBreaker {
	b := overlay(global, own, mergeBreaker)
	if b == nil {
		return nil
	}
	setDefault(&b.Window, DefaultBreakerWindow)
	setDefault(&b.MinCalls, min(DefaultBreakerMinCalls, b.Window))
	setDefault(&b.FailureRate, DefaultBreakerFailRate)
	setDefault(&b.SlowCallRate, DefaultBreakerSlowRate)
	setDefault(&b.SlowCall, DefaultBreakerSlowCall)
	setDefault(&b.OpenFor, DefaultBreakerOpenFor)
	setDefault(&b.HalfOpenCalls, DefaultBreakerHalfOpen)
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

// RouteIsolation is a route's effective isolation: its own section over
// the global one, defaults filled in. Neither present is the defaults:
// isolation is on unless a section turns it off.
func RouteIsolation(global, own *Isolation) *Isolation {
	s := overlay(global, own, mergeIsolation)
	if s == nil {
		s = new(Isolation)
	}
	setDefault(&s.Limit, 200)
	setDefault(&s.Floor, min(5, s.Limit))
	setDefault(&s.Step, 50)
	setDefault(&s.SlowCall, units.Duration(time.Second))
	setDefault(&s.Window, units.Duration(3*time.Second))
	setDefault(&s.MinSamples, 20)
	setDefault(&s.SlowRatio, 30)
	setDefault(&s.ColdStart, 50)
	if s.Queue == nil {
		queue := 1000
		s.Queue = &queue
	}
	setDefault(&s.QueueTimeout, units.Duration(100*time.Millisecond))
	setDefault(&s.MaxPoolShare, DefaultPoolShare)
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

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

func setIf[T comparable](field *T, v T) {
	var zero T
	if v != zero {
		*field = v
	}
}

// Validate reports what cannot work in a provisioned retry policy.
func (r *Retry) Validate(report Report) {
	if r.Attempts < 1 || r.Attempts > maxRetryAttempts {
		report("attempts", "%d: want 1 to %d (1 disables retries)", r.Attempts, maxRetryAttempts)
	}
	for i, m := range r.Methods {
		if !filters.IsToken(m) {
			report(fmt.Sprintf("methods[%d]", i), "%q is not a method name", m)
		}
	}
	for i, s := range r.OnStatus {
		if s != 502 && s != 503 && s != 504 {
			report(fmt.Sprintf("on_status[%d]", i), "%d: only 502, 503 and 504 may be retried", s)
		}
	}
	if r.PerTryTimeout < 0 {
		report("per_try_timeout", "must not be negative (0 = the route's response_timeout), got %v", r.PerTryTimeout)
	}
}

// Validate reports what cannot work in a provisioned retry budget.
func (b *RetryBudget) Validate(report Report) {
	if b.Percent < 1 || b.Percent > 100 {
		report("percent", "%d: want 1 to 100", b.Percent)
	}
	positive(report, "min_retries", b.MinRetries)
}

// Validate reports what cannot work in a route's effective breaker.
func (b *CircuitBreaker) Validate(report Report) {
	if b.Window < 1 || b.Window > maxBreakerWindow {
		report("window", "%d: want 1 to %d calls", b.Window, maxBreakerWindow)
	}
	if b.MinCalls < 1 || b.MinCalls > b.Window {
		report("min_calls", "%d: want 1 to window (%d)", b.MinCalls, b.Window)
	}
	percent(report, "failure_rate", b.FailureRate)
	percent(report, "slow_call_rate", b.SlowCallRate)
	positive(report, "slow_call", b.SlowCall)
	positive(report, "open_for", b.OpenFor)
	positive(report, "half_open_calls", b.HalfOpenCalls)
	for i, s := range b.FailureStatuses {
		if s < 100 || s > 599 {
			report(fmt.Sprintf("failure_statuses[%d]", i), "%d is not an HTTP status", s)
		}
	}
}

// Validate reports what cannot work in a route's effective isolation.
func (s *Isolation) Validate(report Report) {
	positive(report, "limit", s.Limit)
	if s.Floor < 1 || s.Floor > s.Limit {
		report("floor", "%d: want 1 to limit (%d)", s.Floor, s.Limit)
	}
	positive(report, "step", s.Step)
	positive(report, "slow_call", s.SlowCall)
	positive(report, "window", s.Window)
	positive(report, "min_samples", s.MinSamples)
	percent(report, "slow_ratio", s.SlowRatio)
	if s.ColdStart < 0 {
		report("cold_start", "must not be negative, got %d", s.ColdStart)
	}
	if *s.Queue < 0 {
		report("queue", "must not be negative, got %d", *s.Queue)
	}
	positive(report, "queue_timeout", s.QueueTimeout)
	percent(report, "max_pool_share", s.MaxPoolShare)
}

// percent and positive word their problems as engine/config's own checks do.
func percent(report Report, key string, v int) {
	if v < 1 || v > 100 {
		report(key, "%d: want a percentage from 1 to 100", v)
	}
}

func positive[T ~int | ~int64](report Report, key string, v T) {
	if v <= 0 {
		report(key, "must be positive, got %v", v)
	}
}
