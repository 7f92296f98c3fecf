// Upstream nodes as the server keeps them: one per upstream name and
// address, fed by every call's outcome, and kept across reloads.

package engine_test

import (
	"fmt"
	"net/http"
	"testing"
)

// Every call's outcome reaches its node's series: responses by class and
// call durations, connect failures included; and a node that a reload
// keeps keeps its counts, while the gauges of a removed one fall to zero.
func TestNodeOutcomesAcrossReload(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/busy" {
			w.WriteHeader(503)
		}
	}))
	gone := startCountingUpstream(t, textHandler("gone"))
	dead := closedPort(t)
	const cfg = `
upstreams:
  - {name: api, nodes: ["%s"]}
  - {name: dead, nodes: ["%s"]}
  - {name: gone, nodes: ["%s"]}
routes:
  - {id: api, prefix: /, upstream: api}
  - {id: dead, prefix: /dead/, upstream: dead}
  - {id: gone, prefix: /gone/, upstream: gone}
`
	g := startGateway(t, cfg, up, dead, gone.addr)
	c := g.client(t)
	c.get("/ok")
	if resp, _ := c.get("/busy"); resp.StatusCode != 503 {
		t.Fatalf("busy: %d", resp.StatusCode)
	}
	resp, body := c.get("/dead/x")
	expectError(t, resp, body, 502, 50201)
	c.get("/gone/x")

	api := fmt.Sprintf(`upstream="api",node="%s"`, up)
	deadNode := fmt.Sprintf(`upstream="dead",node="%s"`, dead)
	goneNode := fmt.Sprintf(`upstream="gone",node="%s"`, gone.addr)
	s := waitMetric(t, g.srv, `loopgate_upstream_responses_total{`+api+`,code="5xx"}`, 1)
	if v := s.get(t, `loopgate_upstream_responses_total{`+api+`,code="2xx"}`); v != 1 {
		t.Errorf("2xx responses from api: %v", v)
	}
	checkHistogram(t, s, "loopgate_upstream_call_duration_seconds", api, 2)
	checkHistogram(t, s, "loopgate_upstream_call_duration_seconds", deadNode, 1)
	if v := s.get(t, "loopgate_upstream_pool_idle_connections{"+goneNode+"}"); v != 1 {
		t.Fatalf("idle connections to gone: %v", v)
	}

	// The reload keeps api (its node, pools and counts) and removes gone.
	g.reload(t, `
upstreams:
  - {name: api, nodes: ["%s"]}
routes:
  - {id: api, prefix: /, upstream: api}
`, up)
	c.get("/ok")
	s = waitMetric(t, g.srv, `loopgate_upstream_responses_total{`+api+`,code="2xx"}`, 2)
	checkHistogram(t, s, "loopgate_upstream_call_duration_seconds", api, 3)
	if v := s.get(t, `loopgate_upstream_connects_total{`+api+`}`); v != 1 {
		t.Errorf("api dialed %v times: its pooled connection did not survive the reload", v)
	}
	waitMetric(t, g.srv, "loopgate_upstream_pool_idle_connections{"+goneNode+"}", 0)
}
