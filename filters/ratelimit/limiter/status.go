// Status: what GET /limits shows and the Prometheus series the Store
// writes.

package limiter

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/cluster"
)

// Status is the rate limits' state on this node at one moment.
type Status struct {
	// Cluster is the Redis side: nil until a cluster limit is built.
	Cluster *ClusterStatus `json:"cluster,omitempty"`
	// Limits are every limit a running config uses, by scope and name.
	Limits []LimitStatus `json:"limits"`
}

// ClusterStatus is the Redis connection's health and the membership, as
// cluster.Status reports them.
type ClusterStatus struct {
	Redis               string  `json:"redis"` // up or down
	ConsecutiveFailures int     `json:"consecutive_failures"`
	Ramping             bool    `json:"ramping"`          // Redis came back and quotas are rising
	LiveNodes           int     `json:"live_nodes"`       // answering at the last heartbeat; 0 before any
	KnownNodes          int     `json:"known_nodes"`      // seen within live_max_age, answering or not
	LiveAgeSeconds      float64 `json:"live_age_seconds"` // since that heartbeat; -1 before any
	EffectiveNodes      int     `json:"effective_nodes"`  // what shadow quotas divide by
	Calls               uint64  `json:"calls"`            // Redis calls made
	CallErrors          uint64  `json:"call_errors"`
	QueueFull           uint64  `json:"queue_full"` // calls decided locally: the worker queue was full
	Probes              uint64  `json:"probes"`
	Trips               uint64  `json:"trips"`             // times Redis was marked down
	Recoveries          uint64  `json:"recoveries"`        // times it came back
	TimeoutsAnswered    uint64  `json:"timeouts_answered"` // runs of timeouts Redis was found answering through: not trips
}

// LimitStatus is one limit on this node.
type LimitStatus struct {
	Name  string  `json:"name"`            // stable: "global", or route/key
	Route string  `json:"route,omitempty"` // "" for global
	Key   string  `json:"key"`
	Scope string  `json:"scope"`
	Rate  float64 `json:"rate"` // requests a second; cluster-wide for a cluster limit
	Burst int64   `json:"burst"`

	// Quota is the rate this node may admit now: the rate for a local
	// limit; for a cluster limit, the cluster rate while Redis is up, the
	// rising cap while it ramps back, the shadow rate (or 0, closed) while
	// it is down. Unlimited replaces it for an open limit while Redis is
	// down.
	Quota     float64 `json:"quota"`
	Unlimited bool    `json:"unlimited,omitempty"`

	Grants     uint64 `json:"grants"`     // requests allowed
	Rejections uint64 `json:"rejections"` // requests refused with 429

	Keys  *KeysStatus  `json:"keys,omitempty"`  // a keyed limit's table (a cluster one's: its cold keys)
	Lease *LeaseStatus `json:"lease,omitempty"` // a cluster limit's Redis side (a keyed one's: summed over its hot keys)
	Hot   *HotStatus   `json:"hot,omitempty"`   // a cluster keyed limit's hot set
}

// HotStatus is a cluster keyed limit's hot set: the keys leased through
// Redis on this node.
type HotStatus struct {
	Len            int     `json:"len"`             // hot keys now
	Cap            int     `json:"cap"`             // hot keys the set can hold
	ColdRate       float64 `json:"cold_rate"`       // a cold key's share on this node, requests a second
	Promotions     uint64  `json:"promotions"`      // keys that went hot
	Demotions      uint64  `json:"demotions"`       // hot keys that went cold again, idle
	Full           uint64  `json:"full"`            // keys that needed to go hot but found their group full, and stayed at their share
	ColdGrants     uint64  `json:"cold_grants"`     // requests allowed by a cold key's local bucket
	ColdRejections uint64  `json:"cold_rejections"` // requests refused at a cold key's share (Redis down, or hot set full)
}

