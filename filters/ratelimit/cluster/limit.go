// Limit: one cluster-wide limit on this node, and the decision it makes
// for each request.

package cluster

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit"
)

// Verdict is what Take decided.
type Verdict uint8

const (
	Allow       Verdict = iota // go on
	Deny                       // 429 with Retry-After
	Unavailable                // fail-closed while Redis is down: 503
	Pending                    // Redis was asked; done will be called once with the answer
)

var verdictNames = [...]string{"allow", "deny", "unavailable", "pending"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "unknown"
}

// Decision is Take's answer, with what the rate-limit headers report.
// Remaining and Reset are this node's best knowledge of the cluster
// bucket: the figures of the latest Redis reply plus the tokens leased.
type Decision struct {
	Verdict    Verdict
	Remaining  int64
	Reset      time.Duration
	RetryAfter time.Duration // for Deny and Unavailable
	tokens     int64         // what an Allow took, and from where, for Return
	from       source
	lim        *Limit // the limit whose lease the tokens came from: a hot key's, for KeyedLimit.Return
}

// RetryAfterSeconds is RetryAfter rounded up to whole seconds for the
// Retry-After header: at least 1 unless allowed.
func (d Decision) RetryAfterSeconds() int64 {
	return ratelimit.Decision{Allowed: d.Verdict == Allow, RetryAfter: d.RetryAfter}.RetryAfterSeconds()
}

// ResetSeconds is Reset rounded up to whole seconds, for X-RateLimit-Reset.
func (d Decision) ResetSeconds() int64 { return ratelimit.Decision{Reset: d.Reset}.ResetSeconds() }

type source uint8

const (
	fromNowhere source = iota // open, or nothing taken
	fromRedis                 // leased or granted tokens: Return gives them back
	fromLocal                 // the shadow bucket
)

// Result is Redis's answer to one at-most-N acquire.
type Result struct {
	Granted    int64         // tokens granted, 0..n
	Remaining  int64         // tokens left in the cluster bucket
	RetryAfter time.Duration // until the tokens not granted would fit; 0 when all were
	Reset      time.Duration // until the cluster bucket is full
	Err        error         // the call failed; nothing was granted
}

// Limit is one cluster-wide limit as this node applies it. Every loop
// calls Take; nothing in it blocks, and a request served from the lease
// costs a few atomic operations and no allocation. Safe for concurrent use.
type Limit struct {
	c           *Cluster
	spec        LimitSpec
	key         string // the Redis key of the cluster bucket
	intervalUS  int64  // µs per token
	intervalArg string // intervalUS, for the give-back script

	// args are what the acquire script charges this node: set from the
	// node counts by the controller, read by the workers.
	args atomic.Pointer[acquireArgs]

	lease

	// local is this node's own bucket: the shadow quota while Redis is
	// down, and the rising cap while it ramps back up.
	local  ratelimit.Bucket
	shadow atomic.Pointer[ratelimit.Limit] // set by the controller; never nil

	// debt is tokens the next Redis take must also spend, granted to no
	// request: a hot key's cold burst, spent on this node before it went
	// hot (KeyedLimit.promote), so that it is not spent twice.
	debt atomic.Int64

	lastRemaining atomic.Int64 // from the latest Redis reply
	lastReset     atomic.Int64

	grants, rejections, unavailable, degraded atomic.Uint64
	closed                                    atomic.Bool
}

// NewLimit adds a cluster-wide limit to c. Limits with the same name share
// one Redis bucket, so a reload may build the new limit before closing the
// old one. Call it off the loops.
func (c *Cluster) NewLimit(spec LimitSpec) (*Limit, error) {
	spec.withDefaults()
	if err := spec.validate(); err != nil {
		return nil, err
	}
	l := new(Limit)
	c.initLimit(l, spec, c.opt.KeyPrefix+spec.Name)

	c.limitsMu.Lock()
	defer c.limitsMu.Unlock()
	next := append(append([]*Limit{}, *c.limits.Load()...), l)
	c.limits.Store(&next)
	return l, nil
}

// initLimit readies l, a validated spec with defaults applied, on the
// Redis key key, sized for the current node counts. It registers nothing
// and takes no lock, so a loop may call it to make a hot key's limit
// (KeyedLimit).
func (c *Cluster) initLimit(l *Limit, spec LimitSpec, key string) {
	intervalUS := max(1, int64(1e6/spec.Rate+0.5))
	l.c, l.spec, l.key = c, spec, key
	l.intervalUS, l.intervalArg = intervalUS, strconv.FormatInt(intervalUS, 10)
	l.setShare(c.live.Load(), c.known.Load())
	eff := c.effective.Load()
	l.setShadow(eff)
	l.startLease(spec, eff)
}

