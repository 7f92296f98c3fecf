// Tests for ChunkedDecoder and the chunk encoding helpers.

package codec

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// within reports whether view lies inside buf (an empty view always does).
func within(view, buf []byte) bool {
	if len(view) == 0 {
		return true
	}
	if len(buf) == 0 {
		return false
	}
	v, b := uintptr(unsafe.Pointer(unsafe.SliceData(view))), uintptr(unsafe.Pointer(unsafe.SliceData(buf)))
	return v >= b && v+uintptr(len(view)) <= b+uintptr(len(buf))
}

// decodeResult is everything a caller observes from feeding a body.
type decodeResult struct {
	payload  []byte
	trailers []byte // the bytes consumed while InTrailers: the trailer section
	consumed int
	done     bool
	err      error
}

// feedChunked drives d the way a connection does: pieces arrive one after another, unconsumed
// bytes stay pending, and Next is called while it makes progress.
func feedChunked(t testing.TB, d *ChunkedDecoder, pieces ...[]byte) decodeResult {
	var res decodeResult
	var pending []byte
	for _, p := range pieces {
		pending = append(pending, p...)
		for len(pending) > 0 {
			inTrailers := d.InTrailers()
			n, data, done, err := d.Next(pending)
			if err != nil {
				if n != 0 || data != nil || done {
					t.Fatalf("error %v with n=%d data=%q done=%v", err, n, data, done)
				}
				res.err = err
				return res
			}
			if n < 0 || n > len(pending) || !within(data, pending[:n]) {
				t.Fatalf("Next returned n=%d (len %d) or data outside src[:n]", n, len(pending))
			}
			if inTrailers {
				if data != nil {
					t.Fatalf("payload %q inside the trailer section", data)
				}
				res.trailers = append(res.trailers, pending[:n]...)
			} else if d.InTrailers() && (data != nil || pending[n-1] != '\n') {
				t.Fatalf("the call that entered the trailer section did not stop after the last-chunk line: %q", pending[:n])
			}
			if d.InTrailers() && done {
				t.Fatal("InTrailers after done")
			}
			res.payload = append(res.payload, data...)
			res.consumed += n
			pending = pending[n:]
			if done != d.Done() {
				t.Fatalf("done=%v but Done()=%v", done, d.Done())
			}
			if done {
				res.done = true
				return res
			}
			if n == 0 {
				break
			}
		}
	}
	return res
}

func bytewise(b []byte) [][]byte { return inPieces(b, 1) }

// inPieces cuts b into pieces of size bytes (the last may be shorter).
func inPieces(b []byte, size int) [][]byte {
	var pieces [][]byte
	for len(b) > size {
		pieces = append(pieces, b[:size])
		b = b[size:]
	}
	return append(pieces, b)
}

// cutPoints lists where tests that try every cut of an n-byte input cut
// it: everywhere in a short input; in the long limit cases, everywhere
// within 64 bytes of either end and at a sample in between, since the full
// quadratic sweep costs seconds under -race and says nothing more.
func cutPoints(n int) []int {
	var ks []int
	for k := 0; k <= n; k++ {
		if n <= 512 || k <= 64 || k >= n-64 || k%97 == 0 {
			ks = append(ks, k)
		}
	}
	return ks
}

// testExtensions is a chunk-ext using every form: name only, token value, quoted value with ';', '=',
// a quoted-pair, HTAB and obs-text.
const testExtensions = ";name=value;flag;q=\"quo\\\"ted;=\t\xff\""

// testTrailerSection is the trailer section encodeChunked appends after "0;last\r\n".
const testTrailerSection = "X-Checksum: abc\r\nX-Empty:\r\n\r\n"

// encodeChunked frames payload as chunked with random chunk sizes, and optionally extensions and trailers.
func encodeChunked(rng *rand.Rand, payload []byte, ext, trailers bool) []byte {
	var out []byte
	for len(payload) > 0 {
		n := min(len(payload), 1+rng.IntN(3000))
		if rng.IntN(4) == 0 {
			n = min(len(payload), 1+rng.IntN(4))
		}
		out = AppendChunkHeader(out, n)
		if ext {
			out = out[:len(out)-2]
			out = append(out, testExtensions+"\r\n"...)
		}
		out = append(out, payload[:n]...)
		out = append(out, "\r\n"...)
		payload = payload[n:]
	}
	if trailers {
		return append(out, "0;last\r\n"+testTrailerSection...)
	}
	return append(out, LastChunk...)
}

