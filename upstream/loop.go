// Loop: the upstream side of one event loop, the interfaces it needs from
// the engine (Host, Clock), and its groups of pools.

package upstream

import (
	"context"
	"crypto/tls"
	"net"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Host is the engine's side of the event loop the upstream side runs on.
type Host interface {
	// Index is the loop's index: the shard of every Node it writes.
	Index() int
	// Guard runs f, a callback that arrived through EventLoop.Execute,
	// the way the host runs its own callbacks (see engine loop.enter).
	Guard(f func())
	// Adopt puts fd, a TCP socket this loop connected to the node at sa
	// (remote), on the loop's poller as uc's connection; uc.Opened runs
	// before it returns. On an error fd has been closed. Called only
	// where DialOnLoop is true.
	Adopt(fd int, sa unix.Sockaddr, remote net.Addr, uc *Conn) error
	// RingRoundBell arranges for Loop.RoundBell to run on the loop after
	// the events that are ready now, in their order, as a socket's
	// writable event would. It reports false when it cannot; the caller
	// then falls back on EventLoop.Execute. Called only where DialOnLoop
	// is true.
	RingRoundBell() bool
	// Now is the loop's monotonic clock in nanoseconds (loopstat.Now's
	// scale), for the timestamp that begins a call's durations (its
	// start). The host may read it once per callback and
	// answer every call in that callback with that reading.
	Now() int64
	// Fresh is the same clock for a timestamp that ends a duration (a
	// call's first response byte, its end): later than every reading Now gave out before it, so a
	// call begun and ended in one callback does not come out 0.
	Fresh() int64
	// TLS is the loop's part in TLS connections to nodes: how a handshake
	// posts back to the loop, the bounded handshake runner, the loop's
	// record scratch (see package tlsedge). Called only for an upstream
	// with PoolConfig.TLS.
	TLS() TLSEnv
}

// TLSEnv is what a Conn's TLS session needs from its loop.
type TLSEnv struct {
	Post    tlsedge.Post
	Runner  *tlsedge.Runner
	Scratch *tlsedge.Scratch
}

// Clock is the timer service of the loop. The engine's timer wheel
// implements it; this package needs nothing more of it.
type Clock interface {
	// NewTimer returns a stopped timer that runs fire on the loop once it
	// expires. Made once per owner (a Call, a connection) and re-armed.
	NewTimer(fire func()) Timer
	// Now is the loop's current time, at the clock's resolution.
	Now() time.Time
	// Elapsed is Now as the time since the clock's start: no time.Time
	// arithmetic, for a timestamp noted at every exchange (an idle
	// connection's release).
	Elapsed() time.Duration
}

// Timer is one deadline made by a Clock. Arm and Stop run on the loop and
// do not allocate.
type Timer interface {
	Arm(d time.Duration) // (re)start: fire after d, never before
	Stop()               // disarm; stopping a stopped timer does nothing
}

// NodeConfig is one node of a group: its shared Node and its weight.
type NodeConfig struct {
	Node   *Node
	Weight int
}

// GroupConfig is one named upstream: its nodes, how to balance across them
// and the limits and timeouts of each node's pool.
type GroupConfig struct {
	Name      string
	Nodes     []NodeConfig
	Weighted  bool          // smooth weighted round robin instead of plain round robin
	Kind      BalancerKind  // the balancer (Weighted picks BalanceWeighted too)
	SlowStart time.Duration // the slow-start ramp of nodes that come back; 0 = none
	Pool      PoolConfig

	ring *hashRing // built once by Prepare
}

// Prepare builds what all loops share for the group. Call it once before
// the group is handed to Loop.Update.
func (gc *GroupConfig) Prepare() { gc.ring = newHashRing(gc.Nodes) }

// PoolConfig bounds one node's connections on one loop.
type PoolConfig struct {
	MaxIdle        int
	MaxConns       int
	IdleTimeout    time.Duration
	ConnectTimeout time.Duration // the dial, and the TLS handshake after it
	AcquireTimeout time.Duration
	// TLS, when set, makes every connection TLS with this config: its
	// ServerName empty means the node's host. Shared by all loops (its
	// ClientSessionCache too, so any loop resumes a node's session).
	TLS *tls.Config
}

// Loop is the upstream side of one event loop. It is owned by that loop's
// goroutine; nothing in it is safe for concurrent use.
type Loop struct {
	el     gnet.EventLoop
	host   Host
	clock  Clock
	shard  int          // host.Index()
	limits codec.Limits // bounds on response heads (max_response_header_*)
	pools  map[*Node]*Pool
	resp   codec.Response // scratch: valid only while a response head is handled

	logLimit logLimiter // upstream trouble logged from this loop

	// Sockets connected on the loop and not yet adopted: a group that
	// waits for the round bell, or for adoptTask (adoptSoon). Bounded:
	// each is a dial that counts against its pool's max_conns.
	connected      []connectedSocket
	connectedSpare []connectedSocket // the other buffer, so adopting may queue more
	adoptTask      gnet.Runnable     // adoptConnected, made once
	adoptAll       func()            // adoptAllConnected, made once

	// spare holds Conns gnet has closed, with their timers, for the next
	// dials (newConn): a backend that closes every connection otherwise
	// costs three allocations per request (the Conn, its timer and the
	// timer's callback). At most maxSpareConns.
	spare []*Conn
}

// maxSpareConns bounds Loop.spare: beyond it closed Conns go to the GC.
const maxSpareConns = 64

// newConn returns a Conn dialing for c on pool p, a spare one when there
// is one. Its timer is stopped.
func (l *Loop) newConn(p *Pool, c *Call) *Conn {
	onLoop := p.sa != nil
	if n := len(l.spare); n > 0 {
		uc := l.spare[n-1]
		l.spare[n-1] = nil
		l.spare = l.spare[:n-1]
		*uc = Conn{pool: p, state: connDialing, dialFor: c, timer: uc.timer, noDelay: !onLoop, spare: onLoop}
		return uc
	}
	// net.Dial, off the loop, turns TCP_NODELAY on; a dial on the loop
	// leaves it to the first body write (Conn.writeMore).
	uc := &Conn{pool: p, state: connDialing, dialFor: c, noDelay: !onLoop, spare: onLoop}
	uc.timer = l.clock.NewTimer(uc.onTimer)
	return uc
}

// putConn keeps uc, closed and done with, for a later dial. See
// Conn.Closed for when a Conn is done with.
func (l *Loop) putConn(uc *Conn) {
	if len(l.spare) < maxSpareConns {
		// Cleared, so that a holder that outlived the close fails on a nil
		// pool rather than acting on the next connection, and a retired
		// pool is not kept alive by a spare.
		*uc = Conn{timer: uc.timer, state: connClosed}
		l.spare = append(l.spare, uc)
	}
}

// connectedSocket is a socket whose connect for uc, of pool, has completed.
type connectedSocket struct {
	pool *Pool
	uc   *Conn
	fd   int
}

// NewLoop prepares the upstream side of the loop el. limits bound the
// upstreams' response heads. It has no pools until Update.
func NewLoop(el gnet.EventLoop, host Host, clock Clock, limits codec.Limits) *Loop {
	l := &Loop{el: el, host: host, clock: clock, shard: host.Index(), limits: limits, pools: map[*Node]*Pool{}}
	l.adoptTask = gnet.RunnableFunc(l.adoptConnected)
	l.adoptAll = l.adoptAllConnected
	return l
}

// Host returns the engine's side of the loop, for the gnet handler that
// finds a connection's loop through it.
func (l *Loop) Host() Host { return l.host }

// SetLimits changes the bounds on response heads read from now on.
func (l *Loop) SetLimits(limits codec.Limits) { l.limits = limits }

// run calls f under the host's guard.
func (l *Loop) run(f func()) { l.host.Guard(f) }

// adoptSoon queues fd, connected for uc, to be adopted together with the
// other sockets connected around it. nginx works the same way: it
// connects as it reads a request, and sends the request when epoll
// reports the socket writable, in the next round of events. The requests
// then reach the upstream in a burst that wakes it once rather than once
// each, which is cheaper for it and for the loop that wakes it. Measured
// in issue 11's close-every-connection run: CPU per request -8 % here and
// -20 % on the upstream, against adopting each socket at once.
//
// The first socket of a group rings the host's round bell, which comes
// back in the next round of events at the place a writable event for
// that socket would have (RoundBell). Where there is no bell the group
// waits for an EventLoop.Execute task, which gnet runs only after the
// whole next round: a wait twice as long for some sockets.
func (l *Loop) adoptSoon(p *Pool, uc *Conn, fd int) {
	l.connected = append(l.connected, connectedSocket{pool: p, uc: uc, fd: fd})
	if len(l.connected) > 1 || l.host.RingRoundBell() {
		return
	}
	if l.el.Execute(context.Background(), l.adoptTask) != nil {
		// The engine has stopped: nothing will run on this loop again.
		for _, s := range l.connected {
			_ = unix.Close(s.fd)
		}
		l.connected = l.connected[:0]
	}
}

// RoundBell is the host's answer to RingRoundBell: it adopts the sockets
// adoptSoon queued. The host calls it as it calls its own callbacks.
func (l *Loop) RoundBell() { l.adoptAllConnected() }

// adoptConnected is adoptTask: gnet's side of adoptAllConnected.
func (l *Loop) adoptConnected(context.Context) error {
	l.run(l.adoptAll)
	return nil
}

// adoptAllConnected adopts the sockets adoptSoon queued. One that fails
// may dial again (a retry), which queues for the next round.
func (l *Loop) adoptAllConnected() {
	batch := l.connected
	l.connected = l.connectedSpare[:0]
	for i, s := range batch {
		batch[i] = connectedSocket{}
		s.pool.connected(s.uc, s.fd, nil)
	}
	l.connectedSpare = batch[:0]
}

// Update makes groups the loop's upstreams and returns one Group for each,
// in order. A node that already has a pool on the loop keeps it, with its
// connections, under the new pool settings; a new node gets a new pool.
// The pools of nodes no longer in any group are retired (see Pool.retire):
// they close their idle connections now and the others as their calls end.
// Groups returned by earlier Updates stay usable, so a request that began
// under an older configuration finishes on it.
func (l *Loop) Update(groups []*GroupConfig) []*Group {
	live := make(map[*Node]*Pool, len(l.pools))
	out := make([]*Group, len(groups))
	for i, gc := range groups {
		g := &Group{Name: gc.Name, ring: gc.ring, pools: make([]*Pool, len(gc.Nodes))}
		weights := make([]int, len(gc.Nodes))
		for j, n := range gc.Nodes {
			p := live[n.Node]
			if p == nil {
				p = l.pools[n.Node]
			}
			if p == nil {
				p = newPool(l, n.Node, gc.Pool)
			}
			p.cfg = gc.Pool
			live[n.Node] = p
			g.pools[j] = p
			weights[j] = n.Weight
		}
		g.balancer = newBalancer(gc, g.pools, weights)
		out[i] = g
	}
	for n, p := range l.pools {
		if live[n] == nil {
			p.retire()
		}
	}
	l.pools = live
	return out
}

// Group is one upstream's nodes on one loop, as one configuration version
// defines it. Owned by the loop.
type Group struct {
	Name     string
	pools    []*Pool
	balancer Balancer
	ring     *hashRing // for PickHash; shared by every loop's group
}

// Pick chooses the node pool for the next call, passing over the nodes in
// exclude (so a retry can go elsewhere) unless every node is in it.
func (g *Group) Pick(exclude NodeSet) *Pool { return g.pools[g.balancer.Pick(exclude)] }

// PickHash chooses the node for key by consistent hashing: the same key gets
// the same node on every loop and every gateway with the same nodes. A key
// whose node is in exclude goes to the next node on the ring that is not.
func (g *Group) PickHash(key []byte, exclude NodeSet) *Pool {
	return g.pools[g.ring.lookup(key, exclude)]
}

// Exclude returns s with p's node added, for the next Pick.
func (g *Group) Exclude(s NodeSet, p *Pool) NodeSet {
	for i, q := range g.pools {
		if q == p {
			return s.With(i)
		}
	}
	return s
}

// Pools returns the group's node pools, for stats and tests.
func (g *Group) Pools() []*Pool { return g.pools }

// logLimiter lets one log line through per second. Owned by the loop.
type logLimiter struct{ last time.Time }

// Allow reports whether a line may be logged at now.
func (l *logLimiter) Allow(now time.Time) bool {
	if now.Sub(l.last) < time.Second {
		return false
	}
	l.last = now
	return true
}
