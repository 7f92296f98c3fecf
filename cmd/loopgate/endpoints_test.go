package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// The admin port serves the rate limits' status: GET /limits names every
// configured limit, as the running binary mounts it.
func TestAdminServesLimits(t *testing.T) {
	up := serveUpstream(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	_, _, adminAddr := startServing(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - id: api
    prefix: /
    upstream: backend
    rate_limits:
      - {key: ip, rate: 50, burst: 20}
`, up)
	code, body, err := adminGet(adminAddr, "/limits")
	if err != nil || code != 200 {
		t.Fatalf("GET /limits: %d %v", code, err)
	}
	var status struct {
		Limits []struct {
			Name  string  `json:"name"`
			Key   string  `json:"key"`
			Rate  float64 `json:"rate"`
			Burst int64   `json:"burst"`
		} `json:"limits"`
	}
	if err := json.Unmarshal([]byte(body), &status); err != nil {
		t.Fatalf("GET /limits is not JSON: %v\n%s", err, body)
	}
	if len(status.Limits) != 1 || status.Limits[0].Key != "ip" || status.Limits[0].Rate != 50 || status.Limits[0].Burst != 20 {
		t.Fatalf("GET /limits = %s, want the route's ip limit (50/s, burst 20)", body)
	}
}

// GET /upstreams reports every node of every upstream with its health and
// the breaker of each route using it.
func TestAdminServesUpstreams(t *testing.T) {
	up := serveUpstream(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	_, _, adminAddr := startServing(t, `
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - {id: api, prefix: /, upstream: backend, circuit_breaker: {}}
`, up)
	code, body, err := adminGet(adminAddr, "/upstreams")
	if err != nil || code != 200 {
		t.Fatalf("GET /upstreams: %d %v", code, err)
	}
	var report []struct {
		Name   string `json:"name"`
		Routes []struct {
			Route, Breaker string
		} `json:"routes"`
		Nodes []struct {
			Addr    string `json:"addr"`
			Healthy bool   `json:"healthy"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(body), &report); err != nil {
		t.Fatalf("GET /upstreams is not a JSON list: %v\n%s", err, body)
	}
	if len(report) != 1 || report[0].Name != "backend" || len(report[0].Nodes) != 1 ||
		!report[0].Nodes[0].Healthy || len(report[0].Routes) != 1 || report[0].Routes[0].Breaker != "closed" {
		t.Fatalf("GET /upstreams = %s, want backend's one healthy node and route api's closed breaker", body)
	}
}
