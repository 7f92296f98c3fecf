package engine_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
)

// GET /upstreams shows a node's ejection and the route's breaker.
func TestUpstreamsReport(t *testing.T) {
	good := &countingHandler{name: "good"}
	dead := closedPort(t)
	g := startGateway(t, `
upstreams:
  - name: backend
    nodes: ["%s", "%s"]
    outlier: {consecutive: 2}
routes:
  - {id: all, prefix: /, upstream: backend, circuit_breaker: {}}
`, dead, startUpstream(t, good))
	for range 8 {
		fetch(g.url("/x"))
	}
	rec := httptest.NewRecorder()
	g.srv.UpstreamsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/upstreams", nil))
	var report []struct {
		Name   string
		Routes []struct{ Route, Breaker string }
		Nodes  []struct {
			Addr              string
			Healthy, Ejected  bool
			EjectedForSeconds float64 `json:"ejected_for_seconds"`
			ConnectFailures   uint64  `json:"connect_failures"`
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &report); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if len(report) != 1 || len(report[0].Nodes) != 2 || len(report[0].Routes) != 1 || report[0].Routes[0].Breaker != "closed" {
		t.Fatalf("report %s", rec.Body)
	}
	n := report[0].Nodes[0]
	if n.Addr != dead || !n.Ejected || n.EjectedForSeconds <= 0 || n.ConnectFailures < 2 || !n.Healthy {
		t.Fatalf("dead node %+v, want ejected with time left and its connect failures", n)
	}
}
