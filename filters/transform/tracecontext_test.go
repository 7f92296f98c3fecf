// Tests for the trace_context filter: the W3C traceparent rules, edge case
// by edge case and byte by byte, and what goes upstream and to the logs.

package transform

import (
	"fmt"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/filterstest"
)

const validTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func newTrace(t testing.TB, percent int, dye string) filters.Filter {
	t.Helper()
	g := &TraceContextGlobal{TraceContext: &TraceContext{DyeHeader: dye}}
	if percent >= 0 {
		g.TraceContext.SamplePercent = &percent
	}
	if p := filterstest.Check(g, &filterstest.Env{}, nil); len(p) > 0 {
		t.Fatalf("config refused: %q", p)
	}
	return NewTraceContext(110, 1, g.TraceContext, nil)
}

func TestTraceparentEdgeCases(t *testing.T) {
	for _, tc := range []struct {
		name, tp string
		valid    bool
	}{
		{"version 00", validTP, true},
		{"not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"unknown flags kept", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09", true},
		{"later version", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"later version, extra fields", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", true},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"version 00, extra fields", validTP + "-00", false},
		{"later version, extra without dash", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false},
		{"all-zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"all-zero parent id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"upper-case trace id", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
		{"upper-case version", "0A-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false},
		{"short", validTP[:54], false},
		{"empty", "", false},
		{"trace id one short", "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01", false},
	} {
		if got := validTraceparent([]byte(tc.tp)); got != tc.valid {
			t.Errorf("%s: validTraceparent(%q) = %v, want %v", tc.name, tc.tp, got, tc.valid)
		}
	}
}

// Every byte of a valid traceparent, changed to each byte value: valid
// exactly when the result is still lower-case hex in a hex position (and
// not version ff or an all-zero id), never otherwise.
func TestTraceparentByteByByte(t *testing.T) {
	for i := 0; i < len(validTP); i++ {
		for c := 0; c < 256; c++ {
			b := []byte(validTP)
			if b[i] == byte(c) {
				continue
			}
			b[i] = byte(c)
			dash := i == 2 || i == 35 || i == 52
			hex := c >= '0' && c <= '9' || c >= 'a' && c <= 'f'
			want := !dash && hex && string(b[:2]) != "ff"
			if got := validTraceparent(b); got != want {
				t.Fatalf("byte %d = %q: valid %v, want %v (%q)", i, byte(c), got, want, b)
			}
		}
	}
}

func TestTraceContextRequest(t *testing.T) {
	f := newTrace(t, -1, "X-Dye") // sample_percent defaulted to 100
	for _, tc := range []struct {
		name  string
		lines []string
		keep  bool
	}{
		{"valid kept", []string{"traceparent: " + validTP, "tracestate: congo=t61rcWkgMzE"}, true},
		{"absent", nil, false},
		{"malformed", []string{"traceparent: " + strings.ToUpper(validTP), "tracestate: congo=t61rcWkgMzE"}, false},
		{"two fields", []string{"traceparent: " + validTP, "traceparent: " + validTP}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, raw := request(t, append([]string{"GET / HTTP/1.1", "Host: a", "X-Dye: gray-7"}, tc.lines...)...)
			x := exchange(req, "192.0.2.1")
			if v := f.Request(x); v != filters.Continue {
				t.Fatalf("verdict %v", v)
			}
			scribble(raw)
			tp, set := setValue(&x.ReqEdits, "traceparent")
			if tc.keep {
				if set || removes(&x.ReqEdits, "tracestate") || string(x.TraceID) != validTP[3:35] {
					t.Errorf("a valid traceparent was not kept: edits %+v, trace id %q", x.ReqEdits, x.TraceID)
				}
			} else {
				if !set || !validTraceparent([]byte(tp)) || tp[:3] != "00-" || tp[53:] != "01" || !removes(&x.ReqEdits, "tracestate") {
					t.Errorf("new traceparent %q (set %v), edits %+v", tp, set, x.ReqEdits)
				}
				if string(x.TraceID) != tp[3:35] {
					t.Errorf("TraceID %q, traceparent %q", x.TraceID, tp)
				}
			}
			if dye, _ := setValue(&x.RespEdits, "X-Dye"); dye != "gray-7" {
				t.Errorf("dye echoed %q", dye)
			}
		})
	}
}

func TestTraceContextSampling(t *testing.T) {
	for _, tc := range []struct {
		percent int
		flag    string
	}{{0, "00"}, {100, "01"}} {
		f := newTrace(t, tc.percent, "")
		for i := 0; i < 100; i++ {
			req, _ := request(t, "GET / HTTP/1.1", "Host: a")
			x := exchange(req, "192.0.2.1")
			f.Request(x)
			if tp, _ := setValue(&x.ReqEdits, "traceparent"); tp[53:] != tc.flag {
				t.Fatalf("sample_percent %d: %q", tc.percent, tp)
			}
		}
	}
	half := newTrace(t, 50, "")
	sampled := 0
	for i := 0; i < 2000; i++ {
		req, _ := request(t, "GET / HTTP/1.1", "Host: a")
		x := exchange(req, "192.0.2.1")
		half.Request(x)
		if tp, _ := setValue(&x.ReqEdits, "traceparent"); tp[53:] == "01" {
			sampled++
		}
	}
	if sampled < 800 || sampled > 1200 { // 2000 draws at p=0.5: ±9 sigma
		t.Errorf("sample_percent 50: %d of 2000 sampled", sampled)
	}
}

func TestTraceContextConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  TraceContext
		want string
	}{
		{TraceContext{SamplePercent: new(int)}, ""},
		{TraceContext{SamplePercent: ptr(101)}, "trace_context.sample_percent"},
		{TraceContext{SamplePercent: ptr(-1)}, "trace_context.sample_percent"},
		{TraceContext{DyeHeader: "X Dye"}, "trace_context.dye_header"},
		{TraceContext{DyeHeader: "Content-Length"}, "trace_context.dye_header"},
	} {
		g := &TraceContextGlobal{TraceContext: &tc.cfg}
		p := filterstest.Check(g, &filterstest.Env{}, nil)
		if tc.want == "" && len(p) > 0 || tc.want != "" && (len(p) != 1 || !strings.HasPrefix(p[0], tc.want)) {
			t.Errorf("%+v: problems %q, want %q", tc.cfg, p, tc.want)
		}
	}
	if g := (&TraceContextGlobal{TraceContext: &TraceContext{}}); true {
		g.Provision()
		if *g.TraceContext.SamplePercent != 100 {
			t.Errorf("sample_percent defaulted to %d", *g.TraceContext.SamplePercent)
		}
	}
}

func ptr(v int) *int { return &v }

func TestTraceContextAllocs(t *testing.T) {
	f := newTrace(t, 100, "X-Dye")
	req, _ := request(t, "GET / HTTP/1.1", "Host: a", "X-Dye: d")
	x := exchange(req, "192.0.2.1")
	id := []byte("gen-0001")
	run := func() {
		x.Reset(req, id, x.Peer, 0, nil)
		f.Request(x)
	}
	for i := 0; i < 10; i++ {
		run()
	}
	if n := testing.AllocsPerRun(1000, run); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}

func TestPutHex(t *testing.T) {
	for _, v := range []uint64{0, 1, 0x0123456789abcdef, 0xfedcba9876543210, ^uint64(0), 0xa0b0c0d0e0f09999} {
		var got [16]byte
		putHex(got[:], v)
		if want := fmt.Sprintf("%016x", v); string(got[:]) != want {
			t.Errorf("putHex(%#x) = %q, want %q", v, got, want)
		}
	}
}
