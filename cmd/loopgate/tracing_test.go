// Trace export through the binary: a real OTLP/HTTP receiver started by the
// test takes the gateway's span of each sampled request, and the upstream
// sees the gateway's span as its parent.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestTraceContextExportsSpans(t *testing.T) {
	type span struct {
		TraceID, SpanID, ParentSpanID, Name string
		Attributes                          []struct {
			Key   string
			Value struct{ StringValue, IntValue string }
		}
	}
	spans := make(chan span, 100)
	collector := serveUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ResourceSpans []struct{ ScopeSpans []struct{ Spans []span } }
		}
		data, _ := io.ReadAll(r.Body)
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/json" || r.Header.Get("X-Key") != "k1" {
			t.Errorf("collector got %s %s %v", r.Method, r.URL, r.Header)
		}
		if err := json.Unmarshal(data, &body); err != nil {
			t.Errorf("%v: %s", err, data)
			return
		}
		for _, s := range body.ResourceSpans[0].ScopeSpans[0].Spans {
			spans <- s
		}
	})
	parents := make(chan string, 100)
	up := serveUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		parents <- r.Header.Get("traceparent")
		io.WriteString(w, "ok")
	})
	// batch_size 1: each span is posted at once (the interval never passes).
	g, listen, adminAddr := startServing(t, fmt.Sprintf(`trace_context:
  otlp: {endpoint: "http://%s", batch_size: 1, flush_interval: 1h, headers: {X-Key: k1}}
upstreams:
  - {name: b, nodes: ["%%s"]}
routes:
  - {id: api, path: /api, upstream: b}
`, collector), up)

	client := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var forwarded []string
	for _, tp := range []string{client, ""} {
		req, _ := http.NewRequest("GET", "http://"+listen+"/api", nil)
		if tp != "" {
			req.Header.Set("traceparent", tp)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		forwarded = append(forwarded, <-parents)
	}
	if f := forwarded[0]; f[:36] != client[:36] || f[52:] != client[52:] || f[36:52] == client[36:52] {
		t.Fatalf("upstream got %q for the client's %q: want the same trace and flags, the gateway's span as parent", f, client)
	}
	got := map[string]span{}
	for range 2 {
		select {
		case s := <-spans:
			got[s.SpanID] = s
		case <-time.After(10 * time.Second):
			t.Fatalf("the collector got %d spans of 2", len(got))
		}
	}
	for i, f := range forwarded {
		s, ok := got[f[36:52]]
		if !ok || s.TraceID != f[3:35] || s.Name != "GET api" {
			t.Fatalf("request %d: forwarded %q; spans %+v", i, f, got)
		}
		if want := []string{client[36:52], ""}[i]; s.ParentSpanID != want {
			t.Errorf("request %d: span parent %q, want %q", i, s.ParentSpanID, want)
		}
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[a.Key] = a.Value.StringValue + a.Value.IntValue
		}
		if attrs["http.request.method"] != "GET" || attrs["http.route"] != "api" || attrs["http.response.status_code"] != "200" ||
			!strings.HasPrefix(attrs["loopgate.node"], "127.0.0.1:") {
			t.Errorf("request %d: attributes %v", i, attrs)
		}
	}
	waitUntil(t, "the exported spans counted", g.exited, g.logs, func() bool {
		_, page, _ := adminGet(adminAddr, "/metrics")
		return strings.Contains(page, "\nloopgate_trace_spans_exported_total 2\n")
	})
}