func TestChunkedRoundTripSHA256(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{0, 1, 2, 15, 16, 17, 255, 4096, 65537}
	for range 20 {
		sizes = append(sizes, rng.IntN(200000))
	}
	for _, size := range sizes {
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(rng.Uint32())
		}
		for _, variant := range []struct{ ext, trailers bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			enc := encodeChunked(rng, payload, variant.ext, variant.trailers)
			input := append(append([]byte(nil), enc...), "GET / HTTP/1.1\r\n"...) // next pipelined message
			var d ChunkedDecoder
			d.Reset(0)
			res := feedChunked(t, &d, input)
			if res.err != nil || !res.done || res.consumed != len(enc) {
				t.Fatalf("size %d %+v: err=%v done=%v consumed=%d want %d", size, variant, res.err, res.done, res.consumed, len(enc))
			}
			if sha256.Sum256(res.payload) != sha256.Sum256(payload) {
				t.Fatalf("size %d %+v: payload digest mismatch", size, variant)
			}
			wantTrailers := "\r\n"
			if variant.trailers {
				wantTrailers = testTrailerSection
			}
			if string(res.trailers) != wantTrailers {
				t.Fatalf("size %d %+v: trailer section %q, want %q", size, variant, res.trailers, wantTrailers)
			}
			if n, data, done, err := d.Next([]byte("more")); n != 0 || data != nil || !done || err != nil {
				t.Fatalf("Next after done = %d, %q, %v, %v", n, data, done, err)
			}
		}
	}
}

func TestChunkedEverySplit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	payload := []byte("The quick brown fox jumps over the lazy dog, twice over.")
	for _, trailers := range []bool{false, true} {
		enc := encodeChunked(rng, payload, true, trailers)
		want := decodeResult{payload: payload, trailers: []byte("\r\n"), consumed: len(enc), done: true}
		if trailers {
			want.trailers = []byte(testTrailerSection)
		}
		var d ChunkedDecoder
		for k := 0; k <= len(enc); k++ {
			d.Reset(0)
			checkDecode(t, fmt.Sprintf("split %d", k), feedChunked(t, &d, enc[:k], enc[k:]), want)
		}
		for _, size := range []int{1, 3, 13} {
			d.Reset(0)
			checkDecode(t, fmt.Sprintf("%d-byte pieces", size), feedChunked(t, &d, inPieces(enc, size)...), want)
		}
	}
}

func checkDecode(t *testing.T, how string, got, want decodeResult) {
	t.Helper()
	if got.err != want.err || got.done != want.done || got.consumed != want.consumed ||
		!bytes.Equal(got.payload, want.payload) || !bytes.Equal(got.trailers, want.trailers) {
		t.Fatalf("%s: got %+v, want %+v", how, got, want)
	}
}

func TestChunkedAccepted(t *testing.T) {
	tests := []struct{ name, in, payload, trailers string }{
		{"empty body", "0\r\n\r\n", "", "\r\n"},
		{"uppercase hex", "A\r\n0123456789\r\n0\r\n\r\n", "0123456789", "\r\n"},
		{"leading zeros", "0000000000000005\r\nhello\r\n000\r\n\r\n", "hello", "\r\n"},
		{"extensions", "5;a=b;c\r\nhello\r\n0;x=\"y\"\r\n\r\n", "hello", "\r\n"},
		{"every extension form", "5" + testExtensions + "\r\nhello\r\n0" + testExtensions + "\r\n\r\n", "hello", "\r\n"},
		{"empty quoted value", "1;a=\"\"\r\nx\r\n0\r\n\r\n", "x", "\r\n"},
		{"quoted-pair of a quote and a backslash", "1;a=\"\\\"\\\\\"\r\nx\r\n0\r\n\r\n", "x", "\r\n"},
		{"token chars in names and values", "1;!#$%&'*+-.^_`|~=!#$%&'*+-.^_`|~\r\nx\r\n0\r\n\r\n", "x", "\r\n"},
		{"extension at line limit", "1;" + strings.Repeat("e", maxChunkLineBytes-2) + "\r\nx\r\n0\r\n\r\n", "x", "\r\n"},
		{"trailers", "1\r\nx\r\n0\r\nA: b\r\nC:\td \r\n\r\n", "x", "A: b\r\nC:\td \r\n\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := decodeResult{payload: []byte(tt.payload), trailers: []byte(tt.trailers), consumed: len(tt.in), done: true}
			if tt.payload == "" {
				want.payload = nil
			}
			var d ChunkedDecoder // the zero value is ready
			checkDecode(t, "whole", feedChunked(t, &d, []byte(tt.in)), want)
			for _, k := range cutPoints(len(tt.in)) {
				d.Reset(0)
				checkDecode(t, fmt.Sprintf("split %d", k), feedChunked(t, &d, []byte(tt.in[:k]), []byte(tt.in[k:])), want)
			}
			for _, size := range []int{1, 3, 13} {
				d.Reset(0)
				checkDecode(t, fmt.Sprintf("%d-byte pieces", size), feedChunked(t, &d, inPieces([]byte(tt.in), size)...), want)
			}
		})
	}
}

