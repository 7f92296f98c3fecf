// Prober: runs every upstream's active health checks off the loops, in
// batches with a bounded number in flight, spread in time by jitter.

package upstream

import (
	"bufio"
	"crypto/tls"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Prober probes the nodes it is given, each on its own schedule (the
// tiers of HealthCheckConfig). Nothing of it runs on a loop: loops only
// read the nodes' health (Node.Down). Between probes it sleeps until the
// next one is due, so a gateway whose checks come every 30 s or 2 min
// wakes for them and for nothing else. Safe for concurrent use.
type Prober struct {
	maxInFlight int
	batch       int
	spacing     time.Duration // between batches, while more than batch probes are due
	sem         chan struct{}
	wake        chan struct{} // capacity 1: the schedule changed (Set, or a probe ended before wakeAt)
	sleeping    atomic.Bool   // Run waits for wake with no probe queued (for tests)
	looks       atomic.Uint64 // times Run looked for due probes (for tests)

	mu      sync.Mutex
	targets map[*Node]*target
	wakeAt  time.Time // when Run looks next; zero while it waits for wake alone

	inFlight atomic.Int32
	peak     atomic.Int32 // the most probes ever in flight at once
	started  atomic.Uint64
}

// target is one node's schedule. Guarded by Prober.mu.
type target struct {
	node    *Node
	cfg     *HealthCheckConfig
	due     time.Time
	running bool
}

// NewProber returns a prober that starts at most batch probes per 100 ms
// and keeps at most maxInFlight in flight.
func NewProber(maxInFlight, batch int) *Prober {
	return &Prober{maxInFlight: maxInFlight, batch: batch, spacing: 100 * time.Millisecond,
		sem: make(chan struct{}, maxInFlight), wake: make(chan struct{}, 1), targets: map[*Node]*target{}}
}

// Set makes checks the nodes to probe, each with its upstream's check. A
// node already probed keeps its schedule unless the interval of the tier
// it is in got shorter: then its next probe moves to the earlier of the
// one queued and a random point within the new interval, so a move from
// 2m to 1s is felt within a second (spread over that second, not all at
// once). A longer interval takes effect after the probe already queued. A new node is first probed at a
// random point within its interval, so many nodes added at once are not
// probed at once. Nodes left out are no longer probed, and count as up.
// Run looks at the new schedule at once.
func (p *Prober) Set(checks map[*Node]*HealthCheckConfig) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for n, t := range p.targets {
		if checks[n] == nil {
			delete(p.targets, n)
			n.health.passes.Store(0)
			n.health.failures.Store(0)
			n.setDown(false)
		} else {
			t.reconfigure(checks[n], now)
		}
	}
	for n, cfg := range checks {
		if p.targets[n] == nil {
			p.targets[n] = &target{node: n, cfg: cfg, due: now.Add(jitter(cfg.New, 0, 1))}
		}
	}
	p.nudge()
}

// nudge makes Run look at the schedule again.
func (p *Prober) nudge() {
	select {
	case p.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// reconfigure gives t the check cfg. When the interval of the node's
// tier is shorter under cfg, the probe queued moves to min(due, now +
// jitter within the new interval). A probe running now schedules its
// successor under cfg when it ends (run). Prober.mu must be held.
func (t *target) reconfigure(cfg *HealthCheckConfig, now time.Time) {
	old := t.cfg
	t.cfg = cfg
	if next := t.node.tier(cfg); next < t.node.tier(old) && !t.running {
		if due := now.Add(jitter(next, 0, 1)); due.Before(t.due) {
			t.due = due
		}
	}
}

// jitter returns a random duration in [d×lo, d×hi).
func jitter(d time.Duration, lo, hi float64) time.Duration {
	return time.Duration(float64(d) * (lo + rand.Float64()*(hi-lo)))
}

// Run probes until stop is closed. It starts the probes that are due and
// sleeps until the next one is, or until Set or a probe that ended changes
// that; with no probe queued (no health checks configured, or every
// probe running) it waits for them alone.
func (p *Prober) Run(stop <-chan struct{}) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		tgs, wait := p.due(time.Now())
		for _, tg := range tgs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.run(tg, stop)
			}()
		}
		if wait < 0 {
			p.sleeping.Store(true)
			select {
			case <-stop:
				return
			case <-p.wake:
			}
			p.sleeping.Store(false)
			continue
		}
		t.Reset(wait)
		select {
		case <-stop:
			return
		case <-p.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// due marks up to batch targets whose time came as running and returns
// them, with how long Run may wait before it looks again: until the
// earliest probe queued, spacing when more were due than a batch takes,
// and -1 when none is queued. It notes that moment in wakeAt, so that a
// probe ending with an earlier successor wakes Run (run).
func (p *Prober) due(now time.Time) (out []*target, wait time.Duration) {
	p.looks.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	var next time.Time
	more := false
	for _, t := range p.targets {
		switch {
		case t.running:
		case now.Before(t.due):
			if next.IsZero() || t.due.Before(next) {
				next = t.due
			}
		case len(out) < p.batch:
			t.running = true
			out = append(out, t)
		default:
			more = true
		}
	}
	switch {
	case more:
		wait = p.spacing
	case next.IsZero():
		p.wakeAt = time.Time{}
		return out, -1
	default:
		wait = next.Sub(now)
	}
	p.wakeAt = now.Add(wait)
	return out, wait
}

// run probes one target when a place in flight frees, and schedules its
// next probe by its tier, with ±10 % jitter.
func (p *Prober) run(t *target, stop <-chan struct{}) {
	select {
	case p.sem <- struct{}{}:
	case <-stop:
		return
	}
	n := p.inFlight.Add(1)
	for peak := p.peak.Load(); n > peak && !p.peak.CompareAndSwap(peak, n); peak = p.peak.Load() {
	}
	p.started.Add(1)
	p.mu.Lock()
	cfg := t.cfg
	p.mu.Unlock()
	ok := probe(t.node.Addr, cfg)
	p.inFlight.Add(-1)
	<-p.sem
	p.mu.Lock()
	if p.targets[t.node] != t {
		// A reload removed this check while the probe ran: Set counted the
		// node up, and no later probe would undo a verdict given now.
		t.running = false
		p.mu.Unlock()
		return
	}
	next := t.node.checked(cfg, ok)
	if t.cfg != cfg { // a reload changed the check while this probe ran
		next = t.node.tier(t.cfg)
	}
	t.running = false
	t.due = time.Now().Add(jitter(next, 0.9, 1.1))
	if early := p.wakeAt.IsZero() || t.due.Before(p.wakeAt); early {
		p.wakeAt = t.due // one wake-up for the probes that end before Run looks
		p.nudge()
	}
	p.mu.Unlock()
}

// Peak returns the most probes that were ever in flight at once.
func (p *Prober) Peak() int { return int(p.peak.Load()) }

// Probes returns how many probes were started.
func (p *Prober) Probes() uint64 { return p.started.Load() }

// probe runs one check against addr: a TCP connect, or an HTTP request
// whose status must be expected.
func probe(addr string, cfg *HealthCheckConfig) bool {
	c, err := net.DialTimeout("tcp", addr, cfg.Timeout)
	if err != nil {
		return false
	}
	defer c.Close()
	if cfg.TCP {
		return true
	}
	_ = c.SetDeadline(time.Now().Add(cfg.Timeout))
	if cfg.TLS != nil {
		tc := cfg.TLS
		if tc.ServerName == "" {
			tc = tc.Clone() // off the loops, once per probe: cheap beside the handshake
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		t := tls.Client(c, tc)
		if err := t.Handshake(); err != nil {
			return false
		}
		c = t
	}
	host := cfg.Host
	if host == "" {
		host = addr
	}
	req := cfg.Method + " " + cfg.Path + " HTTP/1.1\r\nHost: " + host + "\r\nUser-Agent: loopgate-health\r\nConnection: close\r\n\r\n"
	if _, err := c.Write([]byte(req)); err != nil {
		return false
	}
	line, err := bufio.NewReaderSize(c, 256).ReadSlice('\n')
	if err != nil || len(line) < 12 || string(line[:5]) != "HTTP/" {
		return false
	}
	status, err := strconv.Atoi(string(line[9:12]))
	return err == nil && cfg.passes(status)
}
