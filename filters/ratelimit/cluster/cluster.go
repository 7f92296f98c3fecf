// Cluster: the Redis connection, the worker pool that calls it off the
// loops, and the controller that keeps health, membership and leases.

package cluster

import (
	"context"
	"errors"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/redis/rueidis"
)

// The errors Limit.Acquire returns at once, without calling done.
var (
	ErrQueueFull = errors.New("cluster: Redis call queue full")
	ErrRedisDown = errors.New("cluster: Redis is marked down")
	ErrClosed    = errors.New("cluster: closed")
)

// Cluster is one node's view of the cluster-wide limits: a Redis client, a
// bounded pool of workers that make every Redis call, and a controller
// goroutine that heartbeats, probes, sizes leases and computes shadow
// quotas. Loops only read atomics and queue work; nothing here blocks one.
// A Cluster is safe for concurrent use.
type Cluster struct {
	opt        Options
	membersKey string
	now        func() int64 // the monotonic clock loops pass to Take

	client atomic.Pointer[redisClient] // nil until the first connection succeeds
	br     breaker
	jobs   chan job

	// The node counts from the last heartbeat (see heartbeat), and when
	// they were read (0: never). live counts the nodes answering, known
	// the nodes seen within LiveMaxAge; effective is what shadow quotas
	// divide by.
	live      atomic.Int64
	known     atomic.Int64
	liveAt    atomic.Int64
	effective atomic.Int64
	rampStart atomic.Int64 // clock when Redis last came back; 0 when not ramping
	rampEff   atomic.Int64 // the effective count when it came back: the ramp starts from its shadow quota

	// Owned by the controller (and New): the known count a node keeps
	// when Redis lost the membership set, and when it was last true; and
	// whether a heartbeat failed since the last answered one (see
	// heartbeat).
	heldKnown, heldAt int64
	beatLost          bool

	liveMSArg, keepMSArg string // MemberTTL and the set's keep window, for the heartbeat script

	calls     atomic.Uint64 // Redis calls made (probes and heartbeats included)
	callErrs  atomic.Uint64 // of which failed
	queueFull atomic.Uint64 // calls refused because the queue was full
	probes    atomic.Uint64

	limitsMu sync.Mutex               // serialises NewLimit and Limit.Close
	limits   atomic.Pointer[[]*Limit] // immutable snapshot, read by the controller and Status
	keyed    atomic.Pointer[[]*KeyedLimit]

	submitting atomic.Int64 // submit calls between their closed check and their send
	closed     atomic.Bool
	quit       chan struct{}
	done       sync.WaitGroup // workers and the controller
}

type redisClient struct{ rueidis.Client }

// New builds a Cluster and starts its workers and controller. It tries
// Redis once; if Redis cannot be reached the Cluster starts Down, limits
// use their failure modes, and the controller keeps probing. It fails only
// on invalid options.
func New(opt Options) (*Cluster, error) {
	opt = opt.withDefaults()
	if err := opt.validate(); err != nil {
		return nil, err
	}
	c := &Cluster{
		opt:        opt,
		membersKey: opt.KeyPrefix + "nodes",
		now:        opt.clock,
		jobs:       make(chan job, opt.Queue),
		quit:       make(chan struct{}),
		liveMSArg:  msArg(int64(opt.MemberTTL)),
		keepMSArg:  msArg(int64(max(opt.MemberTTL, opt.LiveMaxAge))),
	}
	c.br.threshold = int32(opt.FailureThreshold)
	c.br.redis = strings.Join(opt.Addrs, ",")
	c.limits.Store(&[]*Limit{})
	c.keyed.Store(&[]*KeyedLimit{})
	c.effective.Store(int64(max(opt.MinNodes, opt.FallbackNodes)))
	if !c.probe() {
		c.br.set(Up, Down)
	}
	c.updateEffective(c.now())
	for range opt.Workers {
		c.done.Add(1)
		go c.work()
	}
	if !opt.manual {
		c.done.Add(1)
		go c.control()
	}
	return c, nil
}

