// Wheel, Timer: a hashed timing wheel with intrusive, allocation-free timers.

package wheel

import (
	"math"
	"time"
)

// DefaultTick is the resolution the engine uses.
const DefaultTick = 10 * time.Millisecond

// Timer is one deadline. Embed it in its owner and call Init once.
// Owned by the loop goroutine of the Wheel it is armed on.
type Timer struct {
	prev, next *Timer
	when       int64 // tick at which the timer is due
	fire       func()
}

// Init sets the callback. It must be called before the timer is first armed.
func (t *Timer) Init(fire func()) { t.fire = fire }

// Armed reports whether the timer is waiting to fire.
func (t *Timer) Armed() bool { return t.next != nil }

// Stop disarms the timer. Stopping a timer that is not armed does nothing.
func (t *Timer) Stop() {
	if t.next == nil {
		return
	}
	t.prev.next = t.next
	t.next.prev = t.prev
	t.prev, t.next = nil, nil
}

// Wheel is a ring of slots, each a circular list of timers due at ticks that
// map to it. A timer due more than one revolution ahead waits in its slot
// until its round comes up. A slot's head keeps in its when a lower bound
// of its timers' due ticks: Arm lowers it, Advance and earliest set it to
// the exact value when they walk the slot, and Stop leaves it (a stopped
// timer can only raise the slot's earliest; an empty slot's bound means
// nothing), so a walk for the earliest timer need not visit every timer.
type Wheel struct {
	tick  time.Duration
	start time.Time
	since func(time.Time) time.Duration // time.Since; tests substitute a fake clock
	clock func() int64                  // monotonic nanoseconds for Arm, when set (SetClock)
	base  int64                         // clock's reading at start
	now   int64                         // last tick processed
	slots []Timer
	mask  int64
	due   Timer // scratch list of timers firing in the current Advance

	// While the wheel's driver sleeps (Sleep), asleep is the tick it
	// sleeps until (math.MaxInt64: until woken) and an Arm due before it
	// calls onArm; 0 while it ticks.
	asleep int64
	onArm  func()
}

// New returns a wheel with the given tick and a power-of-two slot count.
func New(tick time.Duration, slots int) *Wheel {
	n := 1
	for n < slots {
		n <<= 1
	}
	w := &Wheel{tick: tick, start: time.Now(), since: time.Since, slots: make([]Timer, n), mask: int64(n - 1)}
	for i := range w.slots {
		s := &w.slots[i]
		s.prev, s.next = s, s
	}
	w.due.prev, w.due.next = &w.due, &w.due
	return w
}

// Ticks returns the last processed tick, counted from the wheel's start:
// Now as a number, for a caller that notes the time at every event and
// reads it rarely (SinceTick), without Now's time arithmetic.
func (w *Wheel) Ticks() int64 { return w.now }

// SinceTick returns the time from tick (a Ticks reading) to the last
// processed tick.
func (w *Wheel) SinceTick(tick int64) time.Duration { return time.Duration(w.now-tick) * w.tick }

// Now returns the current time as the wheel sees it: the last processed tick.
func (w *Wheel) Now() time.Time { return w.start.Add(time.Duration(w.now) * w.tick) }

// SetClock makes Arm count from now, a monotonic clock in nanoseconds,
// instead of reading time.Since itself: the engine's loop passes the clock
// reading it already took for the callback, so the three timers a request
// arms cost no clock read. Call it before the first Arm.
func (w *Wheel) SetClock(now func() int64) {
	w.clock = now
	w.base = now() - int64(w.since(w.start))
}

// Arm (re)starts t so that it fires after d, never before: the due tick is
// counted from the current time, not from the last processed tick, which
// may be up to a tick behind (a timer armed between ticks would otherwise
// fire up to one tick early). time.Since reads only the monotonic clock,
// half the cost of time.Now; Arm runs several times per request, so a
// clock set with SetClock replaces it.
func (w *Wheel) Arm(t *Timer, d time.Duration) {
	t.Stop()
	var elapsed time.Duration
	if w.clock != nil {
		elapsed = time.Duration(w.clock() - w.base)
	} else {
		elapsed = w.since(w.start)
	}
	due := elapsed + d
	when := int64((due + w.tick - 1) / w.tick)
	if when <= w.now {
		when = w.now + 1
	}
	t.when = when
	head := &w.slots[when&w.mask]
	head.when = min(head.when, when) // a bound left low by a timer stopped or fired is still a bound
	w.link(head, t)
	if when < w.asleep {
		w.asleep = 0
		w.onArm()
	}
}