// KeysStatus is a keyed limit's table.
type KeysStatus struct {
	Len       int    `json:"len"`       // keys held now
	Cap       int    `json:"cap"`       // keys it can hold
	Inserts   uint64 `json:"inserts"`   // keys added, ever
	Evictions uint64 `json:"evictions"` // keys dropped to make room
	Swept     uint64 `json:"swept"`     // idle keys dropped by the sweep
}

// LeaseStatus is a cluster limit's lease and fallback.
type LeaseStatus struct {
	OnRedisFailure string  `json:"on_redis_failure"`
	ShadowRate     float64 `json:"shadow_rate"` // this node's quota while Redis is down
	Size           int64   `json:"size"`        // N, the tokens a lease aims to hold
	Held           int64   `json:"held"`        // leased tokens on hand
	Leases         uint64  `json:"leases"`      // Redis replies that granted tokens
	Leased         uint64  `json:"leased"`      // tokens they granted
	Returned       uint64  `json:"returned"`    // tokens handed back to Redis
	Unavailable    uint64  `json:"unavailable"` // requests refused with 503 (closed, Redis down)
	Degraded       uint64  `json:"degraded"`    // decisions made without Redis
}

// Status reads every limit's state. Safe for concurrent use; off the loops
// (it allocates and takes the Store's lock).
func (s *Store) Status() Status {
	var out Status
	s.mu.Lock()
	c := s.cluster
	s.mu.Unlock()
	if c != nil {
		cs := c.Status()
		out.Cluster = &ClusterStatus{
			Redis: cs.Redis.String(), ConsecutiveFailures: cs.ConsecutiveFailures, Ramping: cs.Ramping,
			LiveNodes: cs.LiveNodes, KnownNodes: cs.KnownNodes, LiveAgeSeconds: seconds(cs.LiveAge), EffectiveNodes: cs.EffectiveNodes,
			Calls: cs.Calls, CallErrors: cs.CallErrors, QueueFull: cs.QueueFull, Probes: cs.Probes,
			Trips: cs.Trips, Recoveries: cs.Recoveries, TimeoutsAnswered: cs.TimeoutsAnswered,
		}
	}
	states := s.live()
	sort.Slice(states, func(i, j int) bool {
		a, b := states[i], states[j]
		return a.scope < b.scope || a.scope == b.scope && a.name < b.name
	})
	out.Limits = make([]LimitStatus, 0, len(states))
	for _, st := range states {
		out.Limits = append(out.Limits, st.status())
	}
	return out
}

func seconds(d time.Duration) float64 {
	if d < 0 {
		return -1
	}
	return d.Seconds()
}

func (st *state) status() LimitStatus {
	conf := st.conf.Load()
	ls := LimitStatus{Name: st.name, Route: st.route, Key: st.key.String(), Scope: st.scope.String(),
		Rate: conf.Rate, Burst: conf.Burst, Quota: conf.Rate}
	if st.keyed != nil {
		ks := st.keyed.Status()
		rs := &ks.LimitStatus
		ls.Quota, ls.Unlimited = rs.Quota, rs.Unlimited
		ls.Grants, ls.Rejections = rs.Grants, rs.Rejections
		ls.Lease = &LeaseStatus{OnRedisFailure: rs.OnFailure.String(), ShadowRate: rs.ShadowRate,
			Size: rs.LeaseSize, Held: rs.Held, Leases: rs.Leases, Leased: rs.Leased, Returned: rs.Returned,
			Unavailable: rs.Unavailable, Degraded: rs.Degraded}
		k := ks.Cold
		ls.Keys = &KeysStatus{Len: k.Len, Cap: k.Cap, Inserts: k.Inserts, Evictions: k.Evictions, Swept: k.Swept}
		ls.Hot = &HotStatus{Len: ks.Hot, Cap: ks.HotCap, ColdRate: ks.ColdRate, Promotions: ks.Promotions,
			Demotions: ks.Demotions, Full: ks.HotFull, ColdGrants: ks.ColdGrants, ColdRejections: ks.ColdRejections}
		return ls
	}
	if st.remote != nil {
		rs := st.remote.Status()
		ls.Quota, ls.Unlimited = rs.Quota, rs.Unlimited
		ls.Grants, ls.Rejections = rs.Grants, rs.Rejections
		ls.Lease = &LeaseStatus{OnRedisFailure: rs.OnFailure.String(), ShadowRate: rs.ShadowRate,
			Size: rs.LeaseSize, Held: rs.Held, Leases: rs.Leases, Leased: rs.Leased, Returned: rs.Returned,
			Unavailable: rs.Unavailable, Degraded: rs.Degraded}
		return ls
	}
	for i := range st.shards {
		ls.Grants += st.shards[i].grants.Load()
		ls.Rejections += st.shards[i].rejections.Load()
	}
	if st.keys != nil {
		k := st.keys.Stats()
		ls.Keys = &KeysStatus{Len: k.Len, Cap: k.Cap, Inserts: k.Inserts, Evictions: k.Evictions, Swept: k.Swept}
	}
	return ls
}

