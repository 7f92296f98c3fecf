package wheel

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestTimersFireInOrderAndNotEarly(t *testing.T) {
	w := New(10*time.Millisecond, 8)
	var now time.Time
	fakeClock(w, &now)
	var fired []int
	timers := make([]Timer, 4)
	durations := []time.Duration{35 * time.Millisecond, 10 * time.Millisecond, 200 * time.Millisecond, 80 * time.Millisecond}
	for i := range timers {
		i := i
		timers[i].Init(func() { fired = append(fired, i) })
		w.Arm(&timers[i], durations[i])
	}
	w.Advance(w.start.Add(30 * time.Millisecond))
	if len(fired) != 1 || fired[0] != 1 {
		t.Fatalf("after 30ms fired %v, want [1]", fired)
	}
	w.Advance(w.start.Add(100 * time.Millisecond))
	if len(fired) != 3 || fired[1] != 0 || fired[2] != 3 {
		t.Fatalf("after 100ms fired %v, want [1 0 3]", fired)
	}
	// 200ms is more than one revolution (8 slots x 10ms): must wait its round.
	w.Advance(w.start.Add(190 * time.Millisecond))
	if len(fired) != 3 {
		t.Fatalf("timer beyond one revolution fired early: %v", fired)
	}
	w.Advance(w.start.Add(210 * time.Millisecond))
	if len(fired) != 4 || fired[3] != 2 {
		t.Fatalf("after 210ms fired %v", fired)
	}
}

func TestStopAndRearmFromCallback(t *testing.T) {
	w := New(10*time.Millisecond, 4)
	var now time.Time
	fakeClock(w, &now)
	var a, b, c Timer
	count := map[string]int{}
	a.Init(func() {
		count["a"]++
		b.Stop()
		now = w.start.Add(10 * time.Millisecond)
		w.Arm(&c, 10*time.Millisecond)
	})
	b.Init(func() { count["b"]++ })
	c.Init(func() { count["c"]++ })
	w.Arm(&a, 10*time.Millisecond)
	w.Arm(&b, 10*time.Millisecond)
	w.Advance(w.start.Add(10 * time.Millisecond))
	if count["a"] != 1 || count["b"] != 0 || !c.Armed() {
		t.Fatalf("counts %v, c armed %v", count, c.Armed())
	}
	w.Advance(w.start.Add(20 * time.Millisecond))
	if count["c"] != 1 || c.Armed() || a.Armed() {
		t.Fatalf("counts %v", count)
	}
	a.Stop() // stopping a fired timer is a no-op
}

func BenchmarkArmStop(b *testing.B) {
	w := New(DefaultTick, 512)
	var t Timer
	t.Init(func() {})
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		w.Arm(&t, 10*time.Second)
		t.Stop()
	}
}

// fakeClock makes the wheel read its time from *now.
func fakeClock(w *Wheel, now *time.Time) {
	*now = w.start
	w.since = func(t time.Time) time.Duration { return now.Sub(t) }
}

func TestTimerArmedBetweenTicksIsNotEarly(t *testing.T) {
	w := New(10*time.Millisecond, 8)
	var now time.Time
	fakeClock(w, &now)
	fired := false
	var tm Timer
	tm.Init(func() { fired = true })
	now = w.start.Add(15 * time.Millisecond)
	w.Advance(now) // last processed tick: 10ms
	w.Arm(&tm, 10*time.Millisecond)
	now = w.start.Add(20 * time.Millisecond)
	w.Advance(now)
	if fired {
		t.Fatal("a 10ms timer armed at 15ms fired at 20ms")
	}
	now = w.start.Add(25 * time.Millisecond)
	w.Advance(now)
	if fired {
		t.Fatal("fired at 25ms: the wheel only fires on tick boundaries, 30ms is the first at or after the deadline")
	}
	now = w.start.Add(30 * time.Millisecond)
	w.Advance(now)
	if !fired {
		t.Fatal("a 10ms timer armed at 15ms had not fired at 30ms")
	}
}

