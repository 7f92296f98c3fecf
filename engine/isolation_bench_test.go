// The cost of a refusal: a request over its route's isolation limit
// (429/42901) or over its route's share of the pool (503/50302) must cost
// no more than a small proxied response, and nothing per request, or a
// storm of refusals takes the CPU the routes it protects need.

package engine_test

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// Routes whose every request is refused once one call to /hold is held:
// "limit" by its isolation limit of 1 with the queue off, "share" by its
// share of a one-connection pool (default isolation).
const (
	refusedByLimit = `
upstreams: [{name: u, nodes: ["%s"]}]
routes: [{id: r, prefix: /, upstream: u, isolation: {limit: 1, floor: 1, queue: 0}}]
`
	refusedByShare = `
loops: 1 # pools are per loop: the held call and the client on the same one
upstreams: [{name: u, nodes: ["%s"], max_conns: 1}]
routes: [{id: r, prefix: /, upstream: u}]
`
)

// refusalRig starts a gateway running config in front of an upstream that
// holds /hold until the test ends, holds one such call, and returns a
// keep-alive client connection and the size of the refusal it gets.
func refusalRig(tb testing.TB, config string, status string) (c net.Conn, size int) {
	tb.Helper()
	hold := make(chan struct{})
	var held atomic.Int64
	up := startUpstream(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" {
			held.Add(1)
			<-hold
		}
		io.WriteString(w, "ok")
	}))
	g := startGateway(tb, config, up)
	var once sync.Once
	tb.Cleanup(func() { once.Do(func() { close(hold) }) }) // before the gateway's shutdown
	go fetch(g.url("/hold"))
	for deadline := time.Now().Add(10 * time.Second); held.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatal("the /hold call never reached the upstream")
		}
	}
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	buf := make([]byte, 4096)
	if _, err := c.Write(benchRequest); err != nil {
		tb.Fatal(err)
	}
	size, err = c.Read(buf)
	if err != nil || !bytes.HasPrefix(buf, []byte("HTTP/1.1 "+status)) {
		tb.Fatalf("first refusal %q: %v", buf[:size], err)
	}
	return c, size
}

// refuseOnce sends one request on c and reads its refusal of size bytes.
func refuseOnce(tb testing.TB, c net.Conn, buf []byte, size int) {
	if _, err := c.Write(benchRequest); err != nil {
		tb.Fatal(err)
	}
	if _, err := io.ReadAtLeast(c, buf[:size], size); err != nil {
		tb.Fatal(err)
	}
}

func benchmarkRefusal(b *testing.B, config, status string) {
	pool.SetLeakDetection(false) // it records a stack per buffer: measure the real path
	defer pool.SetLeakDetection(true)
	c, size := refusalRig(b, config, status)
	buf := make([]byte, 4096)
	for range 1000 {
		refuseOnce(b, c, buf, size)
	}
	b.ReportAllocs()
	b.ResetTimer()
	before := cpuTime()
	for range b.N {
		refuseOnce(b, c, buf, size)
	}
	b.ReportMetric(float64(cpuTime()-before)/float64(b.N), "cpu-ns/op")
}

// Compare cpu-ns/op with BenchmarkProxyKeepAlive's in the same run.
func BenchmarkRefusalIsolationLimit(b *testing.B) { benchmarkRefusal(b, refusedByLimit, "429") }
func BenchmarkRefusalPoolShare(b *testing.B)      { benchmarkRefusal(b, refusedByShare, "503") }

// A refusal allocates nothing, in the whole process, by the limit or by
// the share (whose 5xx error lines are rate limited).
func TestRefusalAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	pool.SetLeakDetection(false)
	defer pool.SetLeakDetection(true)
	for name, rig := range map[string]struct{ config, status string }{
		"isolation limit": {refusedByLimit, "429"},
		"pool share":      {refusedByShare, "503"},
	} {
		t.Run(name, func(t *testing.T) {
			c, size := refusalRig(t, rig.config, rig.status)
			buf := make([]byte, 4096)
			for range 1000 {
				refuseOnce(t, c, buf, size)
			}
			if allocs := testing.AllocsPerRun(2000, func() { refuseOnce(t, c, buf, size) }); allocs != 0 {
				t.Fatalf("%.0f allocations per refusal, want 0", allocs)
			}
		})
	}
}
