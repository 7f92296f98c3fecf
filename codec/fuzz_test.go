// Fuzz targets: the parsers and the chunked decoder never panic, stay inside their input and agree with themselves.

package codec

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// smallLimits make the limit paths reachable for the fuzzer.
var smallLimits = Limits{MaxURIBytes: 16, MaxHeaderCount: 3, MaxHeaderBytes: 128, MaxBodyBytes: 100}

func FuzzParseRequest(f *testing.F) {
	for _, s := range validRequests {
		f.Add([]byte(s))
		f.Add([]byte(s + s))
	}
	for _, tt := range badRequests {
		if len(tt.in) < 512 {
			f.Add([]byte(tt.in))
		}
	}
	f.Add([]byte("GET /" + "0123456789abcdef" + " HTTP/1.1\r\nHost: h\r\n\r\n"))
	f.Add([]byte("POST http://a:1/b?c HTTP/1.1\r\nHost: a\r\nContent-Length: 7, 7\r\nConnection: upgrade\r\nUpgrade: x\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, lim := range []*Limits{nil, &smallLimits} {
			var r1, r2 Request
			n, err := ParseRequest(data, &r1, lim)
			checkRequestResult(t, data, n, err, &r1)
			n2, err2 := ParseRequest(data, &r2, lim)
			if n2 != n || err2 != err || (err == nil && describeRequest(&r1) != describeRequest(&r2)) {
				t.Fatalf("non-deterministic: %d, %v then %d, %v", n, err, n2, err2)
			}
			// Failing early is consistent: if half the input fails, the whole does.
			k := len(data) / 2
			if nk, errk := ParseRequest(data[:k], &r2, lim); errk != nil && err == nil {
				t.Fatalf("prefix %d fails with %v but whole parses (n=%d)", k, errk, n)
			} else if n > 0 && k < n && (nk != 0 || errk != nil) {
				t.Fatalf("prefix %d of a %d-byte head: %d, %v", k, n, nk, errk)
			}
			if n > 0 {
				if nn, errn := ParseRequest(data[:n], &r2, lim); nn != n || errn != nil || describeRequest(&r1) != describeRequest(&r2) {
					t.Fatalf("head alone: %d, %v", nn, errn)
				}
			}
		}
	})
}

func checkRequestResult(t *testing.T, data []byte, n int, err error, r *Request) {
	t.Helper()
	if err != nil {
		e, ok := err.(*Error)
		if !ok || n != 0 {
			t.Fatalf("error %v (%T) with n=%d", err, err, n)
		}
		switch e.Status {
		case 400, 413, 414, 431:
		default:
			t.Fatalf("unexpected status %d", e.Status)
		}
		return
	}
	if n < 0 || n > len(data) || r.HeadLen > n || (n > 0 && r.HeadLen == 0) {
		t.Fatalf("n=%d HeadLen=%d len=%d", n, r.HeadLen, len(data))
	}
	if n == 0 {
		return
	}
	head := data[:n]
	views := [][]byte{r.Method, r.URI, r.Query, r.Host}
	if !bytes.Equal(r.Path, slashPath) || &r.Path[0] != &slashPath[0] {
		views = append(views, r.Path)
	}
	for _, h := range r.Headers {
		views = append(views, h.Name, h.Value)
	}
	for i, v := range views {
		if !within(v, head) {
			t.Fatalf("view %d %q is outside the head", i, v)
		}
	}
	if len(r.Method) == 0 || len(r.URI) == 0 || len(r.Path) == 0 || r.ContentLength < -1 || (r.Chunked && r.ContentLength != -1) {
		t.Fatalf("inconsistent request: %s", describeRequest(r))
	}
}

