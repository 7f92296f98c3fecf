// Status: what the admin port's GET /limits and the Prometheus series show.

package cluster

import "time"

// Status is a Cluster's state at one moment. Counters only grow; each is a
// natural Prometheus counter, the rest gauges.
type Status struct {
	Redis               Health        `json:"redis"`
	ConsecutiveFailures int           `json:"consecutive_failures"`
	Ramping             bool          `json:"ramping"`           // Redis came back and quotas are rising
	LiveNodes           int           `json:"live_nodes"`        // answering at the last heartbeat (beat within MemberTTL); 0 before any
	KnownNodes          int           `json:"known_nodes"`       // seen within LiveMaxAge, answering or not; 0 before any
	LiveAge             time.Duration `json:"live_age_ns"`       // since that heartbeat; -1 before any
	EffectiveNodes      int           `json:"effective_nodes"`   // what shadow quotas divide by
	Calls               uint64        `json:"calls"`             // Redis calls made
	CallErrors          uint64        `json:"call_errors"`       // of which failed
	QueueFull           uint64        `json:"queue_full"`        // calls not queued: the queue was full
	Probes              uint64        `json:"probes"`            // health probes, the first connect included
	Trips               uint64        `json:"trips"`             // times Redis was marked down
	Recoveries          uint64        `json:"recoveries"`        // times it came back
	TimeoutsAnswered    uint64        `json:"timeouts_answered"` // runs of timeouts at the threshold that a confirming heartbeat found Redis answering through: not trips
	Limits              []LimitStatus `json:"limits"`
}

// LimitStatus is one limit's state on this node.
type LimitStatus struct {
	Name      string      `json:"name"`
	Rate      float64     `json:"rate"` // cluster-wide, tokens a second
	Burst     int64       `json:"burst"`
	OnFailure FailureMode `json:"on_redis_failure"`

	// Quota is the rate this node may admit now, tokens a second: the
	// cluster rate while Redis is up, the rising cap while it ramps back,
	// the shadow rate while it is down (shadow mode), 0 while it is down in
	// closed mode. Unlimited is set instead while it is down in open mode.
	Quota      float64 `json:"quota"`
	Unlimited  bool    `json:"unlimited"`
	ShadowRate float64 `json:"shadow_rate"` // the quota this node falls back to
	LeaseSize  int64   `json:"lease_size"`  // N
	Held       int64   `json:"held"`        // leased tokens on hand

	Leases      uint64 `json:"leases"`      // Redis replies that granted tokens
	Leased      uint64 `json:"leased"`      // tokens they granted
	Returned    uint64 `json:"returned"`    // tokens handed back to Redis
	Grants      uint64 `json:"grants"`      // requests allowed
	Rejections  uint64 `json:"rejections"`  // requests denied (429)
	Unavailable uint64 `json:"unavailable"` // requests refused in closed mode (503)
	Degraded    uint64 `json:"degraded"`    // decisions made without Redis
}

// Status reads the Cluster's state. Safe for concurrent use; call it off
// the loops (it allocates).
func (c *Cluster) Status() Status {
	s := Status{
		Redis:               c.br.health(),
		ConsecutiveFailures: int(c.br.failures.Load()),
		Ramping:             c.rampStart.Load() != 0,
		LiveNodes:           int(c.live.Load()),
		KnownNodes:          int(c.known.Load()),
		LiveAge:             -1,
		EffectiveNodes:      int(c.effective.Load()),
		Calls:               c.calls.Load(),
		CallErrors:          c.callErrs.Load(),
		QueueFull:           c.queueFull.Load(),
		Probes:              c.probes.Load(),
		Trips:               c.br.trips.Load(),
		Recoveries:          c.br.recovered.Load(),
		TimeoutsAnswered:    c.br.confirmed.Load(),
	}
	now := c.now()
	if at := c.liveAt.Load(); at != 0 {
		s.LiveAge = time.Duration(now - at)
	}
	for _, l := range *c.limits.Load() {
		s.Limits = append(s.Limits, l.status(now))
	}
	return s
}

// Status reads one limit's state. Safe for concurrent use.
func (l *Limit) Status() LimitStatus { return l.status(l.c.now()) }

func (l *Limit) status(now int64) LimitStatus {
	shadow := l.shadow.Load().PerSecond()
	s := LimitStatus{
		Name:        l.spec.Name,
		Rate:        l.spec.Rate,
		Burst:       l.spec.Burst,
		OnFailure:   l.spec.OnFailure,
		Quota:       l.spec.Rate,
		ShadowRate:  shadow,
		LeaseSize:   l.size.Load(),
		Held:        l.held.Load(),
		Leases:      l.leases.Load(),
		Leased:      l.leased.Load(),
		Returned:    l.returned.Load(),
		Grants:      l.grants.Load(),
		Rejections:  l.rejections.Load(),
		Unavailable: l.unavailable.Load(),
		Degraded:    l.degraded.Load(),
	}
	switch {
	case l.c.br.health() != Up && l.spec.OnFailure == FailOpen:
		s.Quota, s.Unlimited = 0, true
	case l.c.br.health() != Up && l.spec.OnFailure == FailClosed:
		s.Quota = 0
	case l.c.br.health() != Up:
		s.Quota = shadow
	default:
		if rs := l.c.rampStart.Load(); rs != 0 && l.spec.OnFailure != FailOpen {
			if ceiling, ok := l.rampLimit(now - rs); ok {
				s.Quota = ceiling.PerSecond()
			}
		}
	}
	return s
}
