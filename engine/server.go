// Server: the process-wide data plane: start, graceful shutdown, the gnet
// event handler that dispatches every connection's events to its loop, and
// the state shared by all loops (the config state, bans, limits, buffer
// budget, resilience policies).

package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/loopgate/loopgate/engine/accesslog"
	"github.com/loopgate/loopgate/engine/alert"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/policy"
	"github.com/loopgate/loopgate/upstream"
	"github.com/panjf2000/gnet/v2"
)

// Server is a running data plane. Create it with New, start it with Run, and
// stop it with Shutdown; Reload changes its config while it runs. Its
// methods are safe for concurrent use.
type Server struct {
	gnet.BuiltinEventEngine
	durable // what outlives every reload, by stable name

	// state is the running config version. Loops compare it with the
	// version they run on every request (loop.current) and adopt a new one
	// on the loop; an exchange keeps the snapshot it began with.
	state     atomic.Pointer[state]
	reloading sync.Mutex // serialises Reload and Apply, never taken by a loop
	pin       bool       // pin: fixed at New, like listen and loops (see config.Compare)

	loops    []*loop // one slot per gnet loop, claimed on first use
	edge     *edge   // the client listeners, plain and HTTPS (tls.go)
	eng      atomic.Pointer[gnet.Engine]
	booted   chan struct{} // closed once every loop accepts (installAcceptors)
	stopped  chan struct{} // closed when Run returns
	draining atomic.Bool
	clients  atomic.Int64  // open client connections, all loops
	refused  atomic.Uint64 // connections closed at accept: max_connections
	buffered atomic.Int64  // bytes client connections hold in memory (see clientConn.account)

	bufferedPeak  atomic.Int64  // highest buffered since returnMemory last looked
	burst         chan struct{} // capacity 1: a peak reached releaseFloor (notePeak), or a version was applied (noteApply)
	memoryReturns atomic.Uint64 // see returnMemory
	lastApply     atomic.Int64  // Unix ns of the last config version applied by a reload or write, for returnMemory

	metricSet *metrics.Set // writes the registry out (WriteMetrics)
	alerts    *alert.Dispatcher
	summary   summarizer // GET /summary's ranking (summary.go)

	accepts    acceptStats
	installing atomic.Int32          // loops still moving to their own accept
	bootErr    atomic.Pointer[error] // why a loop could not, if one could not
	ticked     sync.Once             // OnTick's one job

	logs *accesslog.Writer // the access and error logs (accesslog.go)
}

// durable is the state the Server owns across reloads, keyed by stable
// names (route id, route and filter name, upstream name and node address).
// Compiled snapshots refer to it and never hold a copy of their own, so a
// recompile keeps it whole.
type durable struct {
	services *services // what the filters keep: runtime IP bans, revocations, the rate limits' store
	metrics  *registry // route, filter and loop metrics, and the upstream nodes

	resilience *policy.Registry // breakers, isolation limiters, retry budgets, outlier ejection, the prober

	tunnels *tunnelRegistry // open tunnels and their series (tunnel_metrics.go)
}

