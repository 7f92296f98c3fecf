// The default values and applyDefaults, the one place they are applied.

package config

import (
	"fmt"
	"time"

	"github.com/loopgate/loopgate/engine/policy"
)

// Defaults, as stated in the field comments of the Config types. Each
// filter's defaults are its own package's (filters.GlobalConfig.Provision).
const (
	defaultListen = "127.0.0.1:8080"
	defaultAdmin  = "127.0.0.1:9901"

	defaultMaxURIBytes    ByteSize = 8 << 10
	defaultMaxHeaderCount          = 50
	defaultMaxHeaderBytes ByteSize = 16 << 10
	defaultMaxBodyBytes   ByteSize = 10 << 20
	defaultMaxConnBuffer  ByteSize = 4 << 20
	defaultMaxTempFile    ByteSize = 1 << 30
	defaultRequestBuffer  ByteSize = 64 << 10
	defaultMaxRespCount            = 100
	defaultMaxRespBytes   ByteSize = 64 << 10
	defaultMaxBuffered    ByteSize = 256 << 20

	defaultHeaderRead = Duration(10 * time.Second)
	defaultIdle       = Duration(60 * time.Second)
	defaultDrain      = Duration(30 * time.Second)
	defaultSuspend    = Duration(5 * time.Second)

	defaultWeight             = 1
	defaultConnectTimeout     = Duration(time.Second)
	defaultResponseTimeout    = Duration(5 * time.Second)
	defaultPoolAcquireTimeout = Duration(500 * time.Millisecond)
	defaultMaxConns           = 1024
	defaultIdleTimeout        = Duration(30 * time.Second)
)

// applyDefaults replaces every zero-valued field with its default. Routes
// inherit timeouts from their upstream, so upstreams are completed first; a
// route naming an unknown upstream keeps zeros for Validate to report the
// upstream, not the timeouts.
func applyDefaults(c *Config) {
	applyListenerDefaults(c)
	setDefault(&c.Admin.Address, defaultAdmin)
	for i := range c.Admin.Tokens {
		setDefault(&c.Admin.Tokens[i].Role, RoleRead)
	}
	if c.Admin.Cluster != "" {
		setDefault(&c.Admin.ClusterPoll, Duration(time.Second))
	}

	setDefault(&c.Limits.MaxURIBytes, defaultMaxURIBytes)
	setDefault(&c.Limits.MaxHeaderCount, defaultMaxHeaderCount)
	setDefault(&c.Limits.MaxHeaderBytes, defaultMaxHeaderBytes)
	setDefault(&c.Limits.MaxBodyBytes, defaultMaxBodyBytes)
	setDefault(&c.Limits.MaxConnBuffer, defaultMaxConnBuffer)
	setDefault(&c.Limits.MaxTempFileBytes, defaultMaxTempFile)
	setDefault(&c.Limits.MaxResponseHeaderCount, defaultMaxRespCount)
	setDefault(&c.Limits.MaxResponseHeaderBytes, defaultMaxRespBytes)
	setDefault(&c.Limits.MaxBufferedBytes, defaultMaxBuffered)
	setDefault(&c.Limits.MaxConnections, DefaultMaxConnections(descriptorLimit(), c.EventLoops()))

	setDefault(&c.Timeouts.HeaderRead, defaultHeaderRead)
	setDefault(&c.Timeouts.Idle, defaultIdle)
	setDefault(&c.Timeouts.Drain, defaultDrain)
	setDefault(&c.Timeouts.Suspend, defaultSuspend)

	applyHealthChecksDefaults(&c.HealthChecks)
	applyWebSocketDefaults(&c.WebSocket)
	for i := range c.Upstreams {
		applyUpstreamDefaults(&c.Upstreams[i])
	}
	applyFilterDefaults(c)
	applyObservabilityDefaults(c)
	applyAlertsDefaults(&c.Alerts)
	// A route without a breaker or isolation section of its own gets the
	// global one's effective settings: the same for every such route, so
	// one per parse, shared (a parsed config is never modified).
	breaker, isolation := policy.RouteBreaker(c.CircuitBreaker, nil), policy.RouteIsolation(c.Isolation, nil)
	for i := range c.Routes {
		r := c.Routes[i]
		setDefault(&r.ID, defaultRouteID(i))
		setDefault(&r.EscapedSlashes, EscapedSlashesReject)
		r.Retry.Provision()
		applyRouteUpgradeDefaults(r)
		if r.CircuitBreaker == nil {
			r.CircuitBreaker = breaker
		} else {
			r.CircuitBreaker = policy.RouteBreaker(c.CircuitBreaker, r.CircuitBreaker)
		}
		if r.Isolation == nil {
			r.Isolation = isolation
		} else {
			r.Isolation = policy.RouteIsolation(c.Isolation, r.Isolation)
		}
		if u := c.findUpstream(r.Upstream); u != nil {
			setDefault(&r.ConnectTimeout, u.ConnectTimeout)
			setDefault(&r.ResponseTimeout, u.ResponseTimeout)
		}
	}
}

func applyUpstreamDefaults(u *Upstream) {
	weighted := false
	for i := range u.Nodes {
		setDefault(&u.Nodes[i].Weight, defaultWeight)
		weighted = weighted || u.Nodes[i].Weight != defaultWeight
	}
	if weighted {
		setDefault(&u.Balancer, WeightedRoundRobin)
	} else {
		setDefault(&u.Balancer, RoundRobin)
	}
	setDefault(&u.ConnectTimeout, defaultConnectTimeout)
	setDefault(&u.ResponseTimeout, defaultResponseTimeout)
	setDefault(&u.PoolAcquireTimeout, defaultPoolAcquireTimeout)
	setDefault(&u.MaxConns, defaultMaxConns)
	// max_idle defaults to max_conns: an idle cap below the concurrency the
	// pool allows closes connections a steady load dials again moments
	// later. idle_timeout trims what the load stops using.
	if u.MaxConns > 0 {
		setDefault(&u.MaxIdle, u.MaxConns)
	} else {
		setDefault(&u.MaxIdle, defaultMaxConns) // max_conns is invalid; let Validate name only it
	}
	setDefault(&u.IdleTimeout, defaultIdleTimeout)
	u.RetryBudget.Provision()
	applyOutlierDefaults(&u.Outlier)
	if u.SlowStart == nil {
		d := Duration(30 * time.Second)
		u.SlowStart = &d
	}
	if u.HealthCheck != nil {
		applyHealthCheckDefaults(u.HealthCheck)
	}
}

// defaultRouteID is the id of routes[i] when the config gives none.
func defaultRouteID(i int) string { return fmt.Sprintf("route-%d", i) }

// setDefault sets *field to def when *field is the zero value.
func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}
