// The cost of the resilience mechanisms on the hot path: the bench route
// with its circuit breaker and slow-call isolation enabled (retries and
// outlier ejection are on by default everywhere).

package engine_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// resilientRoute is oneRoute with a circuit breaker and isolation on the
// route, one line each.
const resilientRoute = `
upstreams:
  - name: backend
    nodes: ["%s"]
routes:
  - id: all
    prefix: /
    upstream: backend
    circuit_breaker: {}
    isolation: {}
`

func BenchmarkProxyResilience(b *testing.B) { benchmarkProxy(b, resilientRoute, benchRequest) }

// With a breaker and isolation on the route, a request still costs no allocation in
// steady state, in the whole process.
func TestResilienceAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	pool.SetLeakDetection(false)
	defer pool.SetLeakDetection(true)
	up := startRawUpstream(t, rawBenchUpstream)
	g := startGateway(t, resilientRoute, up)
	c := g.dial(t)
	buf := make([]byte, 4096)
	if _, err := c.Write(benchRequest); err != nil {
		t.Fatal(err)
	}
	size, err := c.Read(buf)
	if err != nil || !bytes.HasPrefix(buf, []byte("HTTP/1.1 200")) {
		t.Fatalf("first response %q: %v", buf[:size], err)
	}
	roundTrip := func() {
		if _, err := c.Write(benchRequest); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAtLeast(c, buf, size); err != nil {
			t.Fatal(err)
		}
	}
	for range 1000 {
		roundTrip()
	}
	if allocs := testing.AllocsPerRun(2000, roundTrip); allocs != 0 {
		t.Fatalf("%.0f allocations per request with a circuit breaker and isolation, want 0", allocs)
	}
}
