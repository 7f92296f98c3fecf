// W3C trace context through a gateway: traceparent kept, replaced or
// started on its way to a real upstream, baggage and a dye header carried,
// and the trace id in the access and error logs.

package engine_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const clientTrace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"

func TestTraceContextThroughGateway(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	var errLog logBuffer
	up := startUpstream(t, http.HandlerFunc(headerEcho))
	dead := closedPort(t)
	g := startLoggingGateway(t, &errLog, `
access_log: {path: %q}
trace_context: {dye_header: X-Dye}
upstreams:
  - {name: backend, nodes: ["%s"]}
  - {name: dead, nodes: ["%s"]}
routes:
  - {id: api, prefix: /api/, upstream: backend}
  - {id: down, prefix: /down/, upstream: dead}
`, path, up, dead)

	one := func(e echoed, name string) string {
		t.Helper()
		if v := e.Headers[http.CanonicalHeaderKey(name)]; len(v) == 1 {
			return v[0]
		} else if len(v) > 1 {
			t.Errorf("upstream got %d %s fields: %q", len(v), name, v)
		}
		return ""
	}

	// Valid: kept as sent (not sampled stays not sampled), with its
	// tracestate; baggage goes along; the dye comes back.
	resp, e, body := get(t, g, "/api/kept", map[string]string{"Traceparent": clientTrace,
		"Tracestate": "congo=t61rcWkgMzE", "Baggage": "gray=canary-3", "X-Dye": "gray-7"})
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if one(e, "traceparent") != clientTrace || one(e, "tracestate") != "congo=t61rcWkgMzE" || one(e, "baggage") != "gray=canary-3" {
		t.Errorf("valid trace context not passed as sent: %v", e.Headers)
	}
	if resp.Header.Get("X-Dye") != "gray-7" {
		t.Errorf("dye header not echoed: %v", resp.Header)
	}

	// Malformed (upper-case hex): a new trace, its tracestate dropped.
	_, e, _ = get(t, g, "/api/malformed", map[string]string{"Traceparent": strings.ToUpper(clientTrace), "Tracestate": "congo=x"})
	replaced := one(e, "traceparent")
	if len(replaced) != 55 || replaced[3:35] == clientTrace[3:35] || !strings.HasSuffix(replaced, "-01") || one(e, "tracestate") != "" {
		t.Errorf("malformed traceparent: upstream got %q, tracestate %q", replaced, one(e, "tracestate"))
	}

	// Absent: a new, sampled trace (sample_percent defaults to 100).
	_, e, _ = get(t, g, "/api/absent", nil)
	started := one(e, "traceparent")
	if len(started) != 55 || !strings.HasPrefix(started, "00-") || !strings.HasSuffix(started, "-01") || started[3:35] == replaced[3:35] {
		t.Errorf("absent traceparent: upstream got %q", started)
	}

	// Delivered one byte per write, the head still yields the client's
	// trace.
	c := g.dial(t)
	head := "GET /api/bytewise HTTP/1.1\r\nHost: x\r\nTraceparent: " + clientTrace + "\r\n\r\n"
	for i := 0; i < len(head); i++ {
		if _, err := io.WriteString(c, head[i:i+1]); err != nil {
			t.Fatal(err)
		}
	}
	resp, body = readResponse(t, bufio.NewReader(c), "GET")
	var be echoed
	if resp.StatusCode != 200 || json.Unmarshal(body, &be) != nil || one(be, "traceparent") != clientTrace {
		t.Errorf("byte by byte: %d %s", resp.StatusCode, body)
	}

	// A gateway error carries the trace id in its error line.
	if r := fetch(g.url("/down/x")); r.err != nil || r.resp.StatusCode != 502 {
		t.Fatalf("GET /down/x: %+v", r)
	}
	errs := waitLines(t, "error", 1, errLog.Bytes)
	if id, _ := errs[0]["trace_id"].(string); len(id) != 32 {
		t.Errorf("error line trace_id %q: %v", id, errs[0])
	}

	lines := waitLines(t, "access", 5, func() []byte { b, _ := os.ReadFile(path); return b })
	for p, want := range map[string]string{"/api/kept": clientTrace[3:35], "/api/malformed": replaced[3:35],
		"/api/absent": started[3:35], "/api/bytewise": clientTrace[3:35], "/down/x": errs[0]["trace_id"].(string)} {
		if got := byPath(t, lines, p)["trace_id"]; got != want {
			t.Errorf("access line for %s: trace_id %v, want %s", p, got, want)
		}
	}
}

// Without the trace_context section the filter does not run: traceparent
// passes untouched, none is started, and no trace id is logged.
func TestTraceContextOffByDefault(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	up := startUpstream(t, http.HandlerFunc(headerEcho))
	g := startGateway(t, "access_log: {path: %q}\n"+oneRoute, path, up)
	bad := strings.ToUpper(clientTrace)
	_, e, _ := get(t, g, "/a", map[string]string{"Traceparent": bad})
	if got := e.Headers["Traceparent"]; len(got) != 1 || got[0] != bad {
		t.Errorf("traceparent upstream %q, want the client's untouched", got)
	}
	_, e, _ = get(t, g, "/b", nil)
	if got := e.Headers["Traceparent"]; got != nil {
		t.Errorf("a trace was started with trace_context off: %q", got)
	}
	lines := waitLines(t, "access", 2, func() []byte { b, _ := os.ReadFile(path); return b })
	for _, l := range lines {
		if _, has := l["trace_id"]; has {
			t.Errorf("trace_id logged with trace_context off: %v", l)
		}
	}
}
