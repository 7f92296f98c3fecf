// Tests for trace_context with otlp: the gateway's span, the traceparent
// the upstream gets, and the spans a real HTTP receiver takes.

package transform

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/filterstest"
	"github.com/loopgate/loopgate/filters/transform/otlp"
	"github.com/loopgate/loopgate/pool/units"
)

// collected is one span as the receiver read it.
type collected struct {
	TraceID, SpanID, ParentSpanID, Name string
}

// exportingTrace is a trace_context filter exporting to a receiver whose
// spans arrive on the channel; batch_size 1 posts each span at once.
func exportingTrace(t *testing.T, batch int) (filters.Filter, *otlp.Exporter, chan collected) {
	t.Helper()
	got := make(chan collected, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ResourceSpans []struct {
				ScopeSpans []struct{ Spans []collected }
			}
		}
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &body); err != nil {
			t.Errorf("%v: %s", err, data)
		}
		for _, s := range body.ResourceSpans[0].ScopeSpans[0].Spans {
			got <- s
		}
	}))
	t.Cleanup(srv.Close)
	g := &TraceContextGlobal{TraceContext: &TraceContext{OTLP: &OTLP{Endpoint: srv.URL, BatchSize: batch, FlushInterval: units.Duration(time.Hour)}}}
	if p := filterstest.Check(g, &filterstest.Env{}, nil); len(p) > 0 {
		t.Fatalf("config refused: %q", p)
	}
	exp := otlp.New()
	exp.Start(1, 64)
	t.Cleanup(exp.Close)
	return NewTraceContext(110, 1, g.TraceContext, exp), exp, got
}

func TestTraceContextExportsItsSpan(t *testing.T) {
	f, _, got := exportingTrace(t, 1)
	for _, tc := range []struct {
		name, tp string
		exported bool
	}{
		{"client sampled", validTP, true},
		{"later version, extra fields", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-future", true},
		{"client not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", false},
		{"started here", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := []string{"POST /x HTTP/1.1", "Host: a", "tracestate: congo=t61rcWkgMzE"}
			if tc.tp != "" {
				lines = append(lines, "traceparent: "+tc.tp)
			}
			req, raw := request(t, lines...)
			x := exchange(req, "192.0.2.1")
			x.RouteID = "orders"
			f.Request(x)
			scribble(raw)
			fwd, set := setValue(&x.ReqEdits, "traceparent")
			x.Req, x.End = nil, filters.End{Status: 201, Duration: 1000}
			f.Done(x)
			if !tc.exported {
				if set || x.Span.Export {
					t.Fatalf("an unsampled trace changed: traceparent %q, span %+v", fwd, x.Span)
				}
				return
			}
			if !set || !validTraceparent([]byte(fwd)) || fwd[:3] != "00-" || string(x.TraceID) != fwd[3:35] {
				t.Fatalf("forwarded traceparent %q (set %v), trace id %q", fwd, set, x.TraceID)
			}
			s := <-got
			if s.TraceID != fwd[3:35] || s.SpanID != fwd[36:52] || s.Name != "POST orders" {
				t.Errorf("span %+v; forwarded %q", s, fwd)
			}
			if tc.tp == "" {
				if s.ParentSpanID != "" {
					t.Errorf("a trace started here has parent %q", s.ParentSpanID)
				}
				return
			}
			if s.ParentSpanID != tc.tp[36:52] || fwd[53:55] != tc.tp[53:55] || fwd[3:35] != tc.tp[3:35] {
				t.Errorf("span parent %q, forwarded %q; client sent %q", s.ParentSpanID, fwd, tc.tp)
			}
			if removes(&x.ReqEdits, "tracestate") {
				t.Error("the client's tracestate was dropped")
			}
		})
	}
}

// A request on the loop, its span included, allocates nothing: the sender
// is idle (batch and interval never reached) and the ring takes the spans.
func TestTraceContextExportAllocs(t *testing.T) {
	f, _, got := exportingTrace(t, 1<<16)
	req, _ := request(t, "GET / HTTP/1.1", "Host: a", "traceparent: "+validTP)
	x := exchange(req, "192.0.2.1")
	run := func() {
		x.Reset(req, x.RequestID, x.Peer, 0, nil)
		f.Request(x)
		x.Req = nil
		f.Done(x)
	}
	run() // the config's first span wakes the sender, which posts it
	<-got
	for range 10 {
		run()
	}
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}
