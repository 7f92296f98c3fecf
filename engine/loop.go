// loop: the state one gnet event loop owns, its ticker and deferred closes.

package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log"
	"net"
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/wheel"
	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/upstream"
	"github.com/panjf2000/gnet/v2"
)

// loop is everything a request needs on one event loop. Fields below the
// atomics are owned by the loop goroutine; nothing else may touch them.
type loop struct {
	srv     *Server
	index   int
	claimed atomic.Bool    // set once by the loop that owns the slot
	el      atomic.Value   // gnet.EventLoop, written once at claim
	elID    atomic.Uintptr // el's data word (loopID), written with it: what loopOf compares
	stop    chan struct{}

	// refresh is posted by Apply so that a loop adopts a new config
	// version (and retires the pools it no longer needs) even while no
	// request arrives on it. Made by newLoop, before any goroutine runs.
	refresh gnet.Runnable

	// state is the config version the loop runs (see current); the
	// scratch sizes follow it.
	state   *state
	flight  *flightCount // this loop's count of state's routed exchanges in flight (snapshot.flights)
	wheel   *wheel.Wheel
	up      *upstream.Loop
	req     codec.Request // scratch: the head being parsed
	scratch []byte        // router lowercasing
	out     []byte        // response heads and error bodies being built
	heads   pool.Local    // upstream request heads: built here, released here when their call ends
	path    []byte        // the normalised path of the request being started
	host    []byte        // its normalised Host, without the port

	// pendingHead is the client whose response head waits in out for body
	// bytes from the same upstream read; flushed before OnTraffic returns.
	pendingHead *clientConn

	spoolBuf []byte        // read buffer for moving spooled bytes back out
	spooling []*clientConn // clients with spooled bytes, pumped every tick
	pumping  []*clientConn // spare slice for pumpSpools
	free     []*exchange   // exchange free list
	clients  clientList    // open client connections, for draining
	halves   *halfOpen     // half-closed tunnels' duplicated descriptors, closed if the loop stops first (tunnel_half.go)

	depth    int          // nesting of our callbacks; closes wait for 0
	clock    int64        // loopstat.Now as read in the current callback; 0 = not yet (see now)
	stamped  bool         // clock began a duration (now gave it out); an end must read anew (see fresh)
	deferred []closeEvent // closes that arrived while depth > 0

	lastID [24]byte // the last request ID: 12 random hex digits per loop, then a hex counter

	permitWaiters waitList // requests waiting for an isolation permit (isolationqueue.go)
	grantDue      bool     // a permit was given back on this loop while some waited

	// Idle sleeping (see tickLoop): rest says whether a callback ran
	// since the last tick, or the ticker sleeps; slow tells the ticker it
	// sleeps, wakeAt until when (loopstat.Now; 0 = until woken), and
	// wakeUp wakes it through wake (wakeUpFn, made once: a method value
	// handed to the wheel at each sleep would allocate). quietRounds counts the ticks in a row
	// that found rest quiet, up to sleepAfterQuiet.
	rest        restState
	quietRounds int
	slow        atomic.Bool
	wakeAt      atomic.Int64
	wake        chan struct{} // capacity 1: a wake-up is never waited for
	wakeUpFn    func()

	adopting any        // what Adopt is registering (*upstream.Conn or *roundBell); OnOpen takes it
	bell     *roundBell // made at the first ring (roundbell_linux.go)

	stats loopStats // written by the loop, read by WriteMetrics
	inbox inbox     // resumes of parked exchanges, from any goroutine (inbox.go)
	log   loopLog   // this loop's end of the access and error logs
	tls   loopTLS   // this loop's part in its clients' TLS sessions (tls.go)
}

type closeEvent struct {
	client *clientConn
	up     *upstream.Conn
	err    error
}

func (l *loop) eventLoop() gnet.EventLoop {
	if v := l.el.Load(); v != nil {
		return v.(gnet.EventLoop)
	}
	return nil
}