// Health reports whether this node is calling Redis. Safe for concurrent use.
func (c *Cluster) Health() Health { return c.br.health() }

// Close stops the workers and the controller, hands every limit's leased
// tokens back to Redis, leaves the membership set and closes the client.
// Work still queued completes as if Redis were down (done is called for
// every pending Take). Close waits for calls in flight, at most about
// CallTimeout each.
func (c *Cluster) Close() {
	if c.closed.Swap(true) {
		return
	}
	close(c.quit)
	c.done.Wait()
	for c.submitting.Load() != 0 {
		runtime.Gosched() // a submit is between its closed check and its send
	}
	for drained := false; !drained; {
		select {
		case j := <-c.jobs:
			j.lim.complete(j, Result{Err: ErrClosed})
		default:
			drained = true
		}
	}
	if cl := c.usable(); cl != nil {
		for _, l := range *c.limits.Load() {
			l.giveBackHeld(cl)
		}
		for _, k := range *c.keyed.Load() {
			k.giveBackHeld(cl)
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opt.CallTimeout)
		cl.Do(ctx, cl.B().Zrem().Key(c.membersKey).Member(c.opt.NodeID).Build())
		cancel()
	}
	if cl := c.client.Load(); cl != nil {
		cl.Close()
	}
}

// connect builds the rueidis client. rueidis dials in NewClient and fails
// when Redis is unreachable, so this runs at New and in probes only.
func (c *Cluster) connect() (*redisClient, error) {
	o := &c.opt
	cl, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: o.Addrs,
		Username:    o.Username,
		Password:    o.Password,
		TLSConfig:   o.TLS,
		Sentinel: rueidis.SentinelOption{
			MasterSet: o.MasterSet, Username: o.Username, Password: o.Password, TLSConfig: o.TLS,
			Dialer: net.Dialer{Timeout: o.DialTimeout},
		},
		ClientName:          "loopgate-" + o.NodeID,
		Dialer:              net.Dialer{Timeout: o.DialTimeout},
		DialCtxFn:           o.dial,
		AlwaysPipelining:    true, // many workers, few connections: every call is pipelined
		DisableCache:        true, // no client-side caching: every answer is a fresh decision
		DisableRetry:        true, // the breaker decides when to try again, not rueidis
		ReadBufferEachConn:  64 << 10,
		WriteBufferEachConn: 64 << 10,
	})
	if err != nil {
		return nil, err
	}
	return &redisClient{cl}, nil
}

// usable returns the client when calls may go to Redis, or nil.
func (c *Cluster) usable() *redisClient {
	if c.br.health() != Up {
		return nil
	}
	return c.client.Load()
}

// call runs one Redis script with the per-call deadline and reports the
// outcome to the breaker.
func (c *Cluster) call(cl *redisClient, s *rueidis.Lua, key string, args ...string) ([]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.opt.CallTimeout)
	defer cancel()
	c.calls.Add(1)
	start := nanotime()
	var reply []int64
	r := s.Exec(ctx, cl, []string{key}, args)
	err := r.Error()
	if err == nil {
		if reply, err = r.AsIntSlice(); err != nil {
			var n int64
			if n, err = r.AsInt64(); err == nil {
				reply = []int64{n}
			}
		}
	}
	if err != nil {
		c.callErrs.Add(1)
		var ne net.Error
		c.br.failed(start, errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout())
		return nil, err
	}
	c.br.succeeded(start)
	return reply, nil
}

// job is one queued Redis call. Jobs are values in the queue, so queueing
// one allocates nothing.
type job struct {
	kind    jobKind
	lim     *Limit
	n       int64          // tokens the request itself needs (jobTake, jobAcquire)
	want    int64          // tokens to ask Redis for: n plus room for the lease
	debt    int64          // tokens asked for on top of want, granted to no one (Limit.debt)
	take    func(Decision) // jobTake
	acquire func(Result)   // jobAcquire
}