// Handler serves GET (and HEAD) /limits: Status as JSON. The admin server
// mounts it; it never touches a loop.
func (s *Store) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var body bytes.Buffer
		enc := json.NewEncoder(&body)
		enc.SetEscapeHTML(false) // as every admin answer: the text as written, not "\u003e"
		enc.SetIndent("", "  ")
		if err := enc.Encode(s.Status()); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Write(body.Bytes())
	})
}

// WriteMetrics writes every figure of Status as Prometheus series
// (loopgate_ratelimit_*), in the text format: a metrics.Set writer (the
// server registers it with RegisterMetricsWriter). Safe for concurrent
// use; it builds the text first, so a slow scraper holds nothing.
func (s *Store) WriteMetrics(w io.Writer) {
	st := s.Status()
	var b bytes.Buffer
	p := promWriter{&b}
	if c := st.Cluster; c != nil {
		up := 0.0
		if c.Redis == cluster.Up.String() {
			up = 1
		}
		p.one("loopgate_ratelimit_redis_up", "gauge", "1 while this node calls Redis, 0 while its breaker has marked Redis down.", up)
		p.one("loopgate_ratelimit_redis_consecutive_failures", "gauge", "Redis calls failed in a row; the breaker trips at cluster.failure_threshold.", float64(c.ConsecutiveFailures))
		p.one("loopgate_ratelimit_ramping", "gauge", "1 while quotas climb back after Redis recovered.", boolf(c.Ramping))
		p.one("loopgate_ratelimit_live_nodes", "gauge", "Gateways that heartbeat within cluster.member_ttl, at the last heartbeat (0 before any).", float64(c.LiveNodes))
		p.one("loopgate_ratelimit_known_nodes", "gauge", "Gateways seen within cluster.live_max_age, answering or not; those not answering keep a share of the bucket.", float64(c.KnownNodes))
		p.one("loopgate_ratelimit_live_age_seconds", "gauge", "Age of the live node count (-1 before any heartbeat).", c.LiveAgeSeconds)
		p.one("loopgate_ratelimit_effective_nodes", "gauge", "The node count shadow quotas divide the cluster rate by.", float64(c.EffectiveNodes))
		p.one("loopgate_ratelimit_redis_calls_total", "counter", "Redis calls made: grants, hand-backs, heartbeats and probes.", float64(c.Calls))
		p.one("loopgate_ratelimit_redis_call_errors_total", "counter", "Redis calls that failed or timed out.", float64(c.CallErrors))
		p.one("loopgate_ratelimit_redis_queue_full_total", "counter", "Redis calls not made because the worker queue was full; decided by the failure mode.", float64(c.QueueFull))
		p.one("loopgate_ratelimit_redis_probes_total", "counter", "Redis health probes, the first connect included.", float64(c.Probes))
		p.one("loopgate_ratelimit_redis_trips_total", "counter", "Times the breaker marked Redis down.", float64(c.Trips))
		p.one("loopgate_ratelimit_redis_recoveries_total", "counter", "Times Redis came back after being marked down.", float64(c.Recoveries))
		p.one("loopgate_ratelimit_redis_timeouts_answered_total", "counter", "Runs of timed-out Redis calls at the failure threshold that a confirming heartbeat found Redis answering through (this gateway was slow, not Redis): not trips.", float64(c.TimeoutsAnswered))
	}
	perLimit := []struct {
		name, typ, help string
		value           func(*LimitStatus) (float64, bool)
	}{
		{"loopgate_ratelimit_rate", "gauge", "A limit's configured rate, requests a second (cluster-wide for a cluster limit).",
			func(l *LimitStatus) (float64, bool) { return l.Rate, true }},
		{"loopgate_ratelimit_burst", "gauge", "A limit's configured burst.",
			func(l *LimitStatus) (float64, bool) { return float64(l.Burst), true }},
		{"loopgate_ratelimit_quota", "gauge", "The rate this node may admit now under the limit (+Inf: open while Redis is down).",
			func(l *LimitStatus) (float64, bool) { return quota(l), true }},
		{"loopgate_ratelimit_grants_total", "counter", "Requests the limit allowed on this node.",
			func(l *LimitStatus) (float64, bool) { return float64(l.Grants), true }},
		{"loopgate_ratelimit_rejections_total", "counter", "Requests the limit refused with 429 on this node.",
			func(l *LimitStatus) (float64, bool) { return float64(l.Rejections), true }},
		{"loopgate_ratelimit_keys", "gauge", "Keys a keyed limit's table holds.",
			func(l *LimitStatus) (float64, bool) {
				return keysf(l, func(k *KeysStatus) int64 { return int64(k.Len) })
			}},
		{"loopgate_ratelimit_keys_capacity", "gauge", "Keys a keyed limit's table can hold.",
			func(l *LimitStatus) (float64, bool) {
				return keysf(l, func(k *KeysStatus) int64 { return int64(k.Cap) })
			}},
		{"loopgate_ratelimit_key_evictions_total", "counter", "Keys dropped from a full table to make room for another.",
			func(l *LimitStatus) (float64, bool) {
				return keysf(l, func(k *KeysStatus) int64 { return int64(k.Evictions) })
			}},
		{"loopgate_ratelimit_keys_swept_total", "counter", "Idle keys the sweep dropped.",
			func(l *LimitStatus) (float64, bool) {
				return keysf(l, func(k *KeysStatus) int64 { return int64(k.Swept) })
			}},
		{"loopgate_ratelimit_hot_keys", "gauge", "Keys a cluster keyed limit leases through Redis on this node.",
			func(l *LimitStatus) (float64, bool) {
				return hotf(l, func(h *HotStatus) float64 { return float64(h.Len) })
			}},
		{"loopgate_ratelimit_hot_keys_capacity", "gauge", "Keys a cluster keyed limit's hot set can hold.",
			func(l *LimitStatus) (float64, bool) {
				return hotf(l, func(h *HotStatus) float64 { return float64(h.Cap) })
			}},
		{"loopgate_ratelimit_hot_promotions_total", "counter", "Keys that needed more than their local share and went hot.",
			func(l *LimitStatus) (float64, bool) {
				return hotf(l, func(h *HotStatus) float64 { return float64(h.Promotions) })
			}},
		{"loopgate_ratelimit_hot_demotions_total", "counter", "Hot keys that went idle and cold again.",
			func(l *LimitStatus) (float64, bool) {
				return hotf(l, func(h *HotStatus) float64 { return float64(h.Demotions) })
			}},
		{"loopgate_ratelimit_hot_full_total", "counter", "Keys that needed to go hot but found their group of the hot set full, and stayed at their share.",
			func(l *LimitStatus) (float64, bool) {
				return hotf(l, func(h *HotStatus) float64 { return float64(h.Full) })
			}},
		{"loopgate_ratelimit_cold_grants_total", "counter", "Requests a cluster keyed limit allowed at a cold key's local share, without Redis.",
			func(l *LimitStatus) (float64, bool) {
				return hotf(l, func(h *HotStatus) float64 { return float64(h.ColdGrants) })
			}},
		{"loopgate_ratelimit_shadow_rate", "gauge", "A cluster limit's quota on this node while Redis is down.",
			func(l *LimitStatus) (float64, bool) {
				return leasef(l, func(s *LeaseStatus) float64 { return s.ShadowRate })
			}},
		{"loopgate_ratelimit_lease_size", "gauge", "Tokens a cluster limit's lease aims to hold.",
			func(l *LimitStatus) (float64, bool) {
				return leasef(l, func(s *LeaseStatus) float64 { return float64(s.Size) })
			}},
		{"loopgate_ratelimit_lease_held", "gauge", "Leased tokens on hand.",
			func(l *LimitStatus) (float64, bool) {
				return leasef(l, func(s *LeaseStatus) float64 { return float64(s.Held) })
			}},
		{"loopgate_ratelimit_leases_total", "counter", "Redis replies that granted a cluster limit tokens.",
			func(l *LimitStatus) (float64, bool) {
				return leasef(l, func(s *LeaseStatus) float64 { return float64(s.Leases) })
			}},
		{"loopgate_ratelimit_leased_tokens_total", "counter", "Tokens Redis granted a cluster limit.",
			func(l *LimitStatus) (float64, bool) {
				return leasef(l, func(s *LeaseStatus) float64 { return float64(s.Leased) })
			}},
		{"loopgate_ratelimit_returned_tokens_total", "counter", "Unused tokens handed back to Redis.",
			func(l *LimitStatus) (float64, bool) {
				return leasef(l, func(s *LeaseStatus) float64 { return float64(s.Returned) })
			}},
		{"loopgate_ratelimit_unavailable_total", "counter", "Requests a closed cluster limit refused with 503 while Redis was down.",
			func(l *LimitStatus) (float64, bool) {
				return leasef(l, func(s *LeaseStatus) float64 { return float64(s.Unavailable) })
			}},
		{"loopgate_ratelimit_degraded_total", "counter", "Decisions a cluster limit made without Redis.",
			func(l *LimitStatus) (float64, bool) {
				return leasef(l, func(s *LeaseStatus) float64 { return float64(s.Degraded) })
			}},
	}
	for _, m := range perLimit {
		wrote := false
		for i := range st.Limits {
			l := &st.Limits[i]
			v, ok := m.value(l)
			if !ok {
				continue
			}
			if !wrote {
				p.family(m.name, m.typ, m.help)
				wrote = true
			}
			p.sample(m.name, labels(l), v)
		}
	}
	w.Write(b.Bytes())
}