// loopID names el by the pointer in its data word: gnet's loops are all
// one pointer type (*eventloop), so equal pointers are equal loops, and a
// comparison of two words replaces an interface load, a type assertion
// and an interface comparison per connection opened (loopOf).
func loopID(el gnet.EventLoop) uintptr {
	return uintptr((*[2]unsafe.Pointer)(unsafe.Pointer(&el))[1])
}

// newLoop prepares the slot for loop index of s; start runs it.
func newLoop(s *Server, index int) *loop {
	l := &loop{srv: s, index: index}
	l.wakeUpFn = l.wakeUp
	l.initTLS()
	l.refresh = gnet.RunnableFunc(func(context.Context) error {
		l.enter()
		l.current()
		l.leave()
		return nil
	})
	return l
}

// start initialises the loop on its own goroutine and starts its ticker.
func (l *loop) start(el gnet.EventLoop) {
	l.wheel = wheel.New(wheel.DefaultTick, 1024)
	l.wheel.SetClock(l.timerNow)
	l.up = upstream.NewLoop(el, l, wheelClock{l.wheel}, l.srv.state.Load().snap.respLimits)
	l.host = make([]byte, 0, 256)
	l.out = make([]byte, 0, 4096)
	l.spoolBuf = make([]byte, 256<<10)
	l.clients.init()
	l.inbox.init(l)
	l.current()
	var seed [6]byte
	_, _ = rand.Read(seed[:])
	hex.Encode(l.lastID[:12], seed[:])
	copy(l.lastID[12:], "000000000000")
	if l.srv.pin {
		if err := pinThread(l.index); err != nil {
			log.Printf("engine: loop %d: cpu affinity: %v", l.index, err)
		}
	}
	l.stop = make(chan struct{})
	l.wake = make(chan struct{}, 1)
	l.elID.Store(loopID(el))
	l.el.Store(el)
	go l.tickLoop(el, l.stop)
}

// current returns the snapshot new work on the loop uses: the server's
// running version, adopted first if the loop has not seen it yet. One
// atomic load when nothing changed. On the loop only.
func (l *loop) current() *snapshot {
	if st := l.srv.state.Load(); st != l.state {
		l.adopt(st)
	}
	return l.state.snap
}

// adopt makes st the loop's config version: each of its upstreams gets
// this loop's group, built from the loop's pools (a node keeps its pool and
// connections; the pools of nodes no longer configured drain and close),
// and the loop's limits and scratch follow the new settings. Exchanges
// already running keep the snapshot they began with, and its groups.
func (l *loop) adopt(st *state) {
	snap := st.snap
	gcs := make([]*upstream.GroupConfig, len(snap.upstreams))
	for i, d := range snap.upstreams {
		gcs[i] = &d.group
	}
	for i, g := range l.up.Update(gcs) {
		snap.upstreams[i].loops[l.index] = g
	}
	l.up.SetLimits(snap.respLimits)
	// A raw '\' grows to "%5C" when normalised: three bytes per URI byte
	// at most, so normalising and matching never allocate.
	if n := 3 * snap.limits.MaxURIBytes; cap(l.path) < n {
		l.path = make([]byte, 0, n)
		l.scratch = make([]byte, 0, n)
	}
	l.state = st
	l.flight = &snap.flights[l.index]
	l.srv.metrics.adopted[l.index].Store(st.version) // the metrics' sweep waits for every loop
}

// Index is the loop's index (upstream.Host): the shard it writes.
func (l *loop) Index() int { return l.index }

// Guard runs f as the loop runs its own callbacks (upstream.Host).
func (l *loop) Guard(f func()) {
	l.enter()
	f()
	l.leave()
}

var _ upstream.Host = (*loop)(nil)

// wheelClock is the loop's timer wheel as the upstream side sees it.
type wheelClock struct{ w *wheel.Wheel }

var _ upstream.Clock = wheelClock{}

func (c wheelClock) Now() time.Time { return c.w.Now() }

func (c wheelClock) Elapsed() time.Duration { return c.w.SinceTick(0) }

