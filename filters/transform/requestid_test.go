// Tests for the request_id filter.

package transform

import (
	"strings"
	"testing"

	"github.com/loopgate/loopgate/filters"
)

func TestRequestID(t *testing.T) {
	long := strings.Repeat("a", MaxRequestIDLen)
	for _, tc := range []struct {
		name     string
		incoming string // "" = no header
		want     string
	}{
		{"absent: generated", "", "gen-0001"},
		{"valid kept", "abc-DEF_123.xyz", "abc-DEF_123.xyz"},
		{"longest kept", long, long},
		{"too long replaced", long + "a", "gen-0001"},
		{"bad character replaced", "abc def", "gen-0001"},
		{"injection attempt replaced", `"}{"x":1`, "gen-0001"},
		{"slash replaced", "a/b", "gen-0001"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lines := []string{"GET / HTTP/1.1", "Host: a"}
			if tc.incoming != "" {
				lines = append(lines, "X-Request-Id: "+tc.incoming)
			}
			req, raw := request(t, lines...)
			x := exchange(req, "192.0.2.1")
			f := NewRequestID(100)
			if v := f.Request(x); v != filters.Continue {
				t.Fatalf("verdict %v", v)
			}
			scribble(raw)
			if string(x.RequestID) != tc.want {
				t.Errorf("RequestID = %q, want %q", x.RequestID, tc.want)
			}
			if got, _ := setValue(&x.ReqEdits, "X-Request-Id"); got != tc.want {
				t.Errorf("upstream X-Request-Id = %q, want %q", got, tc.want)
			}
			if got, _ := setValue(&x.RespEdits, "X-Request-Id"); got != tc.want {
				t.Errorf("response X-Request-Id = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRequestIDEmptyHeaderIgnored(t *testing.T) {
	req, _ := request(t, "GET / HTTP/1.1", "Host: a", "X-Request-Id:")
	x := exchange(req, "192.0.2.1")
	NewRequestID(100).Request(x)
	if string(x.RequestID) != "gen-0001" {
		t.Errorf("RequestID = %q", x.RequestID)
	}
}

func TestRequestIDWithoutGeneratedID(t *testing.T) {
	req, _ := request(t, "GET / HTTP/1.1", "Host: a", "X-Request-Id: bad id")
	x := exchange(req, "192.0.2.1")
	x.RequestID = nil
	NewRequestID(100).Request(x)
	if len(x.ReqEdits.Set) != 0 || len(x.RespEdits.Set) != 0 || !removes(&x.ReqEdits, "X-Request-Id") {
		t.Errorf("want the invalid ID removed and nothing set; edits %+v / %+v", x.ReqEdits, x.RespEdits)
	}
}
