package engine

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/codec"
)

// Request IDs are the loop's prefix and a 12-digit hex counter, one up per
// request, across carries and the wrap at 16^12.
func TestNextRequestIDCounts(t *testing.T) {
	l := &loop{}
	copy(l.lastID[:12], "0123456789ab")
	for _, start := range []uint64{0, 0x9, 0xf, 0xff9, 0xfff, 0x9ffff, 0xfffffffffffe} {
		copy(l.lastID[12:], fmt.Sprintf("%012x", start))
		for k := uint64(1); k <= 20; k++ {
			var id [24]byte
			n := l.nextRequestID(&id)
			want := "0123456789ab" + fmt.Sprintf("%012x", (start+k)&(1<<48-1))
			if string(id[:n]) != want {
				t.Fatalf("after %012x + %d: %s, want %s", start, k, id[:n], want)
			}
		}
	}
}

// isContentLength matches the name in any case and nothing else of its
// length, whichever byte differs.
func TestIsContentLength(t *testing.T) {
	for _, n := range []string{"content-length", "Content-Length", "CONTENT-LENGTH", "cOnTeNt-LeNgTh"} {
		if !isContentLength([]byte(n)) {
			t.Errorf("%q not matched", n)
		}
	}
	const cl = "content-length"
	for i := range cl {
		b := []byte(cl)
		b[i] = 'x'
		if isContentLength(b) {
			t.Errorf("%q matched", b)
		}
	}
	for _, n := range []string{"", "content-lengt", "content-lengths", "content_length"} {
		if isContentLength([]byte(n)) {
			t.Errorf("%q matched", n)
		}
	}
}

// headerNames finds its names in any case, and no other name, long ones
// (past the length bits) included.
func TestHeaderNames(t *testing.T) {
	long := "X-" + strings.Repeat("a", 70)
	h := newHeaderNames([]string{"X-User-Id", "X-Auth-Roles", long})
	for _, n := range []string{"x-user-id", "X-USER-ID", "x-auth-roles", strings.ToUpper(long)} {
		if !h.has([]byte(n)) {
			t.Errorf("%q not found", n)
		}
	}
	for _, n := range []string{"", "x-user-ix", "x-user-i", "x-auth-role", long + "b", "X-" + strings.Repeat("b", 70)} {
		if h.has([]byte(n)) {
			t.Errorf("%q found", n)
		}
	}
	var none headerNames
	if none.has([]byte("x-user-id")) {
		t.Error("found in the empty set")
	}
}

// appendStatusLine writes every three-digit status as strconv would, and
// anything else through strconv.
func TestAppendStatusLine(t *testing.T) {
	for _, s := range []int{0, 99, 100, 101, 200, 204, 304, 404, 418, 500, 503, 599, 999, 1000} {
		r := &codec.Response{Status: s, Reason: []byte("R")}
		if got, want := string(appendStatusLine(nil, r)), "HTTP/1.1 "+strconv.Itoa(s)+" R\r\n"; got != want {
			t.Errorf("status %d: %q, want %q", s, got, want)
		}
	}
	// The ready lines: only the exact standard reason takes one.
	for _, c := range []struct {
		status int
		reason string
	}{{200, "OK"}, {200, "ok"}, {200, ""}, {200, "OK "}, {404, "Not Found"}, {404, "Not found"}, {503, "Service Unavailable"}, {418, "I'm a teapot"}} {
		r := &codec.Response{Status: c.status, Reason: []byte(c.reason)}
		if got, want := string(appendStatusLine(nil, r)), "HTTP/1.1 "+strconv.Itoa(c.status)+" "+c.reason+"\r\n"; got != want {
			t.Errorf("status %d %q: %q, want %q", c.status, c.reason, got, want)
		}
	}
}
