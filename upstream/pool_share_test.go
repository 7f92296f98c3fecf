// Pool shares: a tenant past its share of a pool fails at once and queues
// nothing, while another tenant still gets connections; the table counts
// right through any mix of enters and leaves.

package upstream

import (
	"math/rand/v2"
	"testing"
)

// Tenant a, with half of a 4-connection pool, holds two connections; its
// third call fails with ErrPoolShare without waiting, tenant b takes the
// other two, and once one of a's calls ends a may start another (which
// waits in the queue like any call when the pool is full).
func TestPoolShare(t *testing.T) {
	pc := testPool
	pc.MaxConns, pc.MaxIdle = 4, 4
	tl := newTestLoop(t, pc, listenAddr(t))
	p := tl.pool(0)
	a, b := NewTenant(), NewTenant()
	optsA, optsB := getOpts, getOpts
	optsA.Tenant, optsA.Share = a, 50
	optsB.Tenant, optsB.Share = b, 50
	start := func(opts Options) (*Call, *recorder) {
		c, r := newCall()
		c.Start(p, head(getHead), opts)
		return c, r
	}

	a1, _ := start(optsA)
	uc1, fc1 := tl.open()
	a2, _ := start(optsA)
	tl.open()
	a3, r3 := start(optsA)
	if r3.err != ErrPoolShare || r3.err.Status != 503 || r3.err.Code != 50302 || a3.State() != Failed || len(p.waiters) != 0 {
		t.Fatalf("a's third call: err %v, state %s, %d waiters", r3.err, a3.State(), len(p.waiters))
	}
	if p.stats.PoolExhausted.Load() != 1 {
		t.Fatalf("pool exhausted %d, want 1", p.stats.PoolExhausted.Load())
	}
	b1, rb1 := start(optsB)
	tl.open()
	b2, rb2 := start(optsB)
	tl.open()
	if rb1.ready != 1 || rb2.ready != 1 || p.total != 4 {
		t.Fatalf("b's calls: ready %d and %d, %d connections", rb1.ready, rb2.ready, p.total)
	}

	deliver(uc1, fc1, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	if a1.State() != Done || p.Idle() != 1 {
		t.Fatalf("a1 %s, %d idle", a1.State(), p.Idle())
	}
	a4, r4 := start(optsA)
	if r4.err != nil || a4.conn != uc1 {
		t.Fatalf("a's call after one ended: err %v, on the idle connection %v", r4.err, a4.conn == uc1)
	}
	// The pool is full, so a call of a third tenant, under its share,
	// waits like any call; so does an untenanted one (a sub-request),
	// never capped.
	optsC := optsA
	optsC.Tenant = NewTenant()
	c1, _ := start(optsC)
	free, _ := start(getOpts)
	if c1.waiting != p || free.waiting != p {
		t.Fatalf("c1 waiting %v, untenanted waiting %v", c1.waiting == p, free.waiting == p)
	}
	for _, c := range []*Call{a2, a4, b1, b2, c1, free} {
		c.Abort()
	}
	if p.shares.used != 0 {
		t.Fatalf("%d tenants still counted after every call ended", p.shares.used)
	}
}

// A share never caps a tenant below one call, however small the pool.
func TestShareCapFloor(t *testing.T) {
	if c := shareCap(1, 80); c != 1 {
		t.Fatalf("cap %d for a 1-connection pool, want 1", c)
	}
	if c := shareCap(1024, 80); c != 819 {
		t.Fatalf("cap %d, want 819", c)
	}
}

// The table against a map, through random enters and leaves of many
// tenants (deletions shift entries back, growth rehashes), and of two,
// which empty the pool often: a tenant entering an empty pool is counted
// beside the table.
func TestSharesTable(t *testing.T) {
	for _, tenantCount := range []int{2, 40} {
		var s shares
		want := map[*Tenant]int32{}
		tenants := make([]*Tenant, tenantCount)
		for i := range tenants {
			tenants[i] = NewTenant()
		}
		rng := rand.New(rand.NewPCG(1, 2))
		const limit = 3
		for range 20000 {
			tn := tenants[rng.IntN(len(tenants))]
			if rng.IntN(2) == 0 {
				ok := s.enter(tn, limit)
				if ok != (want[tn] < limit) {
					t.Fatalf("%d tenants: enter %v with %d counted", tenantCount, ok, want[tn])
				}
				if ok {
					want[tn]++
				}
			} else if want[tn] > 0 {
				s.leave(tn)
				if want[tn]--; want[tn] == 0 {
					delete(want, tn)
				}
			}
			if s.used != len(want) {
				t.Fatalf("%d tenants: %d counted, want %d", tenantCount, s.used, len(want))
			}
			for _, tn := range tenants {
				if got := s.counted(tn); got != want[tn] {
					t.Fatalf("%d tenants: tenant %d has %d, want %d", tenantCount, tn.id, got, want[tn])
				}
			}
		}
	}
}

// counted is how many calls t has in s.
func (s *shares) counted(t *Tenant) int32 {
	if s.one.t == t {
		return s.one.n
	}
	if len(s.slots) == 0 {
		return 0
	}
	if sl := s.slots[s.find(t)]; sl.t == t {
		return sl.n
	}
	return 0
}

// The share's cost per call: one enter and one leave, beside three other
// tenants with calls in the pool.
func BenchmarkShares(b *testing.B) {
	var s shares
	for range 3 {
		s.enter(NewTenant(), 100)
	}
	t := NewTenant()
	b.ReportAllocs()
	for range b.N {
		s.enter(t, 100)
		s.leave(t)
	}
}