func quota(l *LimitStatus) float64 {
	if l.Unlimited {
		return math.Inf(1)
	}
	return l.Quota
}

func keysf(l *LimitStatus, f func(*KeysStatus) int64) (float64, bool) {
	if l.Keys == nil {
		return 0, false
	}
	return float64(f(l.Keys)), true
}

func hotf(l *LimitStatus, f func(*HotStatus) float64) (float64, bool) {
	if l.Hot == nil {
		return 0, false
	}
	return f(l.Hot), true
}

func leasef(l *LimitStatus, f func(*LeaseStatus) float64) (float64, bool) {
	if l.Lease == nil {
		return 0, false
	}
	return f(l.Lease), true
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// labels names a limit's series: {limit="api/ip",scope="local"}.
func labels(l *LimitStatus) string {
	return `{limit="` + escapeLabel(l.Name) + `",scope="` + l.Scope + `"}`
}

// escapeLabel escapes a label value as the text format wants: backslash,
// double quote and newline.
func escapeLabel(v string) string {
	return labelEscaper.Replace(v)
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// promWriter appends Prometheus text exposition lines.
type promWriter struct{ b *bytes.Buffer }

func (p promWriter) family(name, typ, help string) {
	p.b.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
}

func (p promWriter) sample(name, labels string, v float64) {
	p.b.WriteString(name + labels + " " + strconv.FormatFloat(v, 'g', -1, 64) + "\n")
}

// one writes a family of one unlabelled sample.
func (p promWriter) one(name, typ, help string, v float64) {
	p.family(name, typ, help)
	p.sample(name, "", v)
}
