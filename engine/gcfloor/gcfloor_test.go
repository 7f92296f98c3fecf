package gcfloor_test

import (
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/gcfloor"
)

func TestPercent(t *testing.T) {
	for _, c := range []struct{ live, floor, base, want int64 }{
		{8 << 20, 64 << 20, 100, 800},    // 8 MiB live: the goal is 72 MiB
		{10 << 20, 64 << 20, 100, 640},   // rounded up: at least the floor
		{200 << 20, 64 << 20, 100, 100},  // a heap over the floor keeps GOGC's goal
		{0, 64 << 20, 100, 1600},         // before the first collection: as if the 4 MiB minimum heap
		{1 << 20, 64 << 20, 100, 1600},   // the minimum heap, scaled by GOGC, would otherwise set the goal
		{5 << 20, 64 << 20, 400, 1280},   // 6400/5
		{64 << 20, 64 << 20, 100, 100},   // equal: GOGC's goal is the floor's
		{100 << 20, 256 << 20, 300, 300}, // base wins when it gives more
	} {
		if got := gcfloor.Percent(c.live, c.floor, c.base); got != c.want {
			t.Errorf("Percent(%d, %d, %d) = %d, want %d", c.live, c.floor, c.base, got, c.want)
		}
	}
}

// The goal follows every collection: after each, it is at least the live
// heap plus the floor.
func TestGoalStaysAboveTheFloor(t *testing.T) {
	const floor = 256 << 20
	f := gcfloor.Start(floor, 100)
	defer f.Stop()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/gc/gogc:percent"}}
	var keep [][]byte
	// Goroutines on deep stacks, as a flood's handshakes are: GOGC scales
	// their stacks too, and a percent made from the live heap alone would
	// put the goal far above live + floor.
	release := make(chan struct{})
	defer close(release)
	for range 200 {
		go deep(64, release)
	}
	for round := range 4 {
		// A live heap that grows round by round, so each tune is new.
		for range 64 {
			keep = append(keep, make([]byte, 64<<10))
		}
		runtime.GC() // the cleanup of this cycle's sentinel tunes, on its own goroutine
		deadline := time.Now().Add(10 * time.Second)
		for {
			metrics.Read(s)
			live, goal, percent := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
			if goal >= live+floor*9/10 && goal <= live+floor*11/10 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: live %d, goal %d, GOGC %d: want a goal near live + %d",
					round, live, goal, percent, floor)
			}
			runtime.Gosched()
		}
	}
	runtime.KeepAlive(keep)
	f.Stop()
	metrics.Read(s)
	if p := s[2].Value.Uint64(); p != 100 {
		t.Fatalf("GOGC %d after Stop, want 100", p)
	}
}

// deep holds about 64 × depth bytes of stack until release closes.
func deep(depth int, release chan struct{}) byte {
	var pad [64]byte
	if depth == 0 {
		<-release
		return pad[0]
	}
	return deep(depth-1, release) + pad[depth%64]
}
