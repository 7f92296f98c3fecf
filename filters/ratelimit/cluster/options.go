// Options and LimitSpec: what a Cluster and its limits are built from, with
// their defaults.

package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Options configure a Cluster. The zero value of every field but Addrs
// means its default, stated on the field; New applies the defaults once and
// then validates.
type Options struct {
	// Addrs are the Redis addresses: one for a standalone server, several
	// for a Redis Cluster, or the Sentinels when MasterSet is set.
	Addrs []string
	// MasterSet is the Sentinel master name; empty means no Sentinel.
	MasterSet string
	// Username and Password authenticate to Redis (and to the Sentinels).
	Username, Password string
	// TLS, when set, is used for every Redis connection.
	TLS *tls.Config

	// NodeID names this gateway in the membership set. Default:
	// hostname-pid.
	NodeID string
	// KeyPrefix starts every Redis key Loopgate writes. Default
	// "loopgate:rl:".
	KeyPrefix string

	// Workers is the number of goroutines that make Redis calls. Default 64.
	Workers int
	// Queue is the number of calls that may wait for a worker; a call
	// beyond it is not queued (Limit.Take decides without Redis,
	// Limit.Acquire returns ErrQueueFull). Default 4096.
	Queue int
	// CallTimeout is the deadline of one Redis call. Default 50ms.
	CallTimeout time.Duration
	// DialTimeout bounds connecting to Redis when probing. Default 1s.
	DialTimeout time.Duration

	// FailureThreshold is the number of consecutive failed calls that marks
	// Redis down and stops calling it. Default 3.
	FailureThreshold int
	// ProbeMin and ProbeMax bound the backoff between probes while Redis
	// is down; it doubles after each failed probe. Defaults 100ms and 2s.
	ProbeMin, ProbeMax time.Duration

	// Heartbeat is how often this node scores itself in the membership
	// set and reads the live count. Default 1s.
	Heartbeat time.Duration
	// MemberTTL is how long a node counts as live (answering) without a
	// heartbeat. A node past it is taken for cut off from Redis and on its
	// shadow quota: the nodes still answering leave its share of the
	// bucket unspent until it has been gone LiveMaxAge. It is also how
	// long the others take to notice a node cut off. Default 3s.
	MemberTTL time.Duration
	// LiveMaxAge is how old the node counts may grow (Redis unreachable)
	// before FallbackNodes replaces them, and how long the nodes still
	// answering keep the share of a node that stopped beating: as long as
	// it may still trust its own count. Members are trimmed once this old
	// (or MemberTTL, if longer). Default 30s.
	LiveMaxAge time.Duration
	// MinNodes is the smallest node count a shadow quota divides by.
	// Default 1.
	MinNodes int
	// FallbackNodes is the node count assumed when the live count is
	// unknown or stale. Set it to the deployment's size. Default 1.
	FallbackNodes int

	// RampStep is how fast a node's quota returns after Redis recovers:
	// the fraction of the cluster rate added each second, from the shadow
	// quota up to the full rate. Default 0.10.
	RampStep float64
	// Tick is how often the controller sizes leases, updates shadow
	// quotas, probes and heartbeats. Default 100ms.
	Tick time.Duration

	// Test hooks.
	dial   func(context.Context, string, *net.Dialer, *tls.Config) (net.Conn, error)
	clock  func() int64 // nanotime
	manual bool         // no controller goroutine: the test calls step
}

// The defaults New applies to zero Options fields.
const (
	DefaultKeyPrefix        = "loopgate:rl:"
	DefaultWorkers          = 64
	DefaultQueue            = 4096
	DefaultCallTimeout      = 50 * time.Millisecond
	DefaultDialTimeout      = time.Second
	DefaultFailureThreshold = 3
	DefaultProbeMin         = 100 * time.Millisecond
	DefaultProbeMax         = 2 * time.Second
	DefaultHeartbeat        = time.Second
	DefaultMemberTTL        = 3 * time.Second
	DefaultLiveMaxAge       = 30 * time.Second
	DefaultRampStep         = 0.10
	DefaultTick             = 100 * time.Millisecond
	DefaultLeaseWindow      = 100 * time.Millisecond
)

// withDefaults returns o with every zero field set to its default.
func (o Options) withDefaults() Options {
	if o.NodeID == "" {
		host, _ := os.Hostname()
		o.NodeID = host + "-" + strconv.Itoa(os.Getpid())
	}
	setDefault(&o.KeyPrefix, DefaultKeyPrefix)
	setDefault(&o.Workers, DefaultWorkers)
	setDefault(&o.Queue, DefaultQueue)
	setDefault(&o.CallTimeout, DefaultCallTimeout)
	setDefault(&o.DialTimeout, DefaultDialTimeout)
	setDefault(&o.FailureThreshold, DefaultFailureThreshold)
	setDefault(&o.ProbeMin, DefaultProbeMin)
	setDefault(&o.ProbeMax, DefaultProbeMax)
	setDefault(&o.Heartbeat, DefaultHeartbeat)
	setDefault(&o.MemberTTL, DefaultMemberTTL)
	setDefault(&o.LiveMaxAge, DefaultLiveMaxAge)
	setDefault(&o.MinNodes, 1)
	setDefault(&o.FallbackNodes, 1)
	setDefault(&o.RampStep, DefaultRampStep)
	setDefault(&o.Tick, DefaultTick)
	if o.clock == nil {
		o.clock = nanotime
	}
	return o
}