func FuzzParseResponse(f *testing.F) {
	f.Add([]byte(typicalResponse))
	f.Add([]byte("HTTP/1.1 204\r\n\r\nHTTP/1.0 200 OK\r\n\r\n"))
	f.Add([]byte("\r\n\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	for _, tt := range badResponses {
		if len(tt.in) < 512 {
			f.Add([]byte(tt.in))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, lim := range []*Limits{nil, &smallLimits} {
			var r1, r2 Response
			n, err := ParseResponse(data, &r1, lim)
			if err != nil && (n != 0 || (err != ErrBadResponse && err != ErrResponseHeadTooLarge)) {
				t.Fatalf("%d, %v", n, err)
			}
			if n < 0 || n > len(data) || r1.HeadLen > n || (n > 0 && r1.HeadLen == 0) ||
				len(bytes.Trim(data[:n-r1.HeadLen], "\r\n")) != 0 {
				t.Fatalf("n=%d HeadLen=%d", n, r1.HeadLen)
			}
			if n > 0 {
				if r1.Status < 100 || r1.Status > 599 || !within(r1.Reason, data[:n]) {
					t.Fatalf("bad status %d or reason view", r1.Status)
				}
				for _, h := range r1.Headers {
					if !within(h.Name, data[:n]) || !within(h.Value, data[:n]) {
						t.Fatalf("header view outside head")
					}
				}
				_ = r1.BodyMode(false).String()
			}
			n2, err2 := ParseResponse(data, &r2, lim)
			if n2 != n || err2 != err || describeResponse(&r1) != describeResponse(&r2) {
				t.Fatalf("non-deterministic")
			}
		}
	})
}

func FuzzChunkedDecoder(f *testing.F) {
	for _, tt := range badChunked {
		if len(tt.in) < 512 {
			f.Add([]byte(tt.in), uint64(0))
		}
	}
	f.Add([]byte("5;a=b\r\nhello\r\n0\r\nX: y\r\n\r\nrest"), uint64(1))
	f.Add([]byte("The quick brown fox"), uint64(7))
	f.Add([]byte{}, uint64(0))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		// As framing: whole and byte by byte agree on everything observable.
		for _, limit := range []int64{0, 64} {
			var d ChunkedDecoder
			d.Reset(limit)
			whole := feedChunked(t, &d, data)
			d.Reset(limit)
			split := feedChunked(t, &d, bytewise(data)...)
			if whole.err != split.err || whole.done != split.done || !bytes.Equal(whole.payload, split.payload) ||
				(whole.err == nil && (whole.consumed != split.consumed || !bytes.Equal(whole.trailers, split.trailers))) {
				t.Fatalf("limit %d: whole %+v, byte by byte %+v", limit, whole, split)
			}
			if whole.done {
				checkTrailerSection(t, whole.trailers)
			}
			if whole.err != nil && whole.err != ErrBadChunk && whole.err != ErrBodyTooLarge {
				t.Fatalf("unexpected error %v", whole.err)
			}
		}

		// As payload: encoding then decoding round-trips, at the exact limit and one under it.
		rng := rand.New(rand.NewPCG(seed, uint64(len(data))))
		enc := encodeChunked(rng, data, seed&1 == 1, seed&2 == 2)
		var d ChunkedDecoder
		d.Reset(int64(len(data)))
		cut := rng.IntN(len(enc) + 1)
		res := feedChunked(t, &d, enc[:cut], enc[cut:])
		wantTrailers := "\r\n"
		if seed&2 == 2 {
			wantTrailers = testTrailerSection
		}
		if res.err != nil || !res.done || res.consumed != len(enc) || !bytes.Equal(res.payload, data) ||
			string(res.trailers) != wantTrailers {
			t.Fatalf("round trip: %+v", res)
		}
		if len(data) > 1 { // a limit of 0 would mean unlimited
			d.Reset(int64(len(data) - 1))
			if res := feedChunked(t, &d, enc); res.err != ErrBodyTooLarge {
				t.Fatalf("limit one under the size: %+v", res)
			}
		}
	})
}

// checkTrailerSection asserts that a trailer section the decoder accepted is field lines and a final CRLF,
// and that ForEachTrailer visits every line as a token name and a valid value.
func checkTrailerSection(t *testing.T, section []byte) {
	t.Helper()
	if !bytes.HasSuffix(section, []byte("\r\n")) {
		t.Fatalf("trailer section %q does not end in CRLF", section)
	}
	lines := bytes.Count(section, []byte("\r\n")) - 1
	ForEachTrailer(section, func(name, value []byte) {
		lines--
		for _, c := range name {
			if !tcharTable[c] {
				t.Fatalf("trailer name %q in %q", name, section)
			}
		}
		if !validValue(value) {
			t.Fatalf("trailer value %q in %q", value, section)
		}
	})
	if lines != 0 {
		t.Fatalf("ForEachTrailer missed %d lines of %q", lines, section)
	}
}

