package limiter_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

// benchmarkFilter runs requests from clients client IPs (4,096 for the
// benchmarks of one bucket) through the route's filter: the filter's own
// cost per request. A request that parks (a
// cluster limit's lease ran dry) waits for its resume and runs it, as the
// engine would. One goroutine offers a few million requests a second, more
// than a cluster limit counts (1e6/s), so some are refused: refused/op
// says how many.
func benchmarkFilter(b *testing.B, clients int, yaml string) {
	store := newStore(b)
	f := mustCompile(b, parse(b, yaml), store)[0]
	park := newFakeEngine()
	x := exchange(b, "192.0.2.1", park)
	req := x.Req
	ips := make([]netip.Addr, clients)
	for i := range ips {
		ips[i] = netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)})
	}
	refused := 0
	request := func(i int) {
		x.Reset(req, nil, ips[i%len(ips)], 0, park)
		v := f.Request(x)
		if v == filters.Suspend {
			v = (<-park.resumes)(x)
		}
		if v != filters.Continue {
			if x.Rejection.Code != 42902 {
				b.Fatalf("refused: %+v", x.Rejection)
			}
			refused++
		}
	}
	for i := range 10000 { // fill the table, warm the lease
		request(i)
	}
	b.ReportAllocs()
	refused = 0
	i := 0
	for b.Loop() {
		request(i)
		i++
	}
	b.ReportMetric(float64(refused)/float64(i), "refused/op")
}

func BenchmarkFilterLocalIP(b *testing.B) {
	benchmarkFilter(b, 4096, `
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 10000000, burst: 1000000}]}]`)
}

func BenchmarkFilterClusterGlobal(b *testing.B) {
	r := redistest.Start(b)
	benchmarkFilter(b, 4096, fmt.Sprintf(`
redis: {addrs: [%q]}
cluster: {node_id: bench}
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [{key: global, rate: 1000000, burst: 1000000, scope: cluster}]}]`, r.Addr()))
}

// A cluster ip limit far above the load: every client stays cold, decided
// at its local share with no Redis call.
func BenchmarkFilterClusterIPCold(b *testing.B) {
	r := redistest.Start(b)
	benchmarkFilter(b, 4096, fmt.Sprintf(`
redis: {addrs: [%q]}
cluster: {node_id: bench}
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1000000, burst: 1000000, scope: cluster}]}]`, r.Addr()))
}

// One client above its local burst: it goes hot in the warm-up and is then
// served from its lease, one Redis call per few hundred requests; one
// goroutine offers more than 1e6/s, so some are refused.
func BenchmarkFilterClusterIPHot(b *testing.B) {
	r := redistest.Start(b)
	benchmarkFilter(b, 1, fmt.Sprintf(`
redis: {addrs: [%q]}
cluster: {node_id: bench}
routes: [{id: api, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1000000, burst: 1000, scope: cluster}]}]`, r.Addr()))
}
