// Tests for ForEachTrailer, ForbiddenTrailer and the decoder's trailer-section boundary (InTrailers).

package codec

import (
	"strings"
	"testing"

	"github.com/loopgate/loopgate/pool/pooltest"
)

func TestInTrailersBoundary(t *testing.T) {
	src := []byte("3\r\nabc\r\n0;e=\"x\"\r\nA: b\r\nC: d\r\n\r\nNEXT")
	var d ChunkedDecoder
	steps := []struct {
		before   bool // InTrailers before the call
		consumed string
		data     string
		done     bool
	}{
		{false, "3\r\nabc", "abc", false},
		{false, "\r\n0;e=\"x\"\r\n", "", false}, // stops right after the last-chunk line
		{true, "A: b\r\nC: d\r\n\r\n", "", true},
	}
	for i, s := range steps {
		if d.InTrailers() != s.before {
			t.Fatalf("step %d: InTrailers = %v", i, !s.before)
		}
		n, data, done, err := d.Next(src)
		if err != nil || string(src[:n]) != s.consumed || string(data) != s.data || done != s.done {
			t.Fatalf("step %d: %q, %q, %v, %v; want %+v", i, src[:n], data, done, err, s)
		}
		src = src[n:]
	}
	if d.InTrailers() || !d.Done() || string(src) != "NEXT" {
		t.Fatalf("after the body: InTrailers %v, Done %v, left %q", d.InTrailers(), d.Done(), src)
	}
	// The last-chunk LF arriving alone still ends the call, with n == 1.
	d.Reset(0)
	if n, _, _, _ := d.Next([]byte("0\r")); n != 2 || d.InTrailers() {
		t.Fatalf("0CR: n=%d InTrailers=%v", n, d.InTrailers())
	}
	if n, _, done, _ := d.Next([]byte("\n\r\n")); n != 1 || done || !d.InTrailers() {
		t.Fatalf("LF: n=%d done=%v InTrailers=%v", n, done, d.InTrailers())
	}
}

func TestForEachTrailer(t *testing.T) {
	var got []string
	collect := func(name, value []byte) { got = append(got, string(name)+"="+string(value)) }
	for _, tt := range []struct {
		section string
		want    []string
	}{
		{"\r\n", nil},
		{"", nil},
		{"A: b\r\n\r\n", []string{"A=b"}},
		{"X-Checksum: abc\r\nX-Empty:\r\nY:\t v w \t\r\n\r\n", []string{"X-Checksum=abc", "X-Empty=", "Y=v w"}},
		{"A: b\r\n\r\nC: d\r\n", []string{"A=b"}},       // stops at the end of the section
		{"junk\r\n: x\r\nA:b\r\n\r\n", []string{"A=b"}}, // lines that are not fields are skipped
		{"A: b:c\r\nD: e", []string{"A=b:c", "D=e"}},    // a truncated section still yields its lines
	} {
		got = got[:0]
		ForEachTrailer([]byte(tt.section), collect)
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("ForEachTrailer(%q) = %q, want %q", tt.section, got, tt.want)
		}
	}

	// The section the decoder collects, in any pieces, walks to the same fields.
	var d ChunkedDecoder
	res := feedChunked(t, &d, inPieces([]byte("1\r\nx\r\n0\r\nA: 1\r\nB-C:  2 \r\n\r\n"), 3)...)
	got = got[:0]
	ForEachTrailer(res.trailers, collect)
	if strings.Join(got, "|") != "A=1|B-C=2" {
		t.Fatalf("decoded section %q walks to %q", res.trailers, got)
	}
}

func TestForEachTrailerAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	section := []byte(testTrailerSection)
	count := 0
	fn := func(name, value []byte) { count++ }
	if allocs := testing.AllocsPerRun(100, func() { ForEachTrailer(section, fn) }); allocs != 0 || count == 0 {
		t.Fatalf("%v allocs per call", allocs)
	}
}

func TestForbiddenTrailer(t *testing.T) {
	forbidden := []string{
		"Content-Length", "Transfer-Encoding", "Trailer", "Host", "Connection", "Keep-Alive", "Proxy-Connection",
		"TE", "Upgrade", "Cache-Control", "Expect", "Max-Forwards", "Pragma", "Range", "If-Match", "If-None-Match",
		"If-Modified-Since", "If-Unmodified-Since", "If-Range", "If-Schedule-Tag-Match", "Authorization",
		"Proxy-Authenticate", "Proxy-Authorization", "WWW-Authenticate", "Cookie", "Set-Cookie", "Age", "Date",
		"Expires", "Location", "Retry-After", "Vary", "Warning", "Content-Encoding", "Content-Type", "Content-Range",
	}
	for _, name := range forbidden {
		for _, spelling := range []string{name, strings.ToLower(name), strings.ToUpper(name)} {
			if !ForbiddenTrailer([]byte(spelling)) {
				t.Errorf("ForbiddenTrailer(%q) = false", spelling)
			}
		}
	}
	allowed := []string{"X-Checksum", "Server-Timing", "Grpc-Status", "Grpc-Message", "Digest", "ETag",
		"Content-MD5", "If", "If-", "Ag", "Dates", "Hosts", "X-Content-Length", ""}
	for _, name := range allowed {
		if ForbiddenTrailer([]byte(name)) {
			t.Errorf("ForbiddenTrailer(%q) = true", name)
		}
	}
}

func TestForbiddenTrailerAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	name := []byte("x-checksum")
	if allocs := testing.AllocsPerRun(100, func() { ForbiddenTrailer(name) }); allocs != 0 {
		t.Fatalf("%v allocs per call", allocs)
	}
}
