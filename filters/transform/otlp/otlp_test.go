// Tests for the span exporter: the ring's bounds, the JSON a collector
// reads, and posts to a real HTTP receiver, refused, retried and flushed.

package otlp

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

func span(i int) Span {
	s := Span{Start: int64(i), End: int64(i) + 1000, Status: 200, Route: "api", Node: "127.0.0.1:9", Reason: "served"}
	s.TraceID[0], s.SpanID[0] = 0xab, byte(i)+1
	s.SetMethod([]byte("GET"))
	return s
}

func TestRingBoundsAndOrder(t *testing.T) {
	r := newRing(5) // rounded up to 8
	for i := range 8 {
		s := span(i)
		if n := r.push(&s); n != uint64(i+1) {
			t.Fatalf("push %d: holds %d", i, n)
		}
	}
	s := span(9)
	if r.push(&s) != 0 || r.dropped.Load() != 1 {
		t.Fatalf("a full ring took a span (dropped %d)", r.dropped.Load())
	}
	var got []int64
	r.pop(3, func(s *Span) { got = append(got, s.Start) })
	r.pop(100, func(s *Span) { got = append(got, s.Start) })
	for i, v := range got {
		if v != int64(i) {
			t.Fatalf("popped %v, want 0..7 in order", got)
		}
	}
	if len(got) != 8 || r.len() != 0 {
		t.Fatalf("popped %d, %d left", len(got), r.len())
	}
	if r.push(&s) == 0 {
		t.Fatal("an emptied ring refuses a span")
	}
}

// exportRequest is the part of an ExportTraceServiceRequest the tests read.
type exportRequest struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []attr `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Spans []struct {
				TraceID      string `json:"traceId"`
				SpanID       string `json:"spanId"`
				ParentSpanID string `json:"parentSpanId"`
				Name         string `json:"name"`
				Kind         int    `json:"kind"`
				Start        string `json:"startTimeUnixNano"`
				End          string `json:"endTimeUnixNano"`
				Attributes   []attr `json:"attributes"`
				Status       struct {
					Code int `json:"code"`
				} `json:"status"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type attr struct {
	Key   string `json:"key"`
	Value struct {
		String string `json:"stringValue"`
		Int    string `json:"intValue"`
	} `json:"value"`
}

func TestEncode(t *testing.T) {
	a, b := span(0), span(1)
	b.ParentID[7] = 0x42
	b.Status, b.Route = 502, "we\"ird\n\xff"
	var req exportRequest
	data := Encode(nil, "gw", []Span{a, b})
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	rs := req.ResourceSpans[0]
	if rs.Resource.Attributes[0].Key != "service.name" || rs.Resource.Attributes[0].Value.String != "gw" {
		t.Errorf("resource %+v", rs.Resource)
	}
	spans := rs.ScopeSpans[0].Spans
	if len(spans) != 2 {
		t.Fatalf("%d spans", len(spans))
	}
	s := spans[0]
	if s.TraceID != "ab000000000000000000000000000000" || s.SpanID != "0100000000000000" || s.ParentSpanID != "" ||
		s.Name != "GET api" || s.Kind != 2 || s.Start != "0" || s.End != "1000" || s.Status.Code != 0 {
		t.Errorf("span %+v", s)
	}
	want := map[string]string{"http.request.method": "GET", "http.route": "api", "http.response.status_code": "200",
		"loopgate.node": "127.0.0.1:9", "loopgate.end": "served"}
	for _, a := range s.Attributes {
		if v := a.Value.String + a.Value.Int; v != want[a.Key] {
			t.Errorf("attribute %s = %q, want %q", a.Key, v, want[a.Key])
		}
		delete(want, a.Key)
	}
	if len(want) > 0 {
		t.Errorf("attributes missing: %v", want)
	}
	if s := spans[1]; s.ParentSpanID != "0000000000000042" || s.Status.Code != 2 || s.Name != "GET we\"ird\n\ufffd" {
		t.Errorf("second span %+v", s)
	}
}

// receiver is a collector: it answers the statuses given in turn (then
// 200), and keeps the spans of every post it took.
type receiver struct {
	mu      sync.Mutex
	answers []int
	posts   int
	spans   []string // span ids
	headers http.Header
	got     chan struct{}
}

func newReceiver(t *testing.T, answers ...int) (*receiver, *httptest.Server) {
	r := &receiver{answers: answers, got: make(chan struct{}, 100)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.posts++
		r.headers = req.Header.Clone()
		status := 200
		if len(r.answers) > 0 {
			status, r.answers = r.answers[0], r.answers[1:]
		}
		if status == 200 {
			var er exportRequest
			if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &er) != nil {
				status = 400
			} else {
				for _, s := range er.ResourceSpans[0].ScopeSpans[0].Spans {
					r.spans = append(r.spans, s.SpanID)
				}
			}
		}
		r.mu.Unlock()
		w.WriteHeader(status)
		r.got <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	return r, srv
}

func (r *receiver) count() (posts, spans int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.posts, len(r.spans)
}