func setDefault[T comparable](field *T, def T) {
	var zero T
	if *field == zero {
		*field = def
	}
}

// validate rejects options that cannot work; it changes nothing.
func (o *Options) validate() error {
	var errs []error
	if len(o.Addrs) == 0 {
		errs = append(errs, errors.New("no Redis address"))
	}
	if strings.ContainsAny(o.NodeID, " \t\r\n") {
		errs = append(errs, fmt.Errorf("node ID %q contains white space", o.NodeID))
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"workers", o.Workers}, {"queue", o.Queue}, {"failure threshold", o.FailureThreshold},
		{"min nodes", o.MinNodes}, {"fallback nodes", o.FallbackNodes}} {
		if c.v < 1 {
			errs = append(errs, fmt.Errorf("%s %d is below 1", c.name, c.v))
		}
	}
	for _, c := range []struct {
		name string
		v    time.Duration
	}{{"call timeout", o.CallTimeout}, {"dial timeout", o.DialTimeout}, {"probe min", o.ProbeMin},
		{"heartbeat", o.Heartbeat}, {"member TTL", o.MemberTTL}, {"live max age", o.LiveMaxAge}, {"tick", o.Tick}} {
		if c.v <= 0 {
			errs = append(errs, fmt.Errorf("%s %v is not positive", c.name, c.v))
		}
	}
	if o.ProbeMax < o.ProbeMin {
		errs = append(errs, fmt.Errorf("probe max %v is below probe min %v", o.ProbeMax, o.ProbeMin))
	}
	if o.MemberTTL < 2*o.Heartbeat {
		errs = append(errs, fmt.Errorf("member TTL %v is under two heartbeats (%v)", o.MemberTTL, o.Heartbeat))
	}
	if !(o.RampStep > 0) || math.IsInf(o.RampStep, 0) {
		errs = append(errs, fmt.Errorf("ramp step %v is not positive", o.RampStep))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
}

// FailureMode is what a limit does while Redis cannot be reached.
type FailureMode uint8

const (
	// FailShadow limits each node locally to its shadow quota: the
	// cluster rate divided by the effective node count. The default.
	FailShadow FailureMode = iota
	// FailOpen allows every request.
	FailOpen
	// FailClosed refuses every request as Unavailable (503).
	FailClosed
)

var failureModeNames = [...]string{"shadow", "open", "closed"}

func (m FailureMode) String() string {
	if int(m) < len(failureModeNames) {
		return failureModeNames[m]
	}
	return "unknown"
}

// MarshalText writes the mode's config name.
func (m FailureMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// ParseFailureMode reads a mode's config name; "" is FailShadow.
func ParseFailureMode(s string) (FailureMode, error) {
	if s == "" {
		return FailShadow, nil
	}
	for i, name := range failureModeNames {
		if s == name {
			return FailureMode(i), nil
		}
	}
	return 0, fmt.Errorf("cluster: unknown failure mode %q (want shadow, open or closed)", s)
}

// LimitSpec describes one cluster-wide limit.
type LimitSpec struct {
	// Name identifies the limit; its Redis key is KeyPrefix + Name.
	Name string
	// Rate is the cluster-wide rate in tokens a second, at most one
	// million (the Redis side counts whole microseconds per token).
	Rate float64
	// Burst is the tokens an idle cluster bucket allows at once; at least 1.
	Burst int64
	// OnFailure is what the limit does while Redis is down. Default
	// FailShadow.
	OnFailure FailureMode
	// LeaseWindow sizes leases: a node takes from Redis, per call, the
	// tokens it used in about this long, at most Burst / node count.
	// Default 100ms; negative turns leasing off, and every request not
	// decided locally asks Redis for itself.
	LeaseWindow time.Duration
}

func (s *LimitSpec) withDefaults() {
	setDefault(&s.LeaseWindow, DefaultLeaseWindow)
}

func (s *LimitSpec) validate() error {
	switch {
	case s.Name == "":
		return errors.New("cluster: limit without a name")
	case !(s.Rate > 0) || s.Rate > 1e6:
		return fmt.Errorf("cluster: limit %q: rate %v is not in (0, 1e6]", s.Name, s.Rate)
	case s.Burst < 1:
		return fmt.Errorf("cluster: limit %q: burst %d is below 1", s.Name, s.Burst)
	case s.OnFailure > FailClosed:
		return fmt.Errorf("cluster: limit %q: unknown failure mode %d", s.Name, s.OnFailure)
	}
	return nil
}