func FuzzNormalizePath(f *testing.F) {
	for _, tt := range pathCases {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte("/a/%2E%2e/./b//c/%2F%5c\\/../..;x/%7E%7e/"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, in := range [][]byte{data, append([]byte{'/'}, data...)} {
			out, flags, err := NormalizePath(nil, in)
			if err != nil {
				if e, ok := err.(*Error); !ok || e.Status != 400 || e.Code != 40001 || out != nil {
					t.Fatalf("%q: error %v with out %q", in, err, out)
				}
				continue
			}
			if len(out) > 3*len(in) {
				t.Fatalf("%q: output %d bytes", in, len(out))
			}
			if string(in) == "*" {
				if string(out) != "*" {
					t.Fatalf("* became %q", out)
				}
				continue
			}
			checkNormalPath(t, out)
			again, _, err := NormalizePath(nil, out)
			if err != nil || string(again) != string(out) {
				t.Fatalf("%q -> %q -> %q, %v: not idempotent", in, out, again, err)
			}
			if (bytes.Contains(out, []byte("%2F")) && flags&PathEscapedSlash == 0) ||
				(bytes.Contains(out, []byte("%5C")) && flags == 0) {
				t.Fatalf("%q -> %q without flags (%v)", in, out, flags)
			}
			checkAgainstReference(t, string(in))
		}
	})
}

// checkNormalPath asserts the shape every normalised path has.
func checkNormalPath(t *testing.T, out []byte) {
	t.Helper()
	if len(out) == 0 || out[0] != '/' {
		t.Fatalf("%q does not start with '/'", out)
	}
	for _, bad := range []string{"//", "/./", "/../", "\\"} {
		if bytes.Contains(out, []byte(bad)) {
			t.Fatalf("%q contains %q", out, bad)
		}
	}
	if bytes.HasSuffix(out, []byte("/.")) || bytes.HasSuffix(out, []byte("/..")) {
		t.Fatalf("%q ends in a dot segment", out)
	}
	for i := 0; i < len(out); i++ {
		if out[i] != '%' {
			continue
		}
		if i+2 >= len(out) || hexValue[out[i+1]] < 0 || hexValue[out[i+2]] < 0 {
			t.Fatalf("%q: bad escape at %d", out, i)
		}
		v := byte(hexValue[out[i+1]])<<4 | byte(hexValue[out[i+2]])
		if unreservedTable[v] || v == 0 || out[i+1] != upper(out[i+1]) || out[i+2] != upper(out[i+2]) {
			t.Fatalf("%q: escape %q should not be there", out, out[i:i+3])
		}
	}
}

func FuzzNormalizeHost(f *testing.F) {
	for _, tt := range hostCases {
		f.Add([]byte(tt.in))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkHost(t, string(data))
		name, port, err := NormalizeHost(nil, data)
		if err != nil {
			return
		}
		again, port2, err := NormalizeHost(nil, name)
		if err != nil || string(again) != string(name) || port2 != -1 {
			t.Fatalf("%q -> %q (port %d) -> %q, %d, %v: not idempotent", data, name, port, again, port2, err)
		}
	})
}

// FuzzValidValue holds validValue's word-at-a-time checks to the byte-wise definition.
func FuzzValidValue(f *testing.F) {
	for _, s := range []string{"", "a", "text/plain", "a\tb", "0123456789abcdef", "0123456789abcdef\x7f",
		"0123456789abcdefg\x00", "\x80\xff obs-text \xfe", "0123456\x1f89abcdef0123"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, v []byte) {
		if got, want := validValue(v), validBytesRef(v); got != want {
			t.Fatalf("validValue(%q) = %v, want %v", v, got, want)
		}
	})
}
