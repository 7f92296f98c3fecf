// Tests for ParseResponse and BodyMode.

package codec

import (
	"fmt"
	"strings"
	"testing"
)

func describeResponse(r *Response) string {
	var b strings.Builder
	fmt.Fprintf(&b, "minor=%d status=%d reason=%q cl=%d chunked=%v ka=%v headlen=%d\n",
		r.Minor, r.Status, r.Reason, r.ContentLength, r.Chunked, r.KeepAlive, r.HeadLen)
	for _, h := range r.Headers {
		fmt.Fprintf(&b, "  %q: %q\n", h.Name, h.Value)
	}
	return b.String()
}

const typicalResponse = "HTTP/1.1 200 OK\r\n" +
	"Server: nginx/1.22.1\r\n" +
	"Date: Sat, 29 Nov 2025 21:48:00 GMT\r\n" +
	"Content-Type: application/json; charset=utf-8\r\n" +
	"Content-Length: 12\r\n" +
	"Connection: keep-alive\r\n" +
	"Cache-Control: no-cache\r\n" +
	"\r\n"

func TestParseResponseAccepted(t *testing.T) {
	tests := []struct {
		name, in string
		check    func(r *Response) bool
		mode     BodyMode
	}{
		{"typical", typicalResponse, func(r *Response) bool {
			return r.Minor == 1 && r.Status == 200 && string(r.Reason) == "OK" && r.ContentLength == 12 && r.KeepAlive &&
				r.HeadLen == len(typicalResponse) && len(r.Headers) == 6
		}, BodyLength},
		{"no reason", "HTTP/1.1 204\r\n\r\n", func(r *Response) bool { return r.Status == 204 && len(r.Reason) == 0 }, BodyNone},
		{"empty reason", "HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n", func(r *Response) bool { return r.Status == 404 && r.ContentLength == 0 }, BodyNone},
		{"reason with spaces", "HTTP/1.1 500 Internal Server Error\r\n\r\n", func(r *Response) bool {
			return string(r.Reason) == "Internal Server Error" && r.ContentLength == -1
		}, BodyUntilClose},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", func(r *Response) bool { return r.Chunked }, BodyChunked},
		{"http/1.0 default close", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n", func(r *Response) bool { return r.Minor == 0 && !r.KeepAlive }, BodyLength},
		{"http/1.0 keep-alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\n", func(r *Response) bool { return r.KeepAlive }, BodyUntilClose},
		{"http/1.1 close", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n", func(r *Response) bool { return !r.KeepAlive }, BodyUntilClose},
		{"304 with length", "HTTP/1.1 304 Not Modified\r\nContent-Length: 100\r\n\r\n", func(r *Response) bool { return r.ContentLength == 100 }, BodyNone},
		{"100 continue", "HTTP/1.1 100 Continue\r\n\r\n", func(r *Response) bool { return r.Status == 100 }, BodyNone},
		{"101 switching", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", func(r *Response) bool { return r.Status == 101 }, BodyNone},
		{"two hosts are fine in a response", "HTTP/1.1 200 OK\r\nHost: a\r\nHost: b c\r\nContent-Length: 2\r\n\r\n", func(r *Response) bool { return true }, BodyLength},
		{"large content-length", "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", func(r *Response) bool { return r.ContentLength == 99999999999 }, BodyLength},
		{"obs-text reason", "HTTP/1.1 200 \xc3\xa9\t!\r\n\r\n", func(r *Response) bool { return string(r.Reason) == "\xc3\xa9\t!" }, BodyUntilClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Response
			n, err := ParseResponse([]byte(tt.in), &r, nil)
			if err != nil || n != len(tt.in) {
				t.Fatalf("ParseResponse = %d, %v; want %d, nil", n, err, len(tt.in))
			}
			if !tt.check(&r) {
				t.Errorf("check failed: %s", describeResponse(&r))
			}
			if m := r.BodyMode(false); m != tt.mode {
				t.Errorf("BodyMode = %v, want %v", m, tt.mode)
			}
			if m := r.BodyMode(true); m != BodyNone {
				t.Errorf("BodyMode(HEAD) = %v, want none", m)
			}
		})
	}
}

var badResponses = []struct {
	name, in string
	want     *Error
}{
	{"not http", "SSH-2.0-OpenSSH\r\n\r\n", ErrBadResponse},
	{"HTTP/2", "HTTP/2 200 OK\r\n\r\n", ErrBadResponse},
	{"HTTP/1.2", "HTTP/1.2 200 OK\r\n\r\n", ErrBadResponse},
	{"version only", "HTTP/1.1\r\n\r\n", ErrBadResponse},
	{"version and space", "HTTP/1.1 \r\n\r\n", ErrBadResponse},
	{"two digit status", "HTTP/1.1 20 OK\r\n\r\n", ErrBadResponse},
	{"four digit status", "HTTP/1.1 2000 OK\r\n\r\n", ErrBadResponse},
	{"status 099", "HTTP/1.1 099 X\r\n\r\n", ErrBadResponse},
	{"status 600", "HTTP/1.1 600 X\r\n\r\n", ErrBadResponse},
	{"status letters", "HTTP/1.1 2x0 OK\r\n\r\n", ErrBadResponse},
	{"double space", "HTTP/1.1  200 OK\r\n\r\n", ErrBadResponse},
	{"control in reason", "HTTP/1.1 200 O\x01K\r\n\r\n", ErrBadResponse},
	{"bare LF status line", "HTTP/1.1 200 OK\n\r\n", ErrBadResponse},
	{"bare LF header", "HTTP/1.1 200 OK\r\nA: b\n\r\n", ErrBadResponse},
	{"obs-fold", "HTTP/1.1 200 OK\r\nA: b\r\n c\r\n\r\n", ErrBadResponse},
	{"space before colon", "HTTP/1.1 200 OK\r\nA : b\r\n\r\n", ErrBadResponse},
	{"bad name", "HTTP/1.1 200 OK\r\nA(: b\r\n\r\n", ErrBadResponse},
	{"NUL value", "HTTP/1.1 200 OK\r\nA: \x00\r\n\r\n", ErrBadResponse},
	{"CL and TE", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", ErrBadResponse},
	{"TE gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", ErrBadResponse},
	{"TE in HTTP/1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", ErrBadResponse},
	{"CL differing", "HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n", ErrBadResponse},
	{"CL negative", "HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n", ErrBadResponse},
	{"too many headers", "HTTP/1.1 200 OK\r\n" + strings.Repeat("A: b\r\n", DefaultMaxHeaderCount+1) + "\r\n", ErrResponseHeadTooLarge},
	{"head too large", "HTTP/1.1 200 OK\r\nA: " + strings.Repeat("b", DefaultMaxHeaderBytes) + "\r\n\r\n", ErrResponseHeadTooLarge},
	{"status line too large", "HTTP/1.1 200 " + strings.Repeat("b", DefaultMaxHeaderBytes) + "\r\n\r\n", ErrResponseHeadTooLarge},
	{"bare CR before status line", "\rHTTP/1.1 200 OK\r\n\r\n", ErrBadResponse},
	{"CR CR before status line", "\r\rHTTP/1.1 200 OK\r\n\r\n", ErrBadResponse},
	{"space line before status line", "\r\n \r\nHTTP/1.1 200 OK\r\n\r\n", ErrBadResponse},
}

func TestParseResponseRejects(t *testing.T) {
	for _, tt := range badResponses {
		t.Run(tt.name, func(t *testing.T) {
			var r Response
			n, err := ParseResponse([]byte(tt.in), &r, nil)
			if n != 0 || err != tt.want {
				t.Fatalf("ParseResponse = %d, %v; want 0, %v", n, err, tt.want)
			}
			wantCode := 50202
			if tt.want == ErrResponseHeadTooLarge {
				wantCode = 50203
			}
			if e := err.(*Error); e.Status != 502 || e.Code != wantCode {
				t.Errorf("Status/Code = %d/%d, want 502/%d", e.Status, e.Code, wantCode)
			}
			// Prefixes need more or fail the same way.
			for _, k := range cutPoints(len(tt.in) - 1) {
				n, err := ParseResponse([]byte(tt.in[:k]), &r, nil)
				if n != 0 || (err != nil && err != tt.want) {
					t.Fatalf("prefix %d: %d, %v", k, n, err)
				}
			}
		})
	}
}

func TestParseResponseEveryPrefixAndPipelined(t *testing.T) {
	valid := []string{typicalResponse, "HTTP/1.1 204\r\n\r\n", "HTTP/1.0 302 Found\r\nLocation: /x\r\n\r\n"}
	for _, full := range valid {
		var want, r Response
		if n, err := ParseResponse([]byte(full), &want, nil); n != len(full) || err != nil {
			t.Fatalf("%q: %d, %v", full, n, err)
		}
		for k := 0; k < len(full); k++ {
			if n, err := ParseResponse(append([]byte(nil), full[:k]...), &r, nil); n != 0 || err != nil {
				t.Fatalf("%q prefix %d: %d, %v", full, k, n, err)
			}
		}
		buf := []byte(full + typicalResponse)
		if n, err := ParseResponse(buf, &r, nil); n != len(full) || err != nil || describeResponse(&r) != describeResponse(&want) {
			t.Fatalf("%q pipelined: %d, %v, %s", full, n, err, describeResponse(&r))
		}
		if n, err := ParseResponse(buf[len(full):], &r, nil); n != len(typicalResponse) || err != nil {
			t.Fatalf("second response: %d, %v", n, err)
		}
	}
	if _, err := ParseResponse([]byte("HTTP/1.1 200 OK\r\nA: b\r\n"), &Response{}, &Limits{MaxHeaderBytes: 20}); err != ErrResponseHeadTooLarge {
		t.Errorf("partial head over limit: %v", err)
	}
}

// TestParseResponseLeadingEmptyLines: CRLF or bare LF lines before the status line are skipped and
// counted in n (not in HeadLen), whatever the cuts, and they count toward MaxHeaderBytes.
func TestParseResponseLeadingEmptyLines(t *testing.T) {
	const head = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"
	for _, lead := range []string{"\r\n", "\n", "\r\n\r\n", "\n\r\n\n", strings.Repeat("\r\n", 100)} {
		full := lead + head + "ok"
		var r Response
		n, err := ParseResponse([]byte(full), &r, nil)
		if n != len(lead)+len(head) || err != nil || r.HeadLen != len(head) || r.Status != 200 || r.ContentLength != 2 {
			t.Fatalf("%q: %d, %v, %s", lead, n, err, describeResponse(&r))
		}
		for k := 0; k < len(lead)+len(head); k++ {
			if n, err := ParseResponse([]byte(full[:k]), &r, nil); n != 0 || err != nil {
				t.Fatalf("%q prefix %d: %d, %v", lead, k, n, err)
			}
		}
		// Byte by byte into a growing buffer, as a connection sees it.
		var buf []byte
		for k := 0; k < len(full); k++ {
			buf = append(buf, full[k])
			n, err := ParseResponse(buf, &r, nil)
			if err != nil || (n != 0) != (k+1 >= len(lead)+len(head)) {
				t.Fatalf("%q after %d bytes: %d, %v", lead, k+1, n, err)
			}
		}
	}
	// The limit counts the skipped lines: a 16-byte head fits a 32-byte limit after 16 bytes of them,
	// not after 18, and endless empty lines fail as soon as the limit is reached. Every prefix needs
	// more bytes or fails the same way.
	head2 := "HTTP/1.1 204\r\n\r\n"
	lim := Limits{MaxHeaderBytes: 32}
	for _, tt := range []struct {
		in   string
		want error
	}{
		{strings.Repeat("\r\n", 8) + head2, nil},
		{strings.Repeat("\n", 16) + head2, nil},
		{strings.Repeat("\r\n", 9) + head2, ErrResponseHeadTooLarge},
		{strings.Repeat("\r\n", 16), ErrResponseHeadTooLarge},
		{strings.Repeat("\n", 32), ErrResponseHeadTooLarge},
		{strings.Repeat("\r\n", 100), ErrResponseHeadTooLarge},
	} {
		n, err := ParseResponse([]byte(tt.in), &Response{}, &lim)
		if err != tt.want || (err == nil && n != len(tt.in)) {
			t.Errorf("%q, limit 32: %d, %v; want %v", tt.in, n, err, tt.want)
		}
		for k := 0; k < len(tt.in); k++ {
			if n, err := ParseResponse([]byte(tt.in[:k]), &Response{}, &lim); n != 0 || (err != nil && err != tt.want) {
				t.Fatalf("%q prefix %d: %d, %v", tt.in, k, n, err)
			}
		}
	}
}

func TestBodyModeString(t *testing.T) {
	want := map[BodyMode]string{BodyNone: "none", BodyLength: "length", BodyChunked: "chunked", BodyUntilClose: "until-close", 9: "BodyMode(?)"}
	for m, s := range want {
		if m.String() != s {
			t.Errorf("%d.String() = %q, want %q", m, m.String(), s)
		}
	}
}
