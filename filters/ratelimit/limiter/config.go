// The rate_limit filter's configuration: the top-level rate_limit, redis
// and cluster keys, a route's rate_limits, their defaults and their
// registration.

package limiter

import (
	"math"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/ratelimit"
	"github.com/loopgate/loopgate/filters/ratelimit/cluster"
	"github.com/loopgate/loopgate/pool/units"
)

// Name is how the config names the filter.
const Name = "rate_limit"

// Order places the filter after auth and external_auth (300, 350), whose
// identity the user and tenant keys read, and before the filters that
// shape the upstream request.
const Order = 370

func init() {
	filters.Register(filters.Registration{
		Name: Name, Order: Order, NeedsRoute: true,
		Global:  func() filters.GlobalConfig { return new(Global) },
		Route:   func() filters.RouteConfig { return new(Route) },
		Prepare: prepare,
		New:     newFilter,
		Service: func() any { return NewStore() }, // buckets, key tables and the Redis cluster, across reloads
	})
}

// Global is the filter's top-level keys: rate_limit, the settings every
// route's limits share; redis, where cluster limits are kept; and cluster,
// how the nodes share them.
type Global struct {
	RateLimit Settings        `yaml:"rate_limit"`
	Redis     *Redis          `yaml:"redis,omitempty"` // default none: no route may use scope: cluster
	Cluster   ClusterSettings `yaml:"cluster"`

	opt cluster.Options // built by Validate when Redis is set, but for TLS
	tls *tlsFiles       // read by Validate when Redis.TLS is set
}

// Settings are the defaults of every route's limits.
type Settings struct {
	// TenantHeader is the request header the tenant key reads when auth
	// established no tenant. Default "X-Tenant-Id".
	TenantHeader string `yaml:"tenant_header"`
	// MaxKeys bounds each keyed limit's table (ip, user, tenant, header):
	// the keys it tracks at once; past it the fullest bucket is evicted.
	// Default 131072 (about 3 MiB per limit when full).
	MaxKeys int `yaml:"max_keys"`
	// KeyIdle is how long a key's bucket must have been full before the
	// sweep drops it. Default 1m. The sweep runs every KeyIdle/2, off the
	// loops.
	KeyIdle units.Duration `yaml:"key_idle"`
}

// Redis says where the cluster limits live: one address for a standalone
// server, several for a Redis Cluster, or the Sentinels with
// sentinel_master.
type Redis struct {
	Addrs          []string `yaml:"addrs"`           // required
	SentinelMaster string   `yaml:"sentinel_master"` // Sentinel master name; default "" = no Sentinel
	Username       string   `yaml:"username"`        // default "" (AUTH with the password only, or none)
	Password       string   `yaml:"password"`        // default ""
	TLS            *TLS     `yaml:"tls,omitempty"`   // default none: plain TCP

	KeyPrefix   string         `yaml:"key_prefix"`   // prefix of every key written; default "loopgate:rl:"
	Workers     int            `yaml:"workers"`      // goroutines making Redis calls; default 64
	Queue       int            `yaml:"queue"`        // calls waiting for a worker; beyond it, decided locally; default 4096
	CallTimeout units.Duration `yaml:"call_timeout"` // deadline of one Redis call; default 50ms
	DialTimeout units.Duration `yaml:"dial_timeout"` // connect timeout; default 1s
}

// TLS turns on TLS to Redis (and the Sentinels). Its presence enables it.
type TLS struct {
	ServerName         string `yaml:"server_name"`          // default: the host of the address dialled
	CAFile             string `yaml:"ca_file"`              // PEM CA bundle; default: the system roots
	CertFile           string `yaml:"cert_file"`            // client certificate (PEM), with key_file; default none
	KeyFile            string `yaml:"key_file"`             // its private key (PEM)
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify"` // default false; for tests only
}

// ClusterSettings say how the nodes share cluster limits: membership,
// the health breaker and the shadow quota. Zero means the default.
type ClusterSettings struct {
	// NodeID names this gateway in the membership set. Default
	// hostname-pid. Two gateways in one process need different ones.
	NodeID        string `yaml:"node_id"`
	FallbackNodes int    `yaml:"fallback_nodes"` // node count when the live count is unknown or stale; default 1
	MinNodes      int    `yaml:"min_nodes"`      // floor of the effective node count; default 1

	Heartbeat  units.Duration `yaml:"heartbeat"`    // membership heartbeat and live count read; default 1s
	MemberTTL  units.Duration `yaml:"member_ttl"`   // a member this long without a heartbeat no longer counts as live (answering); default 3s, at least two heartbeats
	LiveMaxAge units.Duration `yaml:"live_max_age"` // beyond it this node's counts are stale and fallback_nodes applies, and a silent member is forgotten; default 30s

	FailureThreshold int            `yaml:"failure_threshold"` // consecutive failed calls that mark Redis down; default 3
	ProbeMin         units.Duration `yaml:"probe_min"`         // first probe delay while down; default 100ms
	ProbeMax         units.Duration `yaml:"probe_max"`         // longest probe delay (it doubles); default 2s
	RampStep         float64        `yaml:"ramp_step"`         // fraction of the rate a node regains per second after Redis recovers; default 0.10
}

// The defaults Provision applies.
const (
	DefaultTenantHeader = "X-Tenant-Id"
	DefaultKeyIdle      = time.Minute
)

var _ filters.GlobalConfig = (*Global)(nil)

