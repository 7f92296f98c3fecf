// Package filterstest checks a filter's configuration outside a whole
// config, for the filter's own tests: an Env with fixed answers, and
// Check, which provisions and validates one config and returns what it
// reported.
package filterstest

import (
	"fmt"
	"slices"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

// Env is a filters.Env with fixed answers. The zero Env knows no upstream,
// no other filter and no route, and has the default request limits.
type Env struct {
	Upstreams     []string                        // names HasUpstream accepts
	RequestLimits codec.Limits                    // zero fields take codec's defaults
	Globals       map[string]filters.GlobalConfig // by filter name
	Running       map[string]int                  // filter name -> first route running it
	Identity      []string                        // IdentityHeaders' answer
}

var _ filters.Env = (*Env)(nil)

func (e *Env) HasUpstream(name string) bool { return slices.Contains(e.Upstreams, name) }

func (e *Env) Limits() codec.Limits { return e.RequestLimits.WithDefaults() }

func (e *Env) Global(filter string) filters.GlobalConfig { return e.Globals[filter] }

func (e *Env) FirstRouteRunning(filter string) int {
	if i, ok := e.Running[filter]; ok {
		return i
	}
	return -1
}

func (e *Env) IdentityHeaders() []string { return e.Identity }

// Config is a filter config: a filters.GlobalConfig or filters.RouteConfig.
type Config interface {
	Provision()
	Validate(c *filters.Check)
}

// Check provisions cfg and validates it as the keys of route (nil for
// top-level keys), returning each problem as "path: reason", in the order
// reported. A nil env is the zero Env.
func Check(cfg Config, env filters.Env, route *filters.RouteInfo) []string {
	if env == nil {
		env = &Env{}
	}
	var problems []string
	c := &filters.Check{Env: env, Route: route, Report: func(path, reason string) {
		problems = append(problems, path+": "+reason)
	}}
	if route != nil {
		c.Base = fmt.Sprintf("routes[%d]", route.Index)
	}
	cfg.Provision()
	cfg.Validate(c)
	return problems
}