func (c wheelClock) NewTimer(fire func()) upstream.Timer {
	t := &wheelTimer{w: c.w}
	t.t.Init(fire)
	return t
}

// wheelTimer is a wheel.Timer with its wheel, as an upstream.Timer.
type wheelTimer struct {
	w *wheel.Wheel
	t wheel.Timer
}

func (t *wheelTimer) Arm(d time.Duration) { t.w.Arm(&t.t, d) }
func (t *wheelTimer) Stop()               { t.t.Stop() }

// restState is where a loop is between ticks: a callback of ours ran
// since the last tick (restStirred), none did (restQuiet), or its ticker
// sleeps (restAsleep). Only the loop goroutine reads or writes it.
type restState uint8

const (
	restStirred restState = iota
	restQuiet
	restAsleep
)

// sleepAfterQuiet is how many ticks in a row must find no callback before
// the ticker sleeps (100 ms): a sleep looks at every slot of the wheel for
// the earliest timer (wheel.Sleep, about 20,000 instructions with 10,000
// idle connections) and costs the ticker a wake-up, so a loop whose
// traffic comes every few ticks keeps ticking rather than sleep at each gap.
const sleepAfterQuiet = 10

// tickLoop drives the wheel: gnet has no timers, so a goroutine posts the
// tick to the loop, every wheel tick while the loop has traffic. When
// sleepAfterQuiet ticks in a row found that no callback of ours ran and
// no timer fired (quiet: idle keep-alive connections, idle tunnels, idle
// pooled connections, or nothing open), and no spool, no request waiting
// for a permit and no paused listener (accept.go) is left to poll, the
// tick puts the ticker to sleep (slow) until the wheel's earliest timer
// is due (a keep-alive or tunnel idle timeout, an idle upstream
// connection's, a health check's), or until woken when none is armed: an
// idle gateway wakes only for timers that are due, whatever it holds
// open, as nginx does; wake-ups every tick cost about 1 % of a CPU on a
// 2-core VM, and one idle tunnel kept them going. The first callback after a sleep wakes the ticker and brings the
// wheel's time up to date before it handles its event (enter, wakeUp), so
// nothing reads the time the loop fell asleep at; any timer armed then
// counts from the callback's clock as always. Advance skips the ticks a
// sleep passed over.
func (l *loop) tickLoop(el gnet.EventLoop, stop chan struct{}) {
	t := time.NewTimer(wheel.DefaultTick)
	defer t.Stop()
	tick := gnet.RunnableFunc(func(context.Context) error {
		asleep := l.rest == restAsleep
		if l.rest == restStirred {
			l.quietRounds = 0
		} else if l.quietRounds < sleepAfterQuiet {
			l.quietRounds++
		}
		l.rest = restStirred // the tick's own enter is no event
		l.enter()
		l.wheel.Awake()
		if l.wheel.Advance(time.Now()) {
			// A timer that fired is work too: one re-armed every tick (a
			// paused tunnel's flow check, a lingering close) keeps the
			// loop ticking rather than sleeping a tick at a time, each
			// sleep a walk of the wheel.
			l.quietRounds = 0
		}
		if l.permitWaiters.head != nil {
			l.grantPermits()
		}
		l.pumpSpools()
		if l.quietRounds == sleepAfterQuiet && len(l.spooling) == 0 && l.permitWaiters.head == nil && l.srv.accepts.paused.Load() == 0 {
			l.sleep()
		} else {
			l.rest = restQuiet
			if asleep { // woken for a timer that left work: tick on
				l.slow.Store(false)
				l.nudge()
			}
		}
		l.leave()
		return nil
	})
	for {
		select {
		case <-stop:
			return
		case <-l.wake:
		case <-t.C:
			if el.Execute(context.Background(), tick) != nil {
				return // engine stopped
			}
		}
		t.Stop()
		if !l.slow.Load() {
			t.Reset(wheel.DefaultTick)
		} else if until := l.wakeAt.Load(); until != 0 {
			t.Reset(max(time.Duration(until-loopstat.Now()), wheel.DefaultTick))
		} // else asleep until woken
	}
}

