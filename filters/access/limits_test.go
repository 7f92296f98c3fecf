// Tests for the limits filter.

package access

import (
	"strings"
	"testing"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

func TestLimitsFilter(t *testing.T) {
	l := codec.Limits{MaxURIBytes: 10, MaxHeaderCount: 3, MaxHeaderBytes: 80, MaxBodyBytes: 100}
	for _, tc := range []struct {
		name         string
		lines        []string
		status, code int // 0 = Continue
	}{
		{"within limits", []string{"POST /123456789 HTTP/1.1", "Host: a", "Content-Length: 100"}, 0, 0},
		{"URI too long", []string{"GET /1234567890 HTTP/1.1", "Host: a"}, 414, 41401},
		{"query counts toward URI", []string{"GET /a?bcdefghij HTTP/1.1", "Host: a"}, 414, 41401},
		{"too many headers", []string{"GET / HTTP/1.1", "Host: a", "A: 1", "B: 2", "C: 3"}, 431, 43101},
		{"head too large", []string{"GET / HTTP/1.1", "Host: a", "A: " + strings.Repeat("x", 60)}, 431, 43101},
		{"body too large", []string{"POST / HTTP/1.1", "Host: a", "Content-Length: 101"}, 413, 41301},
		{"chunked passes (checked by the decoder)", []string{"POST / HTTP/1.1", "Host: a", "Transfer-Encoding: chunked"}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewLimitsFilter(150, l)
			x := exchange(parse(t, tc.lines...), "127.0.0.1", "")
			v := f.Request(x)
			if tc.status == 0 {
				if v != filters.Continue {
					t.Fatalf("verdict %v (%+v), want continue", v, x.Rejection)
				}
				return
			}
			if v != filters.Respond || x.Rejection.Status != tc.status || x.Rejection.Code != tc.code {
				t.Fatalf("verdict %v %+v, want %d/%d", v, x.Rejection, tc.status, tc.code)
			}
		})
	}
}

func TestLimitsFilterZeroInherits(t *testing.T) {
	f := NewLimitsFilter(150, codec.Limits{})
	x := exchange(parse(t, "POST /"+strings.Repeat("a", 4000)+" HTTP/1.1", "Host: a", "Content-Length: 5000000"), "127.0.0.1", "")
	if v := f.Request(x); v != filters.Continue {
		t.Fatalf("verdict %v (%+v), want continue", v, x.Rejection)
	}
	if f.Name() != "limits" || f.Order() != 150 {
		t.Errorf("name/order %s/%d", f.Name(), f.Order())
	}
}