// Close removes the limit from its Cluster and hands its leased tokens back
// to Redis. Take still works after Close, on the failure mode. Call it off
// the loops.
func (l *Limit) Close() {
	if l.closed.Swap(true) {
		return
	}
	c := l.c
	c.limitsMu.Lock()
	var next []*Limit
	for _, o := range *c.limits.Load() {
		if o != l {
			next = append(next, o)
		}
	}
	c.limits.Store(&next)
	c.limitsMu.Unlock()
	if h := l.held.Swap(0); h > 0 && !c.submit(job{kind: jobGiveBack, lim: l, n: h}) {
		l.held.Add(h)
	}
}

// Spec is the limit as NewLimit built it, defaults applied: its Rate is
// what X-RateLimit-Limit reports.
func (l *Limit) Spec() LimitSpec { return l.spec }

// Take decides whether n tokens may be taken at now, the caller's monotonic
// clock in nanoseconds (filters.Exchange.Now). It answers at once when it
// can: from the tokens this node has leased, from Redis's last word that
// the bucket is empty, or from the failure mode while Redis is down. Only
// otherwise does it queue a Redis call and answer Pending; done then runs
// exactly once, on a worker goroutine, with Allow, Deny or, in FailClosed
// mode, Unavailable. A failed or refused Redis call is decided by the
// failure mode, never surfaced as an error. done must be non-nil and must
// not block. Safe for concurrent use; never blocks.
func (l *Limit) Take(now, n int64, done func(Decision)) Decision {
	l.demand.Add(n)
	if l.c.br.health() != Up || l.closed.Load() {
		return l.fallback(now, n)
	}
	if rs := l.c.rampStart.Load(); rs != 0 && l.spec.OnFailure != FailOpen {
		if d, ok := l.rampCap(now, rs, n); !ok {
			return l.count(d)
		}
	}
	if l.takeHeld(n) {
		l.refill(now)
		return l.count(l.allowed(n))
	}
	if wait := l.emptyUntil.Load() - now; wait > 0 {
		return l.count(l.denied(time.Duration(wait)))
	}
	room := l.reserve()
	debt := l.debt.Swap(0)
	if !l.c.submit(job{kind: jobTake, lim: l, n: n, want: n + room, debt: debt, take: done}) {
		l.reserved.Add(-room)
		l.debt.Add(debt)
		return l.fallback(now, n)
	}
	return Decision{Verdict: Pending}
}

// Return gives back the tokens an Allow took, when the request they were
// for never ran (its client left while it waited). Tokens from Redis go
// back to the lease; the controller hands any excess to Redis. Safe for
// concurrent use.
func (l *Limit) Return(d Decision) {
	if d.Verdict == Allow && d.from == fromRedis && d.tokens > 0 {
		l.held.Add(d.tokens)
	}
}

// Acquire asks Redis for up to n tokens on a worker goroutine, without
// leasing, and calls done there with how many it granted. It returns at
// once: ErrRedisDown while the breaker is open, ErrQueueFull when the queue
// is full, ErrClosed after Close; done is then not called. Safe for
// concurrent use; never blocks.
func (l *Limit) Acquire(n int64, done func(Result)) error {
	switch {
	case l.c.closed.Load():
		return ErrClosed
	case l.c.br.health() != Up:
		return ErrRedisDown
	case !l.c.submit(job{kind: jobAcquire, lim: l, n: n, want: n, acquire: done}):
		if l.c.closed.Load() {
			return ErrClosed
		}
		return ErrQueueFull
	}
	return nil
}

// complete finishes a queued job with Redis's reply, on a worker goroutine
// (or in Close). A request gets all the tokens it asked for or none; what
// else Redis granted goes to the lease.
func (l *Limit) complete(j job, r Result) {
	paid := int64(0)
	if r.Err == nil {
		paid = min(r.Granted, j.debt)
		r.Granted -= paid
		l.noteReply(r)
	}
	if j.debt > paid {
		l.debt.Add(j.debt - paid) // a later call pays the rest
	}
	switch j.kind {
	case jobAcquire:
		j.acquire(r)
		return
	case jobGiveBack:
		return // not handed back: Redis expires the bucket's key in time
	}
	room := j.want - j.n
	if r.Err != nil {
		l.deposit(0, room)
		if j.kind == jobRefill {
			l.refilling.Store(false)
		} else {
			j.take(l.fallback(l.c.now(), j.n))
		}
		return
	}
	own := j.n
	if r.Granted < j.n {
		own = 0
	}
	l.deposit(r.Granted-own, room)
	var wait time.Duration
	if r.Granted < j.want {
		wait = l.exhausted(r)
	}
	switch {
	case j.kind == jobRefill:
		l.refilling.Store(false)
	case own > 0:
		j.take(l.count(l.allowed(own)))
	default:
		j.take(l.count(l.denied(wait)))
	}
}

// fallback decides without Redis, by the limit's failure mode. In shadow
// mode leased tokens are spent first: Redis granted them.
func (l *Limit) fallback(now, n int64) Decision {
	l.degraded.Add(1)
	switch l.spec.OnFailure {
	case FailOpen:
		return l.count(Decision{Verdict: Allow})
	case FailClosed:
		return l.count(Decision{Verdict: Unavailable, RetryAfter: l.c.opt.ProbeMin})
	}
	if l.takeHeld(n) {
		return l.count(l.allowed(n))
	}
	return l.count(l.fromBucket(l.local.Allow(*l.shadow.Load(), now, n), n))
}