// TestArmCountsFromSetClock: with a clock set, Arm counts a deadline from
// that clock's reading, not from time.Since.
func TestArmCountsFromSetClock(t *testing.T) {
	w := New(10*time.Millisecond, 8)
	var now time.Time
	fakeClock(w, &now) // time.Since stays at 0 until now moves
	ns := int64(1e9)   // any base: only differences count
	w.SetClock(func() int64 { return ns })
	fired := false
	var tm Timer
	tm.Init(func() { fired = true })
	ns += int64(15 * time.Millisecond) // the set clock says 15ms
	w.Arm(&tm, 10*time.Millisecond)    // due at 25ms (time.Since would say 10ms)
	w.Advance(w.start.Add(20 * time.Millisecond))
	if fired {
		t.Fatal("a 10ms timer armed at 15ms by the set clock fired at 20ms: counted from time.Since")
	}
	w.Advance(w.start.Add(30 * time.Millisecond))
	if !fired {
		t.Fatal("a 10ms timer armed at 15ms had not fired at 30ms")
	}
}

// TestNextAndSleep: Next names the earliest armed timer, even one beyond a
// revolution; a sleeping wheel calls onArm for an Arm due before the
// sleep's end, once, and not for a later one; fired and stopped timers
// are gone from Next, and a wheel skips the ticks it slept through.
func TestNextAndSleep(t *testing.T) {
	w := New(10*time.Millisecond, 8)
	var now time.Time
	fakeClock(w, &now)
	if _, ok := w.Next(w.start); ok {
		t.Fatal("an empty wheel has a next timer")
	}
	var far, near, late Timer
	fired := 0
	for _, tm := range []*Timer{&far, &near, &late} {
		tm.Init(func() { fired++ })
	}
	w.Arm(&far, 300*time.Millisecond) // beyond one revolution (80 ms)
	if d, ok := w.Next(w.start); !ok || d != 300*time.Millisecond {
		t.Fatalf("Next = %v, %v; want 300ms", d, ok)
	}
	woken := 0
	w.Sleep(func() { woken++ }, time.Now())
	w.Arm(&late, 500*time.Millisecond)
	if woken != 0 {
		t.Fatal("an Arm after the sleep's end woke the driver")
	}
	w.Arm(&near, 50*time.Millisecond)
	w.Arm(&near, 40*time.Millisecond)
	if woken != 1 {
		t.Fatalf("woken %d times, want once", woken)
	}
	if d, _ := w.Next(w.start); d != 40*time.Millisecond {
		t.Fatalf("Next = %v, want 40ms", d)
	}
	late.Stop()
	w.Advance(w.start.Add(310 * time.Millisecond))
	if fired != 2 {
		t.Fatalf("fired %d, want 2", fired)
	}
	if _, ok := w.Next(w.start); ok {
		t.Fatal("a next timer after every timer fired or stopped")
	}
	w.Sleep(func() { woken++ }, time.Now())
	w.Advance(w.start.Add(time.Hour)) // an hour asleep: one step, no walk
	if w.now != int64(time.Hour/w.tick) {
		t.Fatalf("now %d after an hour", w.now)
	}
	w.Arm(&near, time.Hour)
	if woken != 2 {
		t.Fatal("an Arm on a wheel asleep until woken did not wake it")
	}
	// Skipping a long sleep stops at each timer's tick: none is passed over.
	now = w.start.Add(time.Hour)
	w.Arm(&far, 2*time.Hour)
	w.Advance(w.start.Add(2*time.Hour + time.Minute))
	if fired != 3 {
		t.Fatalf("fired %d after the skip past the 1h timer, want 3", fired)
	}
	w.Advance(w.start.Add(3*time.Hour + time.Minute))
	if fired != 4 {
		t.Fatalf("fired %d after the skip past the 2h timer, want 4", fired)
	}
}

// Ticks and SinceTick count what Now counts: the ticks Advance processed.
func TestTicksFollowNow(t *testing.T) {
	w := New(10*time.Millisecond, 8)
	now := w.start
	fakeClock(w, &now)
	mark := w.Ticks()
	now = now.Add(35 * time.Millisecond)
	w.Advance(now)
	if got := w.Ticks() - mark; got != 3 {
		t.Fatalf("Ticks advanced by %d, want 3", got)
	}
	if got, want := w.SinceTick(mark), w.Now().Sub(w.start); got != want || got != 30*time.Millisecond {
		t.Fatalf("SinceTick = %v, Now - start = %v, want 30ms", got, want)
	}
}