var badChunked = []struct {
	name, in string
	want     *Error
}{
	{"non-hex size", "x\r\n", ErrBadChunk},
	{"empty size", "\r\n", ErrBadChunk},
	{"empty size with extension", ";a\r\n", ErrBadChunk},
	{"negative size", "-1\r\n", ErrBadChunk},
	{"0x prefix", "0x10\r\n", ErrBadChunk},
	{"17 hex digits", "00000000000000001\r\n", ErrBadChunk},
	{"size over int64", "8000000000000000\r\n", ErrBadChunk},
	{"space after size", "a \r\n0123456789\r\n0\r\n\r\n", ErrBadChunk},
	{"tab after size", "a\t\r\n0123456789\r\n0\r\n\r\n", ErrBadChunk},
	{"space before extension", "a ;x\r\n0123456789\r\n0\r\n\r\n", ErrBadChunk},
	{"space after semicolon", "1; a\r\nx\r\n", ErrBadChunk},
	{"space before equals", "1;a =b\r\nx\r\n", ErrBadChunk},
	{"space after equals", "1;a= b\r\nx\r\n", ErrBadChunk},
	{"space after extension", "1;a=b \r\nx\r\n", ErrBadChunk},
	{"space after last-chunk", "0 \r\n\r\n", ErrBadChunk},
	{"junk after size", "1 x\r\n", ErrBadChunk},
	{"empty extension name", "2;\r\nab\r\n0\r\n\r\n", ErrBadChunk},
	{"empty extension between", "1;a;;b\r\nx\r\n", ErrBadChunk},
	{"unbalanced quote", "5;a=\"abc;x\r\nhello\r\n0\r\n\r\n", ErrBadChunk},
	{"empty extension value", "5;a=\r\nhello\r\n0\r\n\r\n", ErrBadChunk},
	{"value without name", "5;=b\r\nhello\r\n0\r\n\r\n", ErrBadChunk},
	{"second equals", "1;a=b=c\r\nx\r\n", ErrBadChunk},
	{"junk after quoted value", "1;a=\"b\"c\r\nx\r\n", ErrBadChunk},
	{"quote inside token value", "1;a=b\"c\"\r\nx\r\n", ErrBadChunk},
	{"quote in name", "1;\"a\"\r\nx\r\n", ErrBadChunk},
	{"separator in name", "1;a/b\r\nx\r\n", ErrBadChunk},
	{"control in quoted value", "1;a=\"\x01\"\r\nx\r\n", ErrBadChunk},
	{"DEL in quoted value", "1;a=\"\x7f\"\r\nx\r\n", ErrBadChunk},
	{"quoted-pair of a control", "1;a=\"\\\x00\"\r\nx\r\n", ErrBadChunk},
	{"quoted-pair of CR", "1;a=\"\\\r\n\"\r\nx\r\n", ErrBadChunk},
	{"bare LF after size", "1\nx\r\n", ErrBadChunk},
	{"bare CR after size", "1\rx\r\n", ErrBadChunk},
	{"data too long", "1\r\nab\r\n", ErrBadChunk},
	{"bare LF after data", "1\r\na\n0\r\n\r\n", ErrBadChunk},
	{"CR then junk after data", "1\r\na\rX", ErrBadChunk},
	{"bare LF in extension", "1;a\nx\r\n", ErrBadChunk},
	{"bare LF in quoted value", "1;a=\"\n\"\r\nx\r\n", ErrBadChunk},
	{"bare LF after last-chunk", "0\nA: b\r\n\r\n", ErrBadChunk},
	{"control in extension", "1;a\x00\r\nx\r\n", ErrBadChunk},
	{"extension too long", "1;" + strings.Repeat("e", maxChunkLineBytes) + "\r\nx\r\n", ErrBadChunk},
	{"quoted extension too long", "1;a=\"" + strings.Repeat("e", maxChunkLineBytes) + "\"\r\nx\r\n", ErrBadChunk},
	{"trailer without colon", "0\r\nX\r\n\r\n", ErrBadChunk},
	{"trailer empty name", "0\r\n: v\r\n\r\n", ErrBadChunk},
	{"trailer obs-fold", "0\r\nA: b\r\n c\r\n\r\n", ErrBadChunk},
	{"trailer space before colon", "0\r\nA : b\r\n\r\n", ErrBadChunk},
	{"trailer control", "0\r\nA: \x01\r\n\r\n", ErrBadChunk},
	{"trailer bare LF", "0\r\nA: b\n\r\n", ErrBadChunk},
	{"final bare LF", "0\r\n\n", ErrBadChunk},
	{"final CR then junk", "0\r\n\rX", ErrBadChunk},
	{"trailer too large", "0\r\nA: " + strings.Repeat("b", maxTrailerBytes) + "\r\n\r\n", ErrBadChunk},
}