// Next returns how long after now the earliest armed timer's tick begins
// (at most 0 when it is due already), or false when none is armed. It
// looks at every slot (see earliest), so it is for a loop about to sleep,
// not for each request.
func (w *Wheel) Next(now time.Time) (time.Duration, bool) {
	when := w.earliest()
	if when == math.MaxInt64 {
		return 0, false
	}
	return w.start.Add(time.Duration(when) * w.tick).Sub(now), true
}

// earliest is the due tick of the earliest armed timer, math.MaxInt64
// when none is armed. It looks at the slots in the order of their next
// ticks and walks the timers of a slot only when the slot's bound is below
// the earliest found so far, setting the bound exact; it stops at a slot
// whose next tick is no earlier than that, since each of its timers, and
// of the slots after it, is due at that tick or later. With 10,000 idle
// connections' timers spread over several revolutions that is the 1024
// slot heads and a few slots' timers, not every timer (BenchmarkSleep10k).
// Keeping the earliest up to date instead would cost every Arm and Stop
// on the request path more than a compare.
func (w *Wheel) earliest() int64 {
	best := int64(math.MaxInt64)
	for tick, end := w.now+1, w.now+int64(len(w.slots)); tick <= end && tick < best; tick++ {
		head := &w.slots[tick&w.mask]
		if head.next == head || head.when >= best {
			continue
		}
		exact := int64(math.MaxInt64)
		for t := head.next; t != head; t = t.next {
			exact = min(exact, t.when)
		}
		head.when = exact
		best = min(best, exact)
	}
	return best
}

// Sleep tells the wheel its driver stops advancing it until the earliest
// timer armed now is due, or until woken when none is: from then until
// Awake, the first Arm due before that calls onArm, on the Arm's
// goroutine, so that the driver ticks again. It returns what Next(now)
// would, from the same walk of the wheel. Sleep while asleep moves the
// mark.
func (w *Wheel) Sleep(onArm func(), now time.Time) (time.Duration, bool) {
	w.onArm = onArm
	w.asleep = w.earliest()
	if w.asleep == math.MaxInt64 {
		return 0, false
	}
	return w.start.Add(time.Duration(w.asleep) * w.tick).Sub(now), true
}

// Awake ends a Sleep: the driver advances the wheel every tick again.
func (w *Wheel) Awake() { w.asleep = 0 }

// Wake ends a Sleep as Awake does, for an event that arrived before the
// driver's next Advance, and brings the wheel's time (Now, Ticks) up to
// now, short of the earliest armed timer's tick: asleep, the wheel's time
// stops at the tick it fell asleep on, and an event must not read that
// (a tunnel's last activity, a stall's start). No timer fires and none is
// passed over: one due already fires at the driver's next Advance. While
// the wheel sleeps that tick is the one Sleep noted (an Arm due sooner
// ended the sleep); otherwise it walks the wheel, as Next does.
func (w *Wheel) Wake(now time.Time) {
	limit := w.asleep
	if limit == 0 {
		limit = w.earliest()
	}
	w.asleep = 0
	if target := min(int64(now.Sub(w.start)/w.tick), limit-1); target > w.now {
		w.now = target
	}
}

func (w *Wheel) link(head, t *Timer) {
	t.prev = head.prev
	t.next = head
	head.prev.next = t
	head.prev = t
}

// Advance fires every timer due at or before now, and reports whether it
// fired any. Callbacks may arm and stop any timer, including ones due in
// the same Advance.
func (w *Wheel) Advance(now time.Time) (fired bool) {
	target := int64(now.Sub(w.start) / w.tick)
	if target-w.now > int64(len(w.slots)) {
		// More than a revolution behind, after a sleep: skip to the
		// earliest timer's tick rather than step through every one.
		if e := w.earliest(); e > w.now+1 {
			w.now = min(target, e-1)
		}
	}
	for w.now < target {
		w.now++
		head := &w.slots[w.now&w.mask]
		rest := int64(math.MaxInt64) // the bound of the timers that stay
		for t := head.next; t != head; {
			next := t.next
			if t.when <= w.now {
				t.prev.next, t.next.prev = t.next, t.prev // still armed (counted) until it fires
				w.link(&w.due, t)
			} else {
				rest = min(rest, t.when)
			}
			t = next
		}
		head.when = rest // a callback below may arm into the slot again
		for w.due.next != &w.due {
			t := w.due.next
			t.Stop()
			t.fire()
			fired = true
		}
	}
	return fired
}