// rampCap applies the rising local cap after Redis recovered at rs. It
// reports false with the denial when the cap refuses; the cluster bucket
// must still agree to what it allows.
func (l *Limit) rampCap(now, rs, n int64) (Decision, bool) {
	ceiling, ok := l.rampLimit(now - rs)
	if !ok {
		return Decision{}, true
	}
	d := l.local.Allow(ceiling, now, n)
	if d.Allowed {
		return Decision{}, true
	}
	return l.fromBucket(d, n), false
}

// rampLimit is the local cap elapsed nanoseconds after Redis recovered:
// the shadow quota the node was on when Redis came back plus RampStep of
// the cluster rate per second, with that quota's burst. It reports false
// once the cap reaches the cluster rate. The start is fixed at the
// recovery: a first heartbeat that finds fewer nodes (a Redis that
// restarted empty, the others still cut off) must not lift it. The shadow
// bucket carries on as the cap's bucket, so the quota rises from where the
// outage left it, without a fresh burst.
func (l *Limit) rampLimit(elapsed int64) (ratelimit.Limit, bool) {
	eff := max(1, l.c.rampEff.Load())
	rate := l.spec.Rate/float64(eff) + l.c.opt.RampStep*l.spec.Rate*float64(max(elapsed, 0))/1e9
	if rate >= l.spec.Rate {
		return ratelimit.Limit{}, false
	}
	ceiling, err := ratelimit.NewLimit(rate, max(1, l.spec.Burst/eff))
	return ceiling, err == nil
}

func (l *Limit) allowed(n int64) Decision {
	return Decision{
		Verdict:   Allow,
		Remaining: l.lastRemaining.Load() + l.held.Load(),
		Reset:     time.Duration(l.lastReset.Load()),
		tokens:    n,
		from:      fromRedis,
		lim:       l,
	}
}

func (l *Limit) denied(wait time.Duration) Decision {
	return Decision{Verdict: Deny, RetryAfter: wait, Reset: time.Duration(l.lastReset.Load())}
}

func (l *Limit) fromBucket(d ratelimit.Decision, n int64) Decision {
	if d.Allowed {
		return Decision{Verdict: Allow, Remaining: d.Remaining, Reset: d.Reset, tokens: n, from: fromLocal}
	}
	return Decision{Verdict: Deny, Remaining: d.Remaining, Reset: d.Reset, RetryAfter: d.RetryAfter}
}

// count tallies a final decision for Status.
func (l *Limit) count(d Decision) Decision {
	switch d.Verdict {
	case Allow:
		l.grants.Add(1)
	case Deny:
		l.rejections.Add(1)
	case Unavailable:
		l.unavailable.Add(1)
	}
	return d
}

func (l *Limit) noteReply(r Result) {
	l.lastRemaining.Store(r.Remaining)
	l.lastReset.Store(int64(r.Reset))
	if r.Granted > 0 {
		l.leases.Add(1)
		l.leased.Add(uint64(r.Granted))
	}
}

// acquireArgs are the acquire script's cost and tolerance arguments.
type acquireArgs struct {
	costUS          int64
	cost, tolerance string
}

// setShare sets what the cluster bucket charges this node when live of the
// known nodes answer (see heartbeat). Every node seen within LiveMaxAge
// that no longer answers is cut off from Redis and on its shadow quota,
// Rate / known; the nodes answering must leave that room in the bucket.
// So each token costs known / live times the limit's interval: between
// them the answering nodes get Rate · live / known and Burst · live /
// known, and the cluster stays within Rate. With every node answering the
// cost is the interval. Called by the controller (heartbeat, adjust) and
// NewLimit; it allocates only when the cost changes.
func (l *Limit) setShare(live, known int64) {
	cost := l.intervalUS
	if live > 0 && known > live {
		cost = (l.intervalUS*known + live - 1) / live
	}
	if cur := l.args.Load(); cur != nil && cur.costUS == cost {
		return
	}
	tolerance := max(l.spec.Burst*l.intervalUS, cost)
	l.args.Store(&acquireArgs{costUS: cost, cost: strconv.FormatInt(cost, 10), tolerance: strconv.FormatInt(tolerance, 10)})
}

// setShadow computes the shadow quota for eff nodes: the cluster rate and
// burst divided among them, at least one token of burst.
func (l *Limit) setShadow(eff int64) {
	want, err := ratelimit.NewLimit(l.spec.Rate/float64(eff), max(1, l.spec.Burst/eff))
	if err != nil {
		return // a rate below 1e-9 per node: keep the last quota
	}
	if cur := l.shadow.Load(); cur == nil || *cur != want {
		l.shadow.Store(&want)
	}
}
