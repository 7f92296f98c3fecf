// A request's cost through rate limits set far above the offered load, so
// nothing is refused: a local limit on ip, and a cluster limit on global
// with leasing against a real Redis.

package engine_test

import (
	"fmt"
	"testing"

	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// localIPLimitBench limits each client IP far above any offered load.
const localIPLimitBench = `
upstreams:
  - name: backend
    nodes: ["%s"]
routes:
  - id: all
    prefix: /
    upstream: backend
    rate_limits: [{key: ip, rate: 10000000, burst: 1000000}]
`

// clusterGlobalLimitBench shares a global limit through the Redis at the
// first %s, at its highest rate, with leasing (the default 100ms window);
// the %%s left is the backend.
const clusterGlobalLimitBench = `
redis: {addrs: ["%s"]}
cluster: {node_id: bench}
upstreams:
  - name: backend
    nodes: ["%%s"]
routes:
  - id: all
    prefix: /
    upstream: backend
    rate_limits: [{key: global, rate: 1000000, burst: 1000000, scope: cluster}]
`

func BenchmarkProxyRateLimitLocalIP(b *testing.B) {
	benchmarkProxy(b, localIPLimitBench, benchRequest)
}

func BenchmarkProxyRateLimitClusterGlobal(b *testing.B) {
	r := redistest.Start(b)
	benchmarkProxy(b, fmt.Sprintf(clusterGlobalLimitBench, r.Addr()), benchRequest)
}

// A request through a local ip limit allocates nothing, in the whole
// process.
func TestRateLimitLocalIPAllocs(t *testing.T) {
	expectNoAllocsPerRequest(t, localIPLimitBench)
}

// A request through a cluster global limit with leasing allocates nothing
// in steady state: it is served from the lease, and the rare one that
// parks on a refill costs a fraction of an allocation.
func TestRateLimitClusterGlobalAllocs(t *testing.T) {
	r := redistest.Start(t)
	expectNoAllocsPerRequest(t, fmt.Sprintf(clusterGlobalLimitBench, r.Addr()))
}

// expectNoAllocsPerRequest requires 0 allocations per keep-alive round
// trip, in the whole process, through a gateway running config (its %s the
// backend).
func expectNoAllocsPerRequest(t *testing.T, config string) {
	pooltest.SkipAllocsUnderRace(t)
	roundTrip := keepAliveClient(t, config, benchRequest)
	for range 2000 { // warm pools, free lists and the lease
		roundTrip()
	}
	if allocs := testing.AllocsPerRun(5000, roundTrip); allocs != 0 {
		t.Fatalf("%.0f allocations per request, want 0", allocs)
	}
}