type jobKind uint8

const (
	jobTake     jobKind = iota // a request that found no leased token
	jobRefill                  // topping up a lease ahead of need
	jobAcquire                 // a raw at-most-N acquire
	jobGiveBack                // handing unused tokens back
)

// submit queues j for a worker without waiting; false means the queue is
// full or the Cluster closed. Safe to call from a loop.
func (c *Cluster) submit(j job) bool {
	c.submitting.Add(1)
	defer c.submitting.Add(-1)
	if c.closed.Load() {
		return false
	}
	select {
	case c.jobs <- j:
		return true
	default:
		c.queueFull.Add(1)
		return false
	}
}

// work is one worker: it runs queued calls until Close.
func (c *Cluster) work() {
	defer c.done.Done()
	for {
		select {
		case j := <-c.jobs:
			c.run(j)
		case <-c.quit:
			return
		}
	}
}

func (c *Cluster) run(j job) {
	l := j.lim
	cl := c.usable()
	if cl == nil {
		l.complete(j, Result{Err: ErrRedisDown})
		return
	}
	if j.kind == jobGiveBack {
		l.giveBack(cl, j.n)
		return
	}
	args := l.args.Load()
	reply, err := c.call(cl, acquireScript, l.key, args.cost, args.tolerance, strconv.FormatInt(j.want+j.debt, 10))
	if err == nil && len(reply) != 4 {
		err = errors.New("cluster: acquire script replied " + strconv.Itoa(len(reply)) + " values, want 4")
	}
	if err != nil {
		l.complete(j, Result{Err: err})
		return
	}
	l.complete(j, Result{
		Granted:    reply[0],
		Remaining:  reply[1],
		RetryAfter: time.Duration(reply[2]) * time.Microsecond,
		Reset:      time.Duration(reply[3]) * time.Microsecond,
	})
}

// control is the controller goroutine: every Tick it probes or heartbeats,
// and adjusts the limits.
func (c *Cluster) control() {
	defer c.done.Done()
	t := time.NewTicker(c.opt.Tick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.step(c.now())
		case <-c.quit:
			return
		}
	}
}

// step is one controller tick at now. Owned by the controller goroutine
// (or a test driving it).
func (c *Cluster) step(now int64) {
	if c.br.probeDue(now, c.opt.ProbeMin) {
		ok := c.probe()
		if ok {
			// The ramp starts from the quota the node was on, whatever
			// the first heartbeat back says.
			c.rampEff.Store(c.effective.Load())
			c.rampStart.Store(now)
		}
		c.br.probed(now, ok, c.opt.ProbeMax)
	} else if from := c.br.confirmDue(); from != 0 {
		// A run of failures ended in a timeout: Redis is down only if a
		// heartbeat sent now gets no answer either (see Health).
		if cl := c.client.Load(); cl != nil {
			c.heartbeat(cl)
		}
		c.br.confirm(from)
	} else if c.br.health() == Up && now-c.liveAt.Load() >= int64(c.opt.Heartbeat) {
		if cl := c.client.Load(); cl != nil {
			c.heartbeat(cl)
		}
	}
	c.updateEffective(now)
	if rs := c.rampStart.Load(); rs != 0 && float64(now-rs) >= 1e9/c.opt.RampStep {
		c.rampStart.CompareAndSwap(rs, 0)
	}
	for _, l := range *c.limits.Load() {
		l.adjust(now)
	}
	for _, k := range *c.keyed.Load() {
		k.adjust(now)
	}
}

// probe connects if there is no client yet and heartbeats: Redis is usable
// when both work.
func (c *Cluster) probe() bool {
	c.probes.Add(1)
	cl := c.client.Load()
	if cl == nil {
		var err error
		if cl, err = c.connect(); err != nil {
			return false
		}
		c.client.Store(cl)
	}
	return c.heartbeat(cl)
}

//go:linkname nanotime runtime.nanotime
func nanotime() int64