func TestExporterBatchesRetriesAndCounts(t *testing.T) {
	rcv, srv := newReceiver(t, 503) // the first post fails once, then is retried
	o := &Options{Endpoint: srv.URL, BatchSize: 4, Headers: map[string]string{"X-Api-Key": "k"}}
	o.Provision()
	e := New()
	e.Start(1, 8)
	defer e.Close()
	// The first span of a config wakes the sender (it learns the flush
	// interval); its post is refused with a 503 and retried.
	s := span(0)
	e.Record(0, o, &s)
	<-rcv.got
	for i := range 4 { // a full batch wakes the sender again
		s := span(1 + i)
		e.Record(0, o, &s)
	}
	<-rcv.got
	<-rcv.got
	if posts, spans := rcv.count(); posts != 3 || spans != 5 {
		t.Fatalf("posts %d, spans %d; want the first span retried once, then the batch of 4", posts, spans)
	}
	e.Close() // the sender has counted what it posted
	if rcv.headers.Get("X-Api-Key") != "k" {
		t.Errorf("headers %v", rcv.headers)
	}
	if e.exported.Load() != 5 || e.posts.Load() != 3 {
		t.Errorf("exported %d, posts %d", e.exported.Load(), e.posts.Load())
	}
}

func TestExporterGivesUpOnARefusal(t *testing.T) {
	rcv, srv := newReceiver(t, 400)
	o := &Options{Endpoint: srv.URL + "/v1/traces", BatchSize: 2}
	o.Provision()
	e := New()
	e.Start(1, 8)
	defer e.Close()
	for i := range 2 {
		s := span(i)
		e.Record(0, o, &s)
	}
	<-rcv.got
	e.Close()
	if posts, _ := rcv.count(); posts != 1 || e.failed.Load() != 2 {
		t.Errorf("posts %d, failed %d: a 400 is not retried", posts, e.failed.Load())
	}
}

// Close posts what the rings hold; a full ring drops and counts.
func TestExporterCloseFlushesAndFullRingDrops(t *testing.T) {
	rcv, srv := newReceiver(t)
	o := &Options{Endpoint: srv.URL, BatchSize: 100, FlushInterval: time.Hour} // never reached: only Close posts
	o.Provision()
	e := New()
	e.Start(2, 4)
	for loop := range 2 { // each ring's first span wakes the sender, which posts it
		s := span(100 + loop)
		e.Record(loop, o, &s)
	}
	for _, n := rcv.count(); n < 2; _, n = rcv.count() {
		<-rcv.got
	}
	for i := range 6 {
		s := span(i)
		e.Record(i%2, o, &s)
	}
	for i := range 4 {
		s := span(10 + i)
		e.Record(0, o, &s) // loop 0 holds 3, takes 1 more, drops 3
	}
	e.Close()
	if _, spans := rcv.count(); spans != 2+7 {
		t.Errorf("%d spans posted, want 2 and then 7 at close", spans)
	}
	var page strings.Builder
	e.WriteMetrics(&page)
	for _, line := range []string{"loopgate_trace_spans_dropped_total 3", "loopgate_trace_spans_exported_total 9"} {
		if !strings.Contains(page.String(), "\n"+line+"\n") {
			t.Errorf("metrics lack %q:\n%s", line, page.String())
		}
	}
}

func TestOptionsDefaultsAndValidate(t *testing.T) {
	o := &Options{Endpoint: "http://collector:4318"}
	o.Provision()
	if o.Endpoint != "http://collector:4318/v1/traces" || o.BatchSize != 512 || o.QueueSize != 4096 ||
		o.FlushInterval != DefaultFlushInterval || o.Timeout != DefaultTimeout || o.ServiceName != "loopgate" {
		t.Errorf("defaults %+v", o)
	}
	if p := o.Validate(); len(p) != 0 {
		t.Errorf("problems %v", p)
	}
	for _, bad := range []Options{{Endpoint: "collector:4318"}, {Endpoint: "ftp://x/"}, {Endpoint: "http://x", BatchSize: -1}} {
		bad.Provision()
		if p := bad.Validate(); len(p) != 1 {
			t.Errorf("%+v: problems %v", bad, p)
		}
	}
}

// BenchmarkRecord is an event loop's side in steady state: a span copied
// into the ring, which the sender (here the benchmark itself) empties.
func BenchmarkRecord(b *testing.B) {
	o := &Options{Endpoint: "http://127.0.0.1:1", BatchSize: 1 << 20}
	o.Provision()
	e := New()
	e.rings.Store(&[]*ring{newRing(1024)}) // no sender: the benchmark drains
	s := span(1)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e.Record(0, o, &s)
		if i++; i == 512 {
			(*e.rings.Load())[0].pop(1024, func(*Span) {})
			i = 0
		}
	}
}

// BenchmarkEncode is the sender's encoding of one span, in a batch of
// 512 into a reused buffer.
func BenchmarkEncode(b *testing.B) {
	spans := make([]Span, 512)
	for i := range spans {
		spans[i] = span(i)
	}
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		buf = Encode(buf[:0], "loopgate", spans)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/512, "ns/span")
	b.SetBytes(int64(len(buf)))
}