// Wake brings a sleeping wheel's time up to now, short of the earliest
// timer's tick, and fires nothing: that timer fires at the next Advance.
func TestWakeCatchesUpWithoutFiring(t *testing.T) {
	w := New(10*time.Millisecond, 8)
	now := w.start
	fakeClock(w, &now)
	fired := 0
	var far Timer
	far.Init(func() { fired++ })
	w.Arm(&far, 500*time.Millisecond) // beyond one revolution (80 ms)
	w.Sleep(func() { t.Fatal("woken by an Arm") }, time.Now())
	now = w.start.Add(235 * time.Millisecond)
	w.Wake(now)
	if w.Ticks() != 23 {
		t.Fatalf("Ticks %d after a 235 ms sleep, want 23", w.Ticks())
	}
	if w.SinceTick(0) != 230*time.Millisecond {
		t.Fatalf("SinceTick(0) = %v", w.SinceTick(0))
	}
	// Past the timer's tick, the time stops just short of it.
	w.Sleep(nil, time.Now())
	now = w.start.Add(800 * time.Millisecond)
	w.Wake(now)
	if fired != 0 || w.Ticks() != 49 {
		t.Fatalf("fired %d, Ticks %d; want 0, 49", fired, w.Ticks())
	}
	if !w.Advance(now) {
		t.Fatal("Advance reports no timer fired")
	}
	if fired != 1 || w.Ticks() != 80 {
		t.Fatalf("after Advance fired %d, Ticks %d; want 1, 80", fired, w.Ticks())
	}
	if w.Advance(now.Add(time.Second)) {
		t.Fatal("Advance with no timer armed reports one fired")
	}
	// With no timer armed, up to now.
	w.Sleep(nil, time.Now())
	now = w.start.Add(time.Hour)
	w.Wake(now)
	if w.Ticks() != int64(time.Hour/w.tick) {
		t.Fatalf("Ticks %d after an hour with no timer", w.Ticks())
	}
}

// BenchmarkSleep10k is a loop going to sleep with 10,000 idle keep-alive
// connections' timers armed (60 s ± 10 s, over several revolutions),
// each timer in an owner of its own as a connection's is, after the
// traffic that armed them re-armed a third of them.
func BenchmarkSleep10k(b *testing.B) {
	w := New(DefaultTick, 1024)
	var now time.Time
	fakeClock(w, &now)
	type owner struct {
		_ [1024]byte // a connection's other state: timers apart in memory
		t Timer
	}
	owners := make([]*owner, 10000)
	rnd := rand.New(rand.NewPCG(1, 2))
	for i := range owners {
		owners[i] = &owner{}
		owners[i].t.Init(func() {})
		w.Arm(&owners[i].t, 50*time.Second+time.Duration(rnd.Int64N(int64(20*time.Second))))
	}
	for i := 0; i < len(owners); i += 3 {
		w.Arm(&owners[i].t, 50*time.Second+time.Duration(rnd.Int64N(int64(20*time.Second))))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		w.Sleep(func() {}, now)
		w.Awake()
	}
}

// Next names the earliest armed timer whatever Arm, Stop, re-arming from
// a callback, Advance, Sleep and Wake did before: the slots' bounds it
// walks by stay at or below their timers' due ticks. Checked against a
// walk of every timer, over random operations on timers due within and
// beyond a revolution.
func TestNextMatchesEveryTimer(t *testing.T) {
	w := New(10*time.Millisecond, 16)
	var now time.Time
	fakeClock(w, &now)
	rnd := rand.New(rand.NewPCG(7, 11))
	timers := make([]Timer, 64)
	for i := range timers {
		tm := &timers[i]
		tm.Init(func() {
			if rnd.IntN(3) == 0 {
				w.Arm(tm, time.Duration(rnd.IntN(600))*time.Millisecond)
			}
		})
	}
	walk := func() (int64, bool) {
		best, ok := int64(0), false
		for i := range timers {
			if tm := &timers[i]; tm.Armed() && (!ok || tm.when < best) {
				best, ok = tm.when, true
			}
		}
		return best, ok
	}
	for step := range 20000 {
		switch op := rnd.IntN(10); {
		case op < 5:
			w.Arm(&timers[rnd.IntN(len(timers))], time.Duration(rnd.IntN(600))*time.Millisecond)
		case op < 7:
			timers[rnd.IntN(len(timers))].Stop()
		case op < 9:
			now = now.Add(time.Duration(rnd.IntN(200)) * time.Millisecond)
			w.Advance(now)
		default:
			w.Sleep(func() {}, now)
			now = now.Add(time.Duration(rnd.IntN(2000)) * time.Millisecond)
			if rnd.IntN(2) == 0 {
				w.Wake(now)
			} else {
				w.Awake()
			}
			w.Advance(now)
		}
		want, armed := walk()
		if got := w.earliest(); armed && got != want || !armed && got != math.MaxInt64 {
			t.Fatalf("step %d: earliest tick %d, want %d (armed: %v)", step, got, want, armed)
		}
	}
}
