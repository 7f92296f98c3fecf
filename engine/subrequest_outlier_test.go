package engine_test

import (
	"io"
	"net/http"
	"testing"
)

// Sub-requests pick their node as the proxy does, passing over nodes
// outlier detection has ejected: once the auth service's dead node is out,
// every external-auth call goes to the live one.
func TestSubRequestsSkipEjectedNodes(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "upstream") }))
	authSrv := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("X-User-Id", "u-1")
	}))
	g := startGateway(t, `
loops: 1
auth:
  external: {upstream: authsvc, timeout: 2s}
upstreams:
  - {name: backend, nodes: ["%s"]}
  - name: authsvc
    nodes: ["%s", "%s"]
    outlier: {consecutive: 1, base_ejection: 1m}
routes:
  - {id: ext, prefix: /, upstream: backend, external_auth: true}
`, up, closedPort(t), authSrv)
	// Round robin starts at the dead node: the first call fails there and
	// ejects it.
	failed := 0
	for i := 0; i < 12; i++ {
		resp, _, _ := get(t, g, "/x", map[string]string{"Authorization": "Bearer t"})
		if resp.StatusCode != 200 {
			failed++
		}
	}
	if failed > 1 {
		t.Fatalf("%d of 12 requests failed their auth call: sub-requests still pick the ejected node", failed)
	}
}