// Provision gives every option left out its default.
func (g *Global) Provision() {
	s := &g.RateLimit
	filters.SetDefault(&s.TenantHeader, DefaultTenantHeader)
	filters.SetDefault(&s.MaxKeys, ratelimit.DefaultMaxKeys)
	filters.SetDefault(&s.KeyIdle, units.Duration(DefaultKeyIdle))
	if r := g.Redis; r != nil {
		filters.SetDefault(&r.KeyPrefix, cluster.DefaultKeyPrefix)
		filters.SetDefault(&r.Workers, cluster.DefaultWorkers)
		filters.SetDefault(&r.Queue, cluster.DefaultQueue)
		filters.SetDefault(&r.CallTimeout, units.Duration(cluster.DefaultCallTimeout))
		filters.SetDefault(&r.DialTimeout, units.Duration(cluster.DefaultDialTimeout))
	}
	c := &g.Cluster
	filters.SetDefault(&c.FallbackNodes, 1)
	filters.SetDefault(&c.MinNodes, 1)
	filters.SetDefault(&c.Heartbeat, units.Duration(cluster.DefaultHeartbeat))
	filters.SetDefault(&c.MemberTTL, units.Duration(cluster.DefaultMemberTTL))
	filters.SetDefault(&c.LiveMaxAge, units.Duration(cluster.DefaultLiveMaxAge))
	filters.SetDefault(&c.FailureThreshold, cluster.DefaultFailureThreshold)
	filters.SetDefault(&c.ProbeMin, units.Duration(cluster.DefaultProbeMin))
	filters.SetDefault(&c.ProbeMax, units.Duration(cluster.DefaultProbeMax))
	filters.SetDefault(&c.RampStep, cluster.DefaultRampStep)
}

// Route is the filter's route key.
type Route struct {
	RateLimits []Limit `yaml:"rate_limits,omitempty"` // default none
}

// Limit is one entry of a route's rate_limits. A request passes the route
// only when every entry allows it.
type Limit struct {
	// Key says what is counted: global (one bucket for every route that
	// names it), route (one for the route), ip (the client IP), user (the
	// authenticated subject), tenant (auth's tenant, else the tenant
	// header) or header:<Name> (that request header's value). Required.
	// Requests without a value for their key (no user: the route runs no
	// auth, or the request is anonymous; no such header) share the bucket
	// of the empty key.
	Key string `yaml:"key"`
	// Rate is the sustained rate, in requests a second; fractions allowed
	// (0.5 is one every 2 s). Required.
	Rate float64 `yaml:"rate"`
	// Burst is how many requests an idle key may make at once. Default:
	// the rate rounded up, at least 1.
	Burst int64 `yaml:"burst"`
	// Scope is local (each gateway counts on its own; default) or cluster
	// (every gateway sharing the redis section counts together). A cluster
	// ip, user, tenant or header limit gives every key the rate across the
	// cluster: a key is decided on each gateway at its share (rate and
	// burst over the node count) until it needs more, and then leased
	// through a Redis bucket of its own (docs/rate-limiting.md).
	Scope string `yaml:"scope"`
	// OnRedisFailure is what a cluster limit does while Redis is down:
	// shadow (a local share of the rate; default), open (allow all) or
	// closed (refuse all with 503, code 50304). Local limits ignore it.
	OnRedisFailure string `yaml:"on_redis_failure"`
	// LeaseWindow sizes a cluster limit's leases: each node takes this
	// long's worth of its recent demand from Redis per call. Default
	// 100ms; 0s turns leasing off (one Redis call per request).
	LeaseWindow *units.Duration `yaml:"lease_window,omitempty"`
	// MaxKeys bounds a keyed limit's table (for a cluster one, the table
	// of keys decided on this gateway). Default rate_limit.max_keys.
	MaxKeys int `yaml:"max_keys"`
	// HotKeys bounds a cluster keyed limit's hot set: the keys leased
	// through Redis at once, on this gateway. A key that needs more than
	// its share while its group of the set is full stays at its share.
	// Default 1024, at most 65536.
	HotKeys int `yaml:"hot_keys"`

	// Set by Validate.
	key   keyForm
	scope scope
	mode  cluster.FailureMode
	limit ratelimit.Limit // rate and burst in a local bucket's units
}

// Scopes.
const (
	ScopeLocal   = "local"
	ScopeCluster = "cluster"
)

type scope uint8

const (
	local scope = iota
	clustered
)

func (s scope) String() string {
	if s == clustered {
		return ScopeCluster
	}
	return ScopeLocal
}

// maxLimits bounds a route's rate_limits: a parked request keeps what each
// cluster limit granted in a fixed array.
const maxLimits = 8

var _ filters.RouteConfig = (*Route)(nil)

// Provision gives each limit its default burst and scope.
func (r *Route) Provision() {
	for i := range r.RateLimits {
		l := &r.RateLimits[i]
		if l.Burst == 0 && l.Rate > 0 && !math.IsInf(l.Rate, 0) {
			l.Burst = max(1, int64(math.Ceil(min(l.Rate, 1<<40))))
		}
		filters.SetDefault(&l.Scope, ScopeLocal)
	}
}

// EnabledBy: a route with rate_limits runs the filter.
func (r *Route) EnabledBy(filters.GlobalConfig) string {
	if len(r.RateLimits) > 0 {
		return "rate_limits"
	}
	return ""
}