// sleep puts the ticker to sleep until the wheel's earliest timer, or
// until woken when none is armed, and wakes the ticker to read the new
// deadline. On the loop, from the tick.
func (l *loop) sleep() {
	until := int64(0)
	if d, ok := l.wheel.Sleep(l.wakeUpFn, time.Now()); ok {
		until = loopstat.Now() + int64(d)
	}
	l.rest = restAsleep
	l.wakeAt.Store(until)
	l.slow.Store(true)
	l.nudge()
}

// wakeUp ends the ticker's sleep: a callback began (enter), or a timer was
// armed outside one that is due before the sleep would end (wheel.Sleep).
// The wheel's time is brought up to now first (wheel.Wake), so the event
// reads the time it happened at, not the time the loop fell asleep at. On
// the loop.
func (l *loop) wakeUp() {
	if l.rest != restAsleep {
		return
	}
	l.rest = restStirred
	l.wheel.Wake(time.Now())
	l.slow.Store(false)
	l.nudge()
}

// nudge makes the ticker read slow and wakeAt again.
func (l *loop) nudge() {
	select {
	case l.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

func (l *loop) stopTicker() {
	// el is stored after stop is made, so a non-nil el makes stop safe to read.
	if l.eventLoop() != nil {
		select {
		case <-l.stop:
		default:
			close(l.stop)
		}
	}
}

// enter and leave bracket every callback into our code. Closes that gnet
// reports while we are inside one (a failed Write closes synchronously) are
// queued and handled when the outermost callback returns, so no handler ever
// sees its own state torn down under it. Resumes the loop posted itself (a
// sub-request's answer) are delivered there too, after the closes, so a
// resume for an exchange whose client just left is dropped. Permits given
// back during the callback then go to requests waiting for them.
//
// The outermost enter also tells the ticker the loop is not quiet (one
// load and a branch while it ticks on), and wakes it after a sleep.
func (l *loop) enter() {
	if l.depth == 0 {
		l.clock, l.stamped = 0, false
		if l.rest != restStirred {
			l.stir()
		}
	}
	l.depth++
}

// stir notes a callback since the last tick, and wakes the ticker if it
// sleeps. Kept out of line so that enter stays inlined: it runs at most
// once per tick under traffic.
//
//go:noinline
func (l *loop) stir() {
	if l.rest == restAsleep {
		l.wakeUp()
	}
	l.rest = restStirred
}

// now is the loop's monotonic clock (loopstat.Now) for the timestamps that
// begin a duration on the request path, read once per callback: a
// request's start and its upstream call's start are the time the event
// that caused them began to be handled, as nginx stamps a whole
// event-loop iteration with one time. A clock read costs tens of
// nanoseconds on a virtual machine, and a plain request made eight of
// them. Outside a callback it reads the clock. It is also upstream.Host's
// Now.
func (l *loop) now() int64 {
	if l.depth == 0 {
		return loopstat.Now()
	}
	if l.clock == 0 {
		l.clock = loopstat.Now()
	}
	l.stamped = true
	return l.clock
}

// fresh is the clock for a timestamp that ends a duration (an exchange's,
// a call's or an isolation permit's end, a call's first response byte).
// When the callback's reading began a duration (now gave it out), it
// reads the clock anew, so that one begun and ended in the same callback
// (a local reply, a refused connect) does not come out 0, and the new
// reading becomes the callback's. Otherwise the callback's reading, taken after every start
// stamped in an earlier callback, ends the duration as well: the ends of
// one request (its call's, its permit's, its own) share one reading.
func (l *loop) fresh() int64 {
	if l.depth == 0 {
		return loopstat.Now()
	}
	if l.clock == 0 || l.stamped {
		l.clock = loopstat.Now()
		l.stamped = false
	}
	return l.clock
}

// timerNow is the timer wheel's clock: the callback's reading when there
// is one, so arming a deadline reads no clock of its own (a plain request
// arms three). A deadline armed from it may fire up to the callback's own
// run time early, microseconds against timeouts of milliseconds or more;
// nginx arms its timers from the event-loop iteration's time too.
func (l *loop) timerNow() int64 {
	if l.depth == 0 || l.clock == 0 {
		return l.fresh()
	}
	return l.clock
}

// Now is now, for the upstream side (upstream.Host).
func (l *loop) Now() int64 { return l.now() }

// Fresh is fresh, for the upstream side (upstream.Host).
func (l *loop) Fresh() int64 { return l.fresh() }

func (l *loop) leave() {
	if l.depth == 1 {
	settle:
		for {
			for len(l.deferred) > 0 {
				ev := l.deferred[0]
				copy(l.deferred, l.deferred[1:])
				l.deferred = l.deferred[:len(l.deferred)-1]
				l.handleClose(ev)
			}
			switch {
			case l.inbox.local:
				l.inbox.local = false
				l.drainInbox()
			case l.grantDue:
				l.grantPermits()
			default:
				break settle
			}
		}
	}
	l.depth--
}

// closed is gnet's OnClose for a connection of this loop.
func (l *loop) closed(cc *clientConn, uc *upstream.Conn, err error) {
	ev := closeEvent{client: cc, up: uc, err: err}
	if l.depth > 0 {
		if cc != nil {
			cc.peerGone = true
		}
		l.deferred = append(l.deferred, ev)
		return
	}
	l.enter()
	l.handleClose(ev)
	l.leave()
}

func (l *loop) handleClose(ev closeEvent) {
	if ev.client != nil {
		ev.client.onClosed()
	} else {
		ev.up.Closed(ev.err)
	}
}

// accept sets up a new client connection. It reports false when the
// connection is refused (an HTTPS one past tls.max_handshakes); the caller
// closes it.
func (l *loop) accept(c gnet.Conn) bool {
	cc := &clientConn{gc: c, loop: l}
	if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		cc.peer, _ = netip.AddrFromSlice(ta.IP)
		cc.peer = cc.peer.Unmap()
	}
	cc.timer.Init(cc.onTimer)
	c.SetContext(cc)
	l.clients.push(cc)
	l.srv.clients.Add(1)
	l.stats.conns.Add(1)
	e := l.srv.edge
	cc.listener = e.listenerOf(c)
	cc.redirect = e.redirect[cc.listener]
	if cfg := e.configs[cc.listener]; cfg != nil {
		cc.hsts = e.hsts[cc.listener]
		if !cc.startTLS(cfg) {
			cc.release()
			return false
		}
		return true
	}
	cc.idle(l.current().timeouts.headerRead)
	cc.headClock = true
	return true
}

// takeOut returns loop.out emptied for a new head or error body. A head
// held back for coalescing (pendingHead) is written out first: between a
// ResponseHead and its body, a connection handed to a waiting call can make
// that call answer its own client, and the held head must not be lost or
// sent to the wrong client.
func (l *loop) takeOut() []byte {
	if cc := l.pendingHead; cc != nil {
		cc.flushHead()
	}
	return l.out[:0]
}

// pumpSpools moves spooled response bytes to clients that have caught up,
// and finishes exchanges whose last bytes have left the spool. gnet reports
// no "writable" event, so this runs on the tick.
func (l *loop) pumpSpools() {
	list := l.spooling
	l.spooling, l.pumping = l.pumping[:0], list
	for i, cc := range list {
		list[i] = nil
		if cc.state == stateClosed {
			continue
		}
		before := cc.spool.Sent()
		if err := cc.spool.Pump(cc.sink(), cc.spoolConfig(), l.spoolBuf); err != nil {
			cc.close()
			continue
		}
		if cc.spool.Pending() {
			// A client that stops reading is given up on after the idle
			// timeout, not held (with its file) until shutdown.
			now := l.wheel.Now()
			switch {
			case cc.spool.Sent() != before:
				cc.spoolStuck = time.Time{}
			case cc.spoolStuck.IsZero():
				cc.spoolStuck = now
			case now.Sub(cc.spoolStuck) > l.state.snap.timeouts.idle:
				cc.close()
				continue
			}
			l.spooling = append(l.spooling, cc)
			cc.account()
			continue
		}
		cc.spoolStuck = time.Time{}
		cc.account()
		if ex := cc.ex; ex != nil && ex.phase == phaseSpooled {
			cc.finish()
		}
	}
}

// drain starts graceful shutdown on this loop: idle connections close now,
// busy ones after their current response.
func (l *loop) drain() {
	for cc := l.clients.head.next; cc != &l.clients.head; {
		next := cc.next
		if cc.state == stateIdle && cc.inbound() == 0 {
			cc.close()
		} else {
			cc.closeAfter = true
		}
		cc = next
	}
}

// nextRequestID writes a fresh request ID into dst: the loop's random prefix
// and a hex counter. Unique per process run without coordination. The
// counter is incremented in its hex digits, where a carry is rare, rather
// than formatted anew for every request.
func (l *loop) nextRequestID(dst *[24]byte) int {
	id := &l.lastID
	for i := len(id) - 1; i >= 12; i-- {
		switch c := id[i]; c {
		case 'f':
			id[i] = '0' // carry
			continue
		case '9':
			id[i] = 'a'
		default:
			id[i] = c + 1
		}
		break
	}
	*dst = *id
	return len(dst)
}

func (l *loop) getExchange() *exchange {
	if n := len(l.free); n > 0 {
		ex := l.free[n-1]
		l.free = l.free[:n-1]
		return ex
	}
	ex := &exchange{loop: l}
	ex.call.Init(ex)
	ex.sub.ex = ex
	ex.sub.call.Init(&ex.sub)
	ex.timer.Init(ex.phaseExpired)
	return ex
}

// maxFreeExchanges bounds the free list; beyond it exchanges go to the GC.
const maxFreeExchanges = 1024

// putExchange recycles an exchange. Every exchange that began ends here,
// whichever way it ended (see clientConn.finish and release), so this is
// where it is counted, and where its groups give back what they hold
// (begin resets them for the next request).
func (l *loop) putExchange(ex *exchange) {
	if ex.phase == phaseWaiting {
		ex.leaveQueue() // its client left while it waited for a permit
	}
	ex.setPhase(phaseDone) // no filter may park from the Done phase
	// The groups most requests never use are checked here rather than
	// in their end functions, so a plain request makes none of the calls.
	if ex.park.ticketOut {
		ex.endPark() // a resume still on its way is dropped: see inbox.go
	}
	ex.done()
	ex.endResilience()
	ex.logEnd()
	ex.record()
	if ex.upgrade != (upgradeState{}) {
		ex.endUpgrade()
	}
	if ex.chain != nil { // only a filter starts a sub-request
		ex.sub.abort()
	}
	ex.cc, ex.snap, ex.route, ex.shard, ex.flight, ex.chain = nil, nil, nil, nil, nil, nil
	if ex.saved != nil {
		ex.saved.SafeRelease()
		ex.saved = nil
	}
	if ex.resp.trailers != nil {
		ex.resp.trailers.SafeRelease()
		ex.resp.trailers = nil
	}
	if ex.hold.on {
		ex.endHold()
	}
	if len(l.free) < maxFreeExchanges {
		l.free = append(l.free, ex)
	}
}

// clientList is an intrusive list of a loop's client connections.
type clientList struct{ head clientConn }

func (cl *clientList) init() { cl.head.next, cl.head.prev = &cl.head, &cl.head }

func (cl *clientList) push(cc *clientConn) {
	cc.prev, cc.next = cl.head.prev, &cl.head
	cl.head.prev.next = cc
	cl.head.prev = cc
}

func (cl *clientList) remove(cc *clientConn) {
	if cc.next == nil {
		return
	}
	cc.prev.next, cc.next.prev = cc.next, cc.prev
	cc.prev, cc.next = nil, nil
}
