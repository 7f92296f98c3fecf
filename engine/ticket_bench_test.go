// Benchmark of a parked request: external auth, whose sub-request answer
// resumes the request through the loop's inbox.

package engine_test

import (
	"fmt"
	"net"
	"testing"
)

// externalAuthBench routes every request through external auth; the
// first %s is the backend, the second the auth service.
const externalAuthBench = `
auth:
  external: {upstream: authsvc, path: /check, timeout: 1s}
upstreams:
  - {name: backend, nodes: ["%s"]}
  - {name: authsvc, nodes: ["%s"]}
routes:
  - {id: all, prefix: /, upstream: backend, external_auth: true}
`

// BenchmarkProxyExternalAuth: each request parks on a sub-request to the
// auth service, whose answer comes back through the ticket path (posted on
// the loop, drained when its callback ends, generation-checked), then goes
// to the backend.
func BenchmarkProxyExternalAuth(b *testing.B) {
	allow := []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-User-Id: bench-user\r\n\r\n")
	auth := startRawUpstream(b, func(c net.Conn) { rawBenchServe(c, allow) })
	config := fmt.Sprintf("loops: 1\n"+externalAuthBench, "%s", auth) // the backend's %s stays for the harness
	benchmarkProxyWith(b, rawBenchUpstream, config, benchRequest)
}
