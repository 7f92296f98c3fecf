// Tests for the gray filter: header, cookie and weighted canary routing.

package transform

import (
	"fmt"
	"testing"
)

func TestGrayMatch(t *testing.T) {
	byHeader := &Gray{Upstream: "canary", Header: "X-Gray", Value: "true"}
	byCookie := &Gray{Upstream: "canary", Cookie: "canary", Value: "yes"}
	for _, tc := range []struct {
		name    string
		cfg     *Gray
		headers []string
		canary  bool
	}{
		{"header equals", byHeader, []string{"X-Gray: true"}, true},
		{"header name any case", byHeader, []string{"x-gray: true"}, true},
		{"header value exact", byHeader, []string{"X-Gray: TRUE"}, false},
		{"header other value", byHeader, []string{"X-Gray: false"}, false},
		{"header empty", byHeader, []string{"X-Gray:"}, false},
		{"header absent", byHeader, nil, false},
		{"cookie equals", byCookie, []string{"Cookie: a=1; canary=yes; b=2"}, true},
		{"cookie first", byCookie, []string{"Cookie: canary=yes"}, true},
		{"cookie quoted", byCookie, []string{`Cookie: canary="yes"`}, true},
		{"cookie spaces", byCookie, []string{"Cookie: a=1 ;  canary = yes "}, true},
		{"cookie in second field", byCookie, []string{"Cookie: a=1", "Cookie: canary=yes"}, true},
		{"cookie name case-sensitive", byCookie, []string{"Cookie: Canary=yes"}, false},
		{"cookie name is not a suffix match", byCookie, []string{"Cookie: xcanary=yes"}, false},
		{"cookie other value", byCookie, []string{"Cookie: canary=no"}, false},
		{"cookie without value", byCookie, []string{"Cookie: canary"}, false},
		{"header config ignores cookie", byHeader, []string{"Cookie: X-Gray=true"}, false},
		{"both configured, cookie matches", &Gray{Header: "X-Gray", Cookie: "canary", Value: "1"}, []string{"X-Gray: 0", "Cookie: canary=1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := request(t, append([]string{"GET / HTTP/1.1", "Host: a"}, tc.headers...)...)
			x := exchange(req, "192.0.2.1")
			NewGray(600, tc.cfg, 3).Request(x)
			want := -1
			if tc.canary {
				want = 3
			}
			if x.Upstream.Group != want {
				t.Errorf("group %d, want %d", x.Upstream.Group, want)
			}
		})
	}
}

// TestGrayWeight sends 10k requests with engine-style IDs (a fixed prefix
// and a hex counter) and expects about weight percent on the canary.
func TestGrayWeight(t *testing.T) {
	req, _ := request(t, "GET / HTTP/1.1", "Host: a", "X-Gray: false")
	for _, weight := range []int{0, 1, 10, 30, 50, 90, 100, 150, -5} {
		f := NewGray(600, &Gray{Header: "X-Gray", Value: "true", Weight: weight}, 1)
		const n = 10000
		canary := 0
		x := exchange(req, "192.0.2.1")
		for i := 0; i < n; i++ {
			x.Reset(req, fmt.Appendf(nil, "a1b2c3d4e5f6%012x", i), x.Peer, 0, nil)
			f.Request(x)
			if x.Upstream.Group == 1 {
				canary++
			}
		}
		want := min(max(weight, 0), 100) * n / 100
		if diff := canary - want; diff < -n/50 || diff > n/50 || (want == 0) != (canary == 0) || (want == n) != (canary == n) {
			t.Errorf("weight %d: %d of %d on the canary, want about %d", weight, canary, n, want)
		}
	}
}

func TestGrayWeightIsStablePerRequestID(t *testing.T) {
	req, _ := request(t, "GET / HTTP/1.1", "Host: a")
	f := NewGray(600, &Gray{Weight: 50}, 1)
	for i := 0; i < 100; i++ {
		id := fmt.Appendf(nil, "client-id-%d", i)
		first := -2
		for try := 0; try < 3; try++ {
			x := exchange(req, "192.0.2.1")
			x.RequestID = id
			f.Request(x)
			if first != -2 && x.Upstream.Group != first {
				t.Fatalf("id %s went to group %d, then %d", id, first, x.Upstream.Group)
			}
			first = x.Upstream.Group
		}
	}
}

// TestGrayWeightWithoutRequestID falls back to random choice; the bounds
// are over 6 standard deviations wide.
func TestGrayWeightWithoutRequestID(t *testing.T) {
	req, _ := request(t, "GET / HTTP/1.1", "Host: a")
	f := NewGray(600, &Gray{Weight: 30}, 1)
	canary := 0
	for i := 0; i < 10000; i++ {
		x := exchange(req, "192.0.2.1")
		x.RequestID = nil
		f.Request(x)
		if x.Upstream.Group == 1 {
			canary++
		}
	}
	if canary < 2700 || canary > 3300 {
		t.Errorf("%d of 10000 on the canary, want about 3000", canary)
	}
}
