package cluster

import (
	"strconv"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

// Heartbeats keep the nodes in the sorted set and trim the ones gone for
// longer than LiveMaxAge; a node that stops beating stops counting as live
// after MemberTTL but stays known until LiveMaxAge; a node that closes
// leaves at once. Nothing enumerates keys.
func TestMembershipTrimsStaleNodes(t *testing.T) {
	r := redistest.Start(t)
	nowMS := serverMicros(t, r) / 1000
	// A node that stopped beating ten minutes ago, and one beating now.
	if err := r.Do("ZADD", "test:nodes", strconv.FormatInt(nowMS-600_000, 10), "gone",
		strconv.FormatInt(nowMS, 10), "other").Error(); err != nil {
		t.Fatal(err)
	}
	opts := func(node string) Options {
		o := testOptions(r.Addr(), node, nil)
		o.LiveMaxAge = 2 * time.Second // MemberTTL is 1 s
		return o
	}
	a := newCluster(t, opts("a"))
	b := newCluster(t, opts("b"))
	waitFor(t, 15*time.Second, "both nodes to count a, b and other", func() bool {
		return a.Status().LiveNodes == 3 && b.Status().LiveNodes == 3
	})
	members, err := r.Do("ZRANGE", "test:nodes", "0", "-1").AsStrSlice()
	if err != nil || len(members) != 3 || members[0] == "gone" {
		t.Fatalf("members %v (%v), want a, b and other without gone", members, err)
	}
	if pttl, _ := r.Do("PTTL", "test:nodes").AsInt64(); pttl <= 1000 || pttl > 2000 {
		t.Fatalf("the set's PTTL is %d ms, want the live max age", pttl)
	}

	b.Close()
	// "other" stops beating too: past the member TTL (1 s) it no longer
	// answers but is still known, and its share is kept; past the live
	// max age (2 s) it is trimmed.
	waitFor(t, 15*time.Second, "a to count itself alone among two", func() bool {
		s := a.Status()
		return s.LiveNodes == 1 && s.KnownNodes == 2
	})
	if s := a.Status(); s.EffectiveNodes != 2 {
		t.Fatalf("with other known but silent: %+v, want 2 effective nodes", s)
	}
	waitFor(t, 15*time.Second, "a to count itself alone", func() bool { return a.Status().KnownNodes == 1 })
	if s := a.Status(); s.LiveNodes != 1 || s.EffectiveNodes != 1 || s.LiveAge < 0 || s.LiveAge > time.Second {
		t.Fatalf("status %+v", s)
	}
	if n := r.CommandCalls("keys", "scan"); n != 0 {
		t.Fatalf("Redis ran KEYS or SCAN %d times", n)
	}
}

// While the live count is fresh it sets the effective node count; once
// Redis has been unreachable for longer than LiveMaxAge the fallback count
// takes over, and the shadow quota follows.
func TestEffectiveNodesFallBackWhenStale(t *testing.T) {
	r := redistest.Start(t)
	n := newFakeNode(t, r.Addr(), func(o *Options) {
		o.FallbackNodes = 5
		o.LiveMaxAge = 2 * time.Second
	})
	l := newLimit(t, n.c, LimitSpec{Name: "eff", Rate: 600, Burst: 60})
	if s := n.c.Status(); s.LiveNodes != 1 || s.EffectiveNodes != 1 {
		t.Fatalf("after the first heartbeat: live %d, effective %d, want 1 and 1", s.LiveNodes, s.EffectiveNodes)
	}
	nowMS := serverMicros(t, r) / 1000
	r.Do("ZADD", "test:nodes", strconv.FormatInt(nowMS, 10), "x", strconv.FormatInt(nowMS, 10), "y")
	n.advance(time.Second)
	if s := n.c.Status(); s.LiveNodes != 3 || s.EffectiveNodes != 3 || !near(s.Limits[0].ShadowRate, 200) {
		t.Fatalf("with 3 live: %+v", s)
	}
	r.Kill()
	n.until("Redis marked down", func() bool { return n.c.Health() == Down })
	if s := n.c.Status(); s.EffectiveNodes != 3 || !near(l.Status().Quota, 200) {
		t.Fatalf("just after Redis went down the last live count holds: %+v", s)
	}
	n.advance(2 * time.Second)
	if s := n.c.Status(); s.EffectiveNodes != 5 || !near(l.Status().Quota, 120) {
		t.Fatalf("live count stale: effective %d, quota %v; want the 5 fallback nodes and 600 / 5", s.EffectiveNodes, l.Status().Quota)
	}
}

// near compares rates, which carry the rounding of a whole nanosecond per token.
func near(a, b float64) bool { return a > b*0.9999 && a < b*1.0001 }