func TestChunkedRejects(t *testing.T) {
	for _, tt := range badChunked {
		t.Run(tt.name, func(t *testing.T) {
			var d ChunkedDecoder
			d.Reset(0)
			whole := feedChunked(t, &d, []byte(tt.in))
			if whole.err != tt.want || whole.done {
				t.Fatalf("whole: %+v, want %v", whole, tt.want)
			}
			// Errors are sticky.
			if n, _, _, err := d.Next([]byte("0\r\n\r\n")); n != 0 || err != tt.want {
				t.Fatalf("after error: %d, %v", n, err)
			}
			// Any way of cutting the input fails the same way, after the same payload. (How much framing
			// was consumed before the failure depends on the cuts, so it is not compared.)
			want := decodeResult{payload: whole.payload, err: tt.want}
			for _, k := range cutPoints(len(tt.in)) {
				d.Reset(0)
				got := feedChunked(t, &d, []byte(tt.in[:k]), []byte(tt.in[k:]))
				got.consumed, got.trailers = 0, nil
				checkDecode(t, fmt.Sprintf("split %d", k), got, want)
			}
			for _, size := range []int{1, 3, 13} {
				d.Reset(0)
				got := feedChunked(t, &d, inPieces([]byte(tt.in), size)...)
				got.consumed, got.trailers = 0, nil
				checkDecode(t, fmt.Sprintf("%d-byte pieces", size), got, want)
			}
		})
	}
}

func TestChunkedBodyLimit(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
	}{
		{"at limit", "a\r\n0123456789\r\n0\r\n\r\n", nil},
		{"single chunk over", "b\r\n", ErrBodyTooLarge},
		{"sum over", "5\r\nhello\r\n6\r\n", ErrBodyTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var d ChunkedDecoder
			d.Reset(10)
			if res := feedChunked(t, &d, []byte(tt.in)); res.err != tt.want {
				t.Fatalf("%+v, want %v", res, tt.want)
			}
		})
	}
	// Huge sizes are fine when unlimited, but their sum must not overflow int64.
	var d ChunkedDecoder
	if res := feedChunked(t, &d, []byte("7fffffffffffffff\r\nab")); res.err != nil || string(res.payload) != "ab" {
		t.Fatalf("max size: %+v", res)
	}
	d.Reset(0)
	d.total = math.MaxInt64 - 1
	if res := feedChunked(t, &d, []byte("2\r\n")); res.err != ErrBadChunk {
		t.Fatalf("total overflow: %+v", res)
	}
}

func TestChunkedDataComesLast(t *testing.T) {
	// One call yields framing then at most one payload span, and stops right after it, or right after
	// the last-chunk line.
	var d ChunkedDecoder
	src := []byte("5\r\nhello\r\n6\r\nworld!\r\n0\r\n\r\n")
	want := []struct {
		n    int
		data string
		done bool
	}{{8, "hello", false}, {11, "world!", false}, {5, "", false}, {2, "", true}}
	for i, w := range want {
		n, data, done, err := d.Next(src)
		if err != nil || n != w.n || string(data) != w.data || done != w.done {
			t.Fatalf("call %d: %d, %q, %v, %v; want %+v", i, n, data, done, err, w)
		}
		src = src[n:]
	}
	if n, _, _, _ := d.Next(nil); n != 0 {
		t.Fatalf("Next(nil) consumed %d", n)
	}
}

func TestAppendChunkHeader(t *testing.T) {
	for _, tt := range []struct {
		size int
		want string
	}{{1, "1\r\n"}, {255, "ff\r\n"}, {4096, "1000\r\n"}} {
		if got := string(AppendChunkHeader([]byte("x"), tt.size)); got != "x"+tt.want {
			t.Errorf("AppendChunkHeader(%d) = %q", tt.size, got)
		}
	}
	if LastChunk != "0\r\n\r\n" {
		t.Error("LastChunk")
	}
}

func TestChunkStateString(t *testing.T) {
	seen := map[string]bool{}
	for s := stSize; s <= stDone; s++ {
		name := s.String()
		if name == "" || name == "chunkState(?)" || seen[name] {
			t.Errorf("state %d is named %q", s, name)
		}
		seen[name] = true
	}
	if (stDone + 1).String() != "chunkState(?)" {
		t.Error("out-of-range state")
	}
}
