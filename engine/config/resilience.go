// The resilience sections: the route policies' (package policy's), and
// the upstreams' outlier ejection and active health checks, with their
// defaults and validation.

package config

import (
	"fmt"
	"time"

	"github.com/loopgate/loopgate/engine/policy"
	"github.com/loopgate/loopgate/filters"
)

// The route policies' sections are package policy's, which keeps each
// policy's config with its code: its defaults and its validation.
type (
	Retry          = policy.Retry
	RetryBudget    = policy.RetryBudget
	CircuitBreaker = policy.CircuitBreaker
	Isolation      = policy.Isolation
)

// DefaultRetryMethods are the methods retried when Retry.Methods is empty.
var DefaultRetryMethods = policy.DefaultRetryMethods

// at reports a policy section's problems under path.
func (p *problems) at(path string) policy.Report {
	return func(key, format string, args ...any) { p.add(path+"."+key, format, args...) }
}

// under is at(path + sub), the path joined only for a problem.
func (p *problems) under(path, sub string) policy.Report {
	return func(key, format string, args ...any) { p.add(path+sub+"."+key, format, args...) }
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
