// A parked request's cost: external auth, whose sub-request answer resumes
// the request through the loop's inbox.

package engine_test

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// externalAuthBench routes every request through external auth on one
// loop; the first %s is the backend, the second the auth service.
const externalAuthBench = `
loops: 1
auth:
  external: {upstream: authsvc, path: /check, timeout: 1s}
upstreams:
  - {name: backend, nodes: ["%s"]}
  - {name: authsvc, nodes: ["%s"]}
routes:
  - {id: all, prefix: /, upstream: backend, external_auth: true}
`

// externalAuthConfig is externalAuthBench with an auth service that admits
// every request, leaving the backend's %s to the harness.
func externalAuthConfig(t testing.TB) string {
	allow := []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-User-Id: bench-user\r\n\r\n")
	auth := startRawUpstream(t, func(c net.Conn) { rawBenchServe(c, allow) })
	return fmt.Sprintf(externalAuthBench, "%s", auth)
}

// BenchmarkProxyExternalAuth: each request parks on a sub-request to the
// auth service, whose answer comes back through the ticket path (posted on
// the loop, drained when its callback ends, generation-checked), then goes
// to the backend.
func BenchmarkProxyExternalAuth(b *testing.B) {
	benchmarkProxyWith(b, rawBenchUpstream, externalAuthConfig(b), benchRequest)
}

// A request parked on external auth and resumed through the inbox costs no
// allocation in steady state, in the whole process.
func TestExternalAuthParkAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	pool.SetLeakDetection(false)
	defer pool.SetLeakDetection(true)
	up := startRawUpstream(t, rawBenchUpstream)
	g := startGateway(t, externalAuthConfig(t), up)
	c := g.dial(t)
	buf := make([]byte, 4096)
	if _, err := c.Write(benchRequest); err != nil {
		t.Fatal(err)
	}
	size, err := c.Read(buf) // the first response tells the size of all
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
	for range 1000 { // warm pools and free lists
		roundTrip()
	}
	// The loop's ticker allocates per tick (gnet's Execute), a few per
	// 10 ms: well under one per round trip over 2000 of them.
	if allocs := testing.AllocsPerRun(2000, roundTrip); allocs != 0 {
		t.Fatalf("%.0f allocations per parked request, want 0", allocs)
	}
}
