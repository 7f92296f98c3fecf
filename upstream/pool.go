// Pool: one node's keep-alive connections on one loop, and the calls waiting for one.

package upstream

import (
	"crypto/tls"
	"net"

	"golang.org/x/sys/unix"
)

// Pool holds a node's connections on one loop: a LIFO free list of idle
// connections, a count of all connections (idle, active and dialing) capped at
// MaxConns, and a FIFO of calls waiting for a connection. Owned by the loop.
type Pool struct {
	loop *Loop
	node *Node
	Addr string // node.Addr

	// The node's address as connect(2) takes it, when the pool dials on
	// the loop: DialOnLoop and an IP literal (a host name is resolved
	// off the loop, on every dial).
	sa     unix.Sockaddr
	remote net.Addr
	cfg    PoolConfig

	idle    []*Conn
	total   int // idle + active + dialing
	waiters []*Call
	shares  shares // each tenant's calls here, for Options.Share (pool_share.go)

	// retired: the node left the loop's upstreams (see retire). Owned by
	// the loop, as everything here.
	retired bool

	// stats is the node's shard for this loop. shownIdle and shownActive
	// are what this pool last added to its gauges, so publish adds only
	// the change, and pools of one node on one loop count together.
	stats                  *NodeStats
	shownIdle, shownActive int

	// tlsCfg is cfg.TLS for this node (tlsConfig), made from tlsFrom.
	tlsCfg, tlsFrom *tls.Config
}

func newPool(l *Loop, n *Node, cfg PoolConfig) *Pool {
	p := &Pool{loop: l, node: n, Addr: n.Addr, cfg: cfg, stats: n.shard(l.shard)}
	if DialOnLoop {
		p.sa, p.remote = sockaddr(n.Addr)
	}
	return p
}

// Node returns the node the pool connects to.
func (p *Pool) Node() *Node { return p.node }

// publish brings the Idle and Active gauges up to date. Every function
// that changes the free list or the total calls it last, so the gauges
// hold the pool's state whenever the loop is between callbacks. A reuse
// and a park move a connection between the gauges through their own
// counter (reused, parked); publish adds to the gauges' base only what
// else changed.
func (p *Pool) publish() {
	idle, active := len(p.idle), p.total-len(p.idle)
	if d := idle - p.shownIdle; d != 0 {
		p.shownIdle = idle
		p.stats.idle.Add(int64(d))
	}
	if d := active - p.shownActive; d != 0 {
		p.shownActive = active
		p.stats.active.Add(int64(d))
	}
}

// reused counts a connection taken from the free list for a call: one
// from Idle to Active in the gauges, through Reuses alone.
func (p *Pool) reused() {
	p.stats.Reuses.Add(1)
	p.shownIdle--
	p.shownActive++
}

// parked counts a connection released to the free list: one from Active
// to Idle in the gauges, through parks alone.
func (p *Pool) parked() {
	p.stats.parks.Add(1)
	p.shownIdle++
	p.shownActive--
}

// retire takes the pool out of service: its node left the loop's
// upstreams in a reload. Idle connections close now. A connection carrying
// a call closes when the call ends, after serving the calls still waiting.
// A request that began under the older configuration may still start a
// call here; it gets a connection of its own, closed after it. Once its
// last call has ended the pool holds no connection, and nothing refers to
// it once the last such request is gone.
func (p *Pool) retire() {
	p.retired = true
	for len(p.idle) > 0 {
		p.idle[len(p.idle)-1].closeFor(closeRetired) // which takes it off the list
	}
}

// Idle returns how many connections wait in the free list.
func (p *Pool) Idle() int { return len(p.idle) }

// acquire attaches a connection to c now, starts a dial for it, or queues it.
// fresh skips idle connections (used to retry after a stale one). A call
// whose tenant has its share of the pool already fails at once: it must
// not wait in the queue either, where it would stand before other
// tenants' calls.
func (p *Pool) acquire(c *Call, fresh bool) {
	if c.opts.Tenant != nil && c.sharedIn == nil {
		if !p.shares.enter(c.opts.Tenant, shareCap(p.cfg.MaxConns, c.opts.Share)) {
			c.fail(ErrPoolShare)
			return
		}
		c.sharedIn = p
	}
	if !fresh {
		for len(p.idle) > 0 {
			uc := p.idle[len(p.idle)-1]
			p.idle = p.idle[:len(p.idle)-1]
			// Its idle_timeout stays armed (see Conn.idleArmed).
			if !uc.reusable() {
				uc.closeFor(closeError)
				continue
			}
			p.reused()
			p.publish() // idle connections closed before this one
			c.attach(uc)
			return
		}
		p.publish() // unusable idle connections were closed
	}
	if p.total < p.cfg.MaxConns {
		p.dial(c)
		return
	}
	if len(p.waiters) >= p.cfg.MaxConns {
		c.fail(ErrQueueFull)
		return
	}
	p.waiters = append(p.waiters, c)
	c.waiting = p
	c.timer.Arm(p.cfg.AcquireTimeout)
}

// dequeue removes c from the waiters.
func (p *Pool) dequeue(c *Call) {
	for i, w := range p.waiters {
		if w == c {
			copy(p.waiters[i:], p.waiters[i+1:])
			p.waiters[len(p.waiters)-1] = nil
			p.waiters = p.waiters[:len(p.waiters)-1]
			break
		}
	}
	c.waiting = nil
}

// release returns a healthy connection after a complete exchange: to the
// first waiter, else to the free list, else closed when the list is full
// or the pool retired. max_idle defaults to max_conns, so a steady load
// never closes connections here only to dial them again moments later;
// idle_timeout trims what the load no longer needs, oldest first (the
// free list is LIFO, so the bottom connections are the ones left idle).
func (p *Pool) release(uc *Conn) {
	uc.call = nil
	if len(p.waiters) > 0 {
		c := p.waiters[0]
		p.dequeue(c)
		c.timer.Stop()
		c.attach(uc)
		return
	}
	if p.retired {
		uc.closeFor(closeRetired)
		return
	}
	if len(p.idle) >= p.cfg.MaxIdle {
		uc.closeFor(closeIdleCap)
		return
	}
	uc.state = connIdle
	p.idle = append(p.idle, uc)
	p.parked()
	p.publish()
	uc.idleSince = p.loop.clock.Elapsed()
	// A timer armed under a longer idle_timeout, before a reload shortened
	// it, would keep the connection past the new one: arm it again.
	if due := uc.idleSince + p.cfg.IdleTimeout; !uc.idleArmed || uc.idleDue > due {
		uc.idleArmed, uc.idleDue = true, due
		uc.timer.Arm(p.cfg.IdleTimeout)
	}
}

// remove forgets a closed connection and lets a waiter dial in its place.
func (p *Pool) remove(uc *Conn) {
	p.total--
	for i, c := range p.idle {
		if c == uc {
			p.idle = append(p.idle[:i], p.idle[i+1:]...)
			break
		}
	}
	if uc.dialFor != nil {
		uc.dialFor.dialing = nil
		uc.dialFor = nil
	}
	p.publish()
	if len(p.waiters) > 0 && p.total < p.cfg.MaxConns {
		c := p.waiters[0]
		p.dequeue(c)
		c.timer.Stop()
		p.dial(c)
	}
}
