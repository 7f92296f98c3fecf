// End-to-end hot-path benchmark: one keep-alive client through the gateway
// to a raw upstream, counting allocations of the whole process.

package engine_test

import (
	"bytes"
	"io"
	"net"
	"testing"

	"github.com/loopgate/loopgate/pool"
)

var (
	benchResponse = []byte("HTTP/1.1 200 OK\r\nContent-Length: 12\r\nContent-Type: text/plain\r\n\r\nhello world\n")
	benchRequest  = []byte("GET /api/echo HTTP/1.1\r\nHost: bench\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
)

// rawBenchUpstream answers every request head with benchResponse, without
// allocating per request.
func rawBenchUpstream(c net.Conn) {
	buf := make([]byte, 64<<10)
	pending := 0
	for {
		n, err := c.Read(buf[pending:])
		if err != nil {
			return
		}
		pending += n
		for {
			i := bytes.Index(buf[:pending], []byte("\r\n\r\n"))
			if i < 0 {
				break
			}
			if _, err := c.Write(benchResponse); err != nil {
				return
			}
			copy(buf, buf[i+4:pending])
			pending -= i + 4
		}
	}
}

func BenchmarkProxyKeepAlive(b *testing.B) {
	// Leak tracking records a stack per buffer; measure the real hot path.
	pool.SetLeakDetection(false)
	defer pool.SetLeakDetection(true)
	up := startRawUpstream(b, rawBenchUpstream)
	g := startGateway(b, oneRoute, up)
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	// The gateway's response carries the upstream's headers unchanged.
	want := len(benchResponse)
	buf := make([]byte, 4096)
	roundTrip := func() {
		if _, err := c.Write(benchRequest); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadAtLeast(c, buf, want); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 1000; i++ { // warm pools and free lists
		roundTrip()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		roundTrip()
	}
}