// New validates nothing itself (config.Parse already did) and prepares a
// server for cfg.
func New(cfg *config.Config) (*Server, error) {
	installNotices() // what compiling logs is a JSON line too
	n := cfg.EventLoops()
	s := &Server{
		durable: durable{services: newServices(), metrics: newRegistry(n),
			resilience: policy.NewRegistry(n, cfg.HealthChecks.MaxInFlight, cfg.HealthChecks.Batch), tunnels: new(tunnelRegistry)},
		pin:    cfg.Pin,
		booted: make(chan struct{}), stopped: make(chan struct{}), burst: make(chan struct{}, 1), metricSet: metrics.NewSet(),
		alerts: alert.New(alertOptions(&cfg.Alerts)),
	}
	snap, err := compile(cfg, n, &s.durable, nil, nil, false)
	if err != nil {
		return nil, err
	}
	if s.edge, err = newEdge(s, cfg); err != nil {
		return nil, err
	}
	snap.activate(s.resilience.Prober())
	s.state.Store(&state{version: 1, cfg: cfg, snap: snap})
	s.metricSet.RegisterMetricsWriter(s.writeSeries)
	for _, w := range s.services.metricsWriters() { // the rate limits'
		s.metricSet.RegisterMetricsWriter(w)
	}
	s.metricSet.RegisterMetricsWriter(s.writeResilienceSeries)
	s.metricSet.RegisterMetricsWriter(s.writeAcceptSeries)
	s.metricSet.RegisterMetricsWriter(s.writeTunnelSeries)
	s.metricSet.RegisterMetricsWriter(s.writeTLSSeries)
	s.metricSet.RegisterMetricsWriter(s.alerts.WritePrometheus)
	s.loops = make([]*loop, n)
	for i := range s.loops {
		s.loops[i] = newLoop(s, i)
	}
	if err := s.initLogs(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// resolveListen turns port 0 into a concrete free port. Every loop binds its
// own SO_REUSEPORT listener, and each would otherwise get a different port.
func resolveListen(addr string) (string, error) {
	if _, port, err := net.SplitHostPort(addr); err != nil || port != "0" {
		return addr, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("engine: listen %s: %w", addr, err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// ErrLoopsStopped is Run's error when the event loops stopped without a
// Shutdown: a process should exit with a failure status, for its
// supervisor to restart it.
var ErrLoopsStopped = errors.New("engine: the event loops stopped without a shutdown")

// quietWorkerPool closes gnet's worker pool while no dial needs it
// (upstream.QuietWorkerPool): the pool is the process's, shared by servers.
var quietWorkerPool sync.Once

// Run serves until Shutdown. It returns after every loop has stopped: nil
// after Shutdown, and an error when the loops could not start or stopped
// without one.
func (s *Server) Run() error {
	defer close(s.stopped)
	startNotices(s)
	s.alerts.Start() // the alerts raised from now on are this server's
	defer s.alerts.Close()
	defer s.services.close() // the rate limits' Redis workers and key sweeper stop with the loops
	s.logs.Start()
	defer s.logs.Stop()                          // after the loops: writes what they left in the rings
	quietWorkerPool.Do(upstream.QuietWorkerPool) // once per process, before the first dial
	stop := make(chan struct{})
	defer close(stop)
	go s.returnMemory(stop)
	go s.watchCertificates(stop)
	go s.resilience.Prober().Run(stop)
	returnStartScratch(len(s.state.Load().cfg.Routes))
	addrs := make([]string, len(s.edge.addrs))
	for i, a := range s.edge.addrs {
		addrs[i] = "tcp://" + a
	}
	err := gnet.Rotate(s, addrs,
		gnet.WithMulticore(true),
		gnet.WithNumEventLoop(len(s.loops)),
		gnet.WithLockOSThread(s.pin),
		gnet.WithReusePort(true),
		// SO_REUSEADDR, as nginx and Go's net.Listen set it: a restart must not
		// wait out the TIME_WAIT of connections the last process closed.
		gnet.WithReuseAddr(true),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		gnet.WithReadBufferCap(readBufferCap),
		gnet.WithLogger(gnetLogger{}),
		gnet.WithTicker(true), // OnTick: one call, once every loop exists
	)
	for _, l := range s.loops {
		l.closeHalves() // the loops are stopped: what only their ticks would have closed
	}
	if p := s.bootErr.Load(); p != nil && !s.draining.Load() {
		return *p
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	// gnet.Run returns nil however its loops ended: a loop that fails
	// (epoll_wait, or gnet's own accept where the loop does not accept
	// itself) stops the engine quietly. Only Shutdown is a clean end.
	if !s.draining.Load() {
		return fmt.Errorf("%w (%s)", ErrLoopsStopped, lastGnetError())
	}
	return nil
}

// OnTick is called by gnet on its ticker goroutine right after every loop
// was created, and then after the delay it returns: the first call moves
// the listeners to the loops' own accept (accept_linux.go), and there is
// no second.
func (s *Server) OnTick() (time.Duration, gnet.Action) {
	s.ticked.Do(s.installAcceptors)
	return time.Duration(math.MaxInt64), gnet.None
}

// installed counts one loop done with installAcceptors: the last one
// closes Ready, or stops the engine if a loop failed.
func (s *Server) installed(err error) {
	if err != nil {
		s.bootErr.CompareAndSwap(nil, &err)
	}
	if s.installing.Add(-1) != 0 {
		return
	}
	if s.bootErr.Load() != nil {
		s.bootFailed(*s.bootErr.Load())
		return
	}
	close(s.booted)
}

// bootFailed stops the engine before it served: Run returns err.
func (s *Server) bootFailed(err error) {
	s.bootErr.CompareAndSwap(nil, &err)
	if eng := s.eng.Load(); eng != nil {
		go func() { _ = eng.Stop(context.Background()) }() // Stop waits; never on a loop
	}
}

// Ready is closed once the listener accepts connections.
func (s *Server) Ready() <-chan struct{} { return s.booted }

// Requests returns how many requests the server has started, for tests and
// the control plane. Safe for concurrent use.
func (s *Server) Requests() uint64 {
	n := uint64(0)
	for _, l := range s.loops {
		n += l.stats.requests.Load()
	}
	return n
}

// Draining reports whether Shutdown has begun.
func (s *Server) Draining() bool { return s.draining.Load() }

// RefusedConnections returns how many connections were closed at accept
// because max_connections were open.
func (s *Server) RefusedConnections() uint64 { return s.refused.Load() }

// BufferedBytes returns the bytes client connections hold in memory, as
// max_buffered_bytes counts them.
func (s *Server) BufferedBytes() int64 { return s.buffered.Load() }

// Clients returns the number of open client connections.
func (s *Server) Clients() int64 { return s.clients.Load() }

// Shutdown stops taking new requests, lets in-flight ones finish until ctx is
// done, closes idle keep-alive connections, and stops every loop. In-flight
// requests still running when ctx ends are cut off.
func (s *Server) Shutdown(ctx context.Context) error {
	if !s.draining.CompareAndSwap(false, true) {
		return errors.New("engine: shutdown already in progress")
	}
	s.closeListeners() // new clients are refused from now on (drain.go)
	for _, l := range s.loops {
		if el := l.eventLoop(); el != nil {
			_ = el.Execute(ctx, gnet.RunnableFunc(func(context.Context) error {
				l.enter()
				l.drain()
				l.leave()
				return nil
			}))
		}
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for s.clients.Load() > 0 {
		select {
		case <-ctx.Done():
			goto stop
		case <-tick.C:
		}
	}
stop:
	for _, l := range s.loops {
		l.stopTicker()
	}
	if eng := s.eng.Load(); eng != nil {
		// Engine.Stop polls for the end every 500 ms. Given a context that is
		// already done it only starts the stop; Run returning is the end.
		begun, begin := context.WithCancel(context.Background())
		begin()
		if err := eng.Stop(begun); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("engine: stop: %w", err)
		}
		wait := time.NewTimer(5 * time.Second)
		defer wait.Stop()
		select {
		case <-s.stopped:
		case <-wait.C:
			return errors.New("engine: stop: loops still running after 5s")
		}
	}
	return ctx.Err()
}

// OnBoot records the engine so Shutdown can stop it. Ready waits for the
// loops to accept (OnTick).
func (s *Server) OnBoot(eng gnet.Engine) gnet.Action {
	s.eng.Store(&eng)
	return gnet.None
}

// OnOpen tells apart an accepted client from what the loop registered
// itself: an upstream connection it is adopting (see Adopt) or one the
// dialer enrolled with its context attached, the loop's round bell, or a
// listener's accept gate.
func (s *Server) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	l := s.loopOf(c.EventLoop())
	if a := l.adopting; a != nil {
		l.adopting = nil
		c.SetContext(a)
	}
	switch v := c.Context().(type) {
	case *roundBell, *acceptor:
		return nil, gnet.None
	case *upstream.Conn:
		l.enter()
		v.Opened(c)
		l.leave()
		return nil, gnet.None
	}
	if s.draining.Load() {
		return nil, gnet.Close
	}
	if s.clients.Load() >= s.state.Load().snap.maxConnections {
		s.refused.Add(1)
		return nil, gnet.Close
	}
	l.enter()
	ok := l.accept(c)
	l.leave()
	if !ok {
		return nil, gnet.Close
	}
	// Shutdown drains only loops it has seen; a loop claimed by this very
	// connection while Shutdown began would never close it. The drain
	// check after accepting closes that window.
	if s.draining.Load() {
		return nil, gnet.Close
	}
	return nil, gnet.None
}

// OnTraffic hands readable bytes to the connection's owner.
func (s *Server) OnTraffic(c gnet.Conn) gnet.Action {
	switch v := c.Context().(type) {
	case *clientConn:
		v.loop.enter()
		v.traffic()
		v.loop.leave()
	case *roundBell:
		v.ring(c)
	case *upstream.Conn:
		l := v.Loop().Host().(*loop)
		l.enter()
		closeNow := v.Traffic()
		if cc := l.pendingHead; cc != nil {
			cc.flushHead()
		}
		l.leave()
		if closeNow {
			return gnet.Close // inline, rather than a task queued to the loop
		}
	case *acceptor:
		v.l.enter()
		v.ready(c)
		v.l.leave()
	case *tunnelEnd:
		l := v.t.loop
		l.enter()
		v.traffic()
		l.leave()
	}
	return gnet.None
}

// OnClose runs the owner's close handling, deferred to the end of the current
// callback when gnet closes a connection from inside one of ours (a failed
// Write closes synchronously).
func (s *Server) OnClose(c gnet.Conn, err error) gnet.Action {
	switch v := c.Context().(type) {
	case *clientConn:
		v.loop.closed(v, nil, err)
	case *upstream.Conn:
		v.Loop().Host().(*loop).closed(nil, v, err)
	case *acceptor:
		v.closed()
	case *tunnelEnd:
		// Not deferred like the others: a tunnel's handlers check its
		// state after every write, and this may run inside one of them.
		l := v.t.loop
		l.enter()
		v.closed(err)
		l.leave()
	}
	return gnet.None
}

// loopOf finds the loop state for el, claiming a free slot the first time a
// loop is seen. Each loop claims only for itself, so this is lock-free.
func (s *Server) loopOf(el gnet.EventLoop) *loop {
	id := loopID(el)
	for _, l := range s.loops {
		if l.elID.Load() == id {
			return l
		}
	}
	for _, l := range s.loops {
		if l.claimed.CompareAndSwap(false, true) {
			l.start(el)
			return l
		}
	}
	panic("engine: more gnet loops than configured")
}

// Addrs returns the client listeners' addresses, in config order, with
// port 0 resolved to the port bound.
func (s *Server) Addrs() []string { return append([]string(nil), s.edge.addrs...) }

// Addr returns the address the first listener is bound to (useful with
// port 0). Valid after Ready is closed.
func (s *Server) Addr() (net.Addr, error) {
	eng := s.eng.Load()
	if eng == nil {
		return nil, errors.New("engine: not running")
	}
	fd, err := eng.DupListener("tcp", s.edge.addrs[0])
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		return nil, err
	}
	switch a := sa.(type) {
	case *syscall.SockaddrInet4:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}, nil
	case *syscall.SockaddrInet6:
		return &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}, nil
	}
	return nil, fmt.Errorf("engine: unexpected listener address %T", sa)
}
