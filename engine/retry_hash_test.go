package engine_test

import (
	"fmt"
	"io"
	"net/http"
	"testing"
)

// A consistent-hash request whose node refuses connections is retried on
// the key's next node on the ring, the same one every time, not on
// whatever node the balancer's turn gives.
func TestRetryKeepsHashKeyOnTheRing(t *testing.T) {
	named := func(name string) string {
		return startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) }))
	}
	g := startGateway(t, `
loops: 1
upstreams:
  - name: backend
    nodes: ["%s", "%s", "%s"]
    outlier: {enabled: false}
routes:
  - {id: sticky, prefix: /, upstream: backend, hash: {header: X-Session}}
`, closedPort(t), named("b"), named("c"))
	for k := 0; k < 20; k++ {
		key := fmt.Sprintf("session-%d", k)
		first := ""
		for i := 0; i < 6; i++ {
			resp, _, body := get(t, g, "/x", map[string]string{"X-Session": key})
			if resp.StatusCode != 200 {
				t.Fatalf("key %s: status %d", key, resp.StatusCode)
			}
			switch {
			case first == "":
				first = string(body)
			case string(body) != first:
				t.Fatalf("key %s went to node %s, then to %s: its retries do not follow the ring", key, first, body)
			}
		}
	}
}
