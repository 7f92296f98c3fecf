// The isolation queue: requests over a route's concurrency limit wait,
// briefly and in bounded numbers, for a permit instead of being refused
// at once.
//
// Refusing at once turns a slow route into a storm: a client that gets
// its 429 in microseconds asks again in microseconds, and 300 such
// clients on a route held at 5 permits made 38,700 refusals a second on
// one loop, which took the CPU the healthy routes needed (their p99 went
// from 4 ms to 28 ms). A request that waits up to queue_timeout (100 ms)
// for a permit paces each client to at most one refusal per wait, and a
// permit freed meanwhile goes to the oldest waiter rather than to
// whoever asks next. This is Envoy's pending-request queue and APISIX's
// limit-conn burst, bounded by queue (1000 per route, all loops).

package engine

// waitList is a loop's requests waiting for isolation permits, oldest
// first, whatever their route. Owned by the loop.
type waitList struct{ head, tail *exchange }

// waitForPermit queues the request for a permit of its route's limiter,
// for at most the route's queue_timeout. It reports false, queuing
// nothing, when the route's queue is full or turned off.
func (ex *exchange) waitForPermit() bool {
	iso, s := ex.route.limiter(), ex.route.isolationCfg
	if !iso.Wait(s) {
		return false
	}
	_, timeout := s.Queue()
	// As park does: the head moves out of the client's input, which the
	// callback's views die with, and the client reads nothing more while
	// the request waits (bounded by max_conn_buffer; the queue timeout
	// bounds the wait).
	ex.save()
	ex.cc.setState(stateWaitingUpstream)
	ex.cc.stopTimer()
	ex.setPhase(phaseWaiting)
	l := ex.loop
	l.wheel.Arm(&ex.timer, timeout)
	w := &l.permitWaiters
	ex.policy.prev, ex.policy.next = w.tail, nil
	if w.tail != nil {
		w.tail.policy.next = ex
	} else {
		w.head = ex
	}
	w.tail = ex
	return true
}

// leaveQueue takes a waiting request out of its loop's queue: granted,
// timed out, or ended by its client. The phase it leaves (setPhase) stops
// the queue_timeout.
func (ex *exchange) leaveQueue() {
	ex.route.limiter().Leave()
	w := &ex.loop.permitWaiters
	if ex.policy.prev != nil {
		ex.policy.prev.policy.next = ex.policy.next
	} else {
		w.head = ex.policy.next
	}
	if ex.policy.next != nil {
		ex.policy.next.policy.prev = ex.policy.prev
	} else {
		w.tail = ex.policy.prev
	}
	ex.policy.prev, ex.policy.next = nil, nil
}

// permitWaitExpired: no permit came within queue_timeout.
func (ex *exchange) permitWaitExpired() {
	ex.leaveQueue()
	ex.refuseIsolated()
}

// grantPermits hands free permits to the loop's waiting requests, oldest
// first. It runs when a permit was given back on this loop (leave) and on
// every tick, for permits given back on other loops.
func (l *loop) grantPermits() {
	l.grantDue = false
	for ex := l.permitWaiters.head; ex != nil; {
		next := ex.policy.next // granting changes only ex's own links
		if iso := ex.route.limiter(); iso.Acquire() {
			ex.leaveQueue()
			ex.policy.iso = iso
			ex.run()
		}
		ex = next
	}
}
