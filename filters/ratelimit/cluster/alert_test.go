package cluster

import (
	"sync"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
	"github.com/loopgate/loopgate/pool/alert"
)

// Redis killed is one redis_lost alert, raised where the breaker trips;
// Redis back is its resolution, raised where a probe finds it.
func TestRedisLostAlert(t *testing.T) {
	var mu sync.Mutex
	var got []alert.Event
	r := redistest.Start(t)
	alert.SetSink(func(e alert.Event) {
		if e.Kind == alert.RedisLost && e.Subject == r.Addr() {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
		}
	})
	t.Cleanup(func() { alert.SetSink(nil) })
	events := func() []alert.Event {
		mu.Lock()
		defer mu.Unlock()
		return append([]alert.Event(nil), got...)
	}
	c := newCluster(t, testOptions(r.Addr(), "alerting", nil))
	l := newLimit(t, c, LimitSpec{Name: "alerting", Rate: 1000, Burst: 10, LeaseWindow: -1})
	cl := newClient()
	cl.take(t, l)
	r.Kill()
	waitFor(t, 15*time.Second, "Redis marked down", func() bool {
		cl.take(t, l)
		return c.Health() == Down
	})
	// The alert follows the state change on the goroutine that made it.
	waitFor(t, 15*time.Second, "the redis_lost alert", func() bool { return len(events()) >= 1 })
	if e := events(); len(e) != 1 || e[0].Resolved {
		t.Fatalf("events after the trip: %+v", e)
	}
	r.Restart()
	waitFor(t, 15*time.Second, "Redis back up", func() bool { return c.Health() == Up })
	waitFor(t, 15*time.Second, "the resolution", func() bool { return len(events()) >= 2 })
	if e := events(); len(e) != 2 || !e[1].Resolved {
		t.Fatalf("events after the recovery: %+v", e)
	}
}
