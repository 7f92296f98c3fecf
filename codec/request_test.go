// Tests for ParseRequest: accepted forms, every rejection rule, partial input, pipelining and limits.

package codec

import (
	"fmt"
	"strings"
	"testing"
)

// describeRequest renders every field of r, so two parses can be compared as strings.
func describeRequest(r *Request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "method=%q uri=%q path=%q query=%q minor=%d host=%q cl=%d chunked=%v ka=%v up=%v expect=%v headlen=%d\n",
		r.Method, r.URI, r.Path, r.Query, r.Minor, r.Host, r.ContentLength, r.Chunked, r.KeepAlive, r.Upgrade, r.ExpectContinue, r.HeadLen)
	for _, h := range r.Headers {
		fmt.Fprintf(&b, "  %q: %q\n", h.Name, h.Value)
	}
	return b.String()
}

const typicalGET = "GET /api/v1/users/42?fields=name,email&x=1 HTTP/1.1\r\n" +
	"Host: api.example.com\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64) loopgate-bench/1.0\r\n" +
	"Accept: application/json\r\n" +
	"Accept-Encoding: gzip, deflate\r\n" +
	"Accept-Language: en-US,en;q=0.9\r\n" +
	"Authorization: Bearer abcdef0123456789\r\n" +
	"X-Request-Id: 7f3a9c2e-1b2d-4e5f-8a9b-0c1d2e3f4a5b\r\n" +
	"Connection: keep-alive\r\n" +
	"\r\n"

func TestParseRequestTypical(t *testing.T) {
	var r Request
	n, err := ParseRequest([]byte(typicalGET), &r, nil)
	if err != nil || n != len(typicalGET) {
		t.Fatalf("ParseRequest = %d, %v; want %d, nil", n, err, len(typicalGET))
	}
	checks := []struct{ name, got, want string }{
		{"Method", string(r.Method), "GET"},
		{"URI", string(r.URI), "/api/v1/users/42?fields=name,email&x=1"},
		{"Path", string(r.Path), "/api/v1/users/42"},
		{"Query", string(r.Query), "fields=name,email&x=1"},
		{"Host", string(r.Host), "api.example.com"},
		{"Accept", string(r.Headers.Get("ACCEPT")), "application/json"},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	if r.Minor != 1 || !r.KeepAlive || r.ContentLength != -1 || r.Chunked || r.HasBody() || r.Upgrade || r.HeadLen != n {
		t.Errorf("unexpected framing: %s", describeRequest(&r))
	}
	if len(r.Headers) != 8 {
		t.Errorf("len(Headers) = %d, want 8", len(r.Headers))
	}
}

func TestParseRequestAccepted(t *testing.T) {
	tests := []struct {
		name, in string
		check    func(r *Request) bool
	}{
		{"absolute-form", "GET http://example.com:8080/p/q?a=1 HTTP/1.1\r\nHost: other\r\n\r\n", func(r *Request) bool {
			return string(r.Host) == "example.com:8080" && string(r.Path) == "/p/q" && string(r.Query) == "a=1" &&
				string(r.Headers.Get("host")) == "other"
		}},
		{"absolute-form no path", "GET HTTPS://Example.com HTTP/1.1\r\nHost: x\r\n\r\n", func(r *Request) bool {
			return string(r.Host) == "Example.com" && string(r.Path) == "/" && len(r.Query) == 0
		}},
		{"absolute-form query only", "GET http://h?x HTTP/1.1\r\nHost: h\r\n\r\n", func(r *Request) bool {
			return string(r.Path) == "/" && string(r.Query) == "x"
		}},
		{"absolute-form IPv6", "GET http://[::1]:80/ HTTP/1.1\r\nHost: [::1]:80\r\n\r\n", func(r *Request) bool {
			return string(r.Host) == "[::1]:80" && string(r.Path) == "/"
		}},
		{"options asterisk", "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", func(r *Request) bool {
			return string(r.Path) == "*" && string(r.URI) == "*"
		}},
		{"empty query", "GET /a? HTTP/1.1\r\nHost: h\r\n\r\n", func(r *Request) bool {
			return string(r.Path) == "/a" && r.Query != nil && len(r.Query) == 0
		}},
		{"utf8 path", "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: h\r\n\r\n", func(r *Request) bool {
			return string(r.Path) == "/caf\xc3\xa9"
		}},
		{"extension method", "PROPFIND / HTTP/1.1\r\nHost: h\r\n\r\n", func(r *Request) bool { return string(r.Method) == "PROPFIND" }},
		{"http/1.0 no host", "GET / HTTP/1.0\r\n\r\n", func(r *Request) bool { return r.Minor == 0 && !r.KeepAlive && r.Host == nil }},
		{"http/1.0 keep-alive", "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", func(r *Request) bool { return r.KeepAlive }},
		{"http/1.0 keep-alive and close", "GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n", func(r *Request) bool { return !r.KeepAlive }},
		{"http/1.0 ignores upgrade and expect", "GET / HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: ws\r\nExpect: 100-continue\r\n\r\n", func(r *Request) bool {
			return !r.Upgrade && !r.ExpectContinue
		}},
		{"http/1.1 close", "GET / HTTP/1.1\r\nHost: h\r\nConnection: foo, CLOSE\r\n\r\n", func(r *Request) bool { return !r.KeepAlive }},
		{"close in second Connection field", "GET / HTTP/1.1\r\nHost: h\r\nConnection: te\r\nConnection: close\r\n\r\n", func(r *Request) bool { return !r.KeepAlive }},
		{"upgrade", "GET /ws HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n", func(r *Request) bool { return r.Upgrade && r.KeepAlive }},
		{"upgrade header without token", "GET / HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n", func(r *Request) bool { return !r.Upgrade }},
		{"upgrade token without header", "GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\n\r\n", func(r *Request) bool { return !r.Upgrade }},
		{"expect continue", "PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n", func(r *Request) bool {
			return r.ExpectContinue && r.ContentLength == 3 && r.HasBody()
		}},
		{"chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:  CHUNKED \t\r\n\r\n", func(r *Request) bool {
			return r.Chunked && r.ContentLength == -1 && r.HasBody()
		}},
		{"content-length zero", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", func(r *Request) bool { return r.ContentLength == 0 && !r.HasBody() }},
		{"content-length leading zeros", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 007\r\n\r\n", func(r *Request) bool { return r.ContentLength == 7 }},
		{"content-length identical list", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5 , 5,5\r\n\r\n", func(r *Request) bool { return r.ContentLength == 5 }},
		{"content-length identical fields", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\n", func(r *Request) bool { return r.ContentLength == 5 }},
		{"value trimming", "GET / HTTP/1.1\r\nHost:h\r\nX-A: \t a \t b \t\r\nX-B:\r\nX-C: \xc3\xa9\r\n\r\n", func(r *Request) bool {
			return string(r.Headers.Get("x-a")) == "a \t b" && r.Headers.Get("x-b") != nil && len(r.Headers.Get("x-b")) == 0 &&
				string(r.Headers.Get("x-c")) == "\xc3\xa9" && string(r.Host) == "h"
		}},
		{"empty host", "GET / HTTP/1.1\r\nHost:\r\n\r\n", func(r *Request) bool { return r.Host != nil && len(r.Host) == 0 }},
		{"leading empty lines", "\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", func(r *Request) bool { return r.HeadLen == len("GET / HTTP/1.1\r\nHost: h\r\n\r\n") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			n, err := ParseRequest([]byte(tt.in), &r, nil)
			if err != nil || n != len(tt.in) {
				t.Fatalf("ParseRequest = %d, %v; want %d, nil", n, err, len(tt.in))
			}
			if !tt.check(&r) {
				t.Errorf("check failed: %s", describeRequest(&r))
			}
		})
	}
}

// badRequests lists one case per rejection rule. They are also fuzz seeds.
var badRequests = []struct {
	name, in string
	want     *Error
}{
	{"bare LF request line", "GET / HTTP/1.1\nHost: h\r\n\r\n", ErrMalformed},
	{"bare LF header", "GET / HTTP/1.1\r\nHost: h\n\r\n", ErrMalformed},
	{"bare LF end of head", "GET / HTTP/1.1\r\nHost: h\r\n\n", ErrMalformed},
	{"bare CR end of head", "GET / HTTP/1.1\r\nHost: h\r\n\rX", ErrMalformed},
	{"bare CR before request line", "\rGET / HTTP/1.1\r\n\r\n", ErrMalformed},
	{"bare LF before request line", "\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"bare CR in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n", ErrBadHeaderValue},
	{"header without colon", "GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n", ErrMalformed},
	{"double space", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadRequestLine},
	{"leading space", " GET / HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadRequestLine},
	{"method not token", "G(T / HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadRequestLine},
	{"method only", "GET\r\nHost: h\r\n\r\n", ErrBadRequestLine},
	{"no version", "GET /\r\nHost: h\r\n\r\n", ErrBadRequestLine},
	{"tab separator", "GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadRequestLine},
	{"trailing space", "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", ErrBadVersion},
	{"HTTP/1.2", "GET / HTTP/1.2\r\nHost: h\r\n\r\n", ErrBadVersion},
	{"HTTP/2.0", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", ErrBadVersion},
	{"lowercase version", "GET / http/1.1\r\nHost: h\r\n\r\n", ErrBadVersion},
	{"HTTP/1.10", "GET / HTTP/1.10\r\nHost: h\r\n\r\n", ErrBadVersion},
	{"HTTP/1", "GET / HTTP/1\r\nHost: h\r\n\r\n", ErrBadVersion},
	{"HTTP/0.9 style", "GET /a b\r\n\r\n", ErrBadVersion},
	{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", ErrBadVersion},
	{"control in target", "GET /a\x01b HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadTarget},
	{"DEL in target", "GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadTarget},
	{"fragment in target", "GET /a#frag HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadTarget},
	{"asterisk with GET", "GET * HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadTarget},
	{"PRI asterisk HTTP/1.1", "PRI * HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadTarget},
	{"relative target", "GET example.com/a HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadTarget},
	{"authority-form with GET", "GET example.com:443 HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadTarget},
	{"ftp scheme", "GET ftp://h/ HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadTarget},
	{"empty authority", "GET http:///p HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadTarget},
	{"userinfo", "GET http://user@h/ HTTP/1.1\r\nHost: h\r\n\r\n", ErrBadTarget},
	{"CONNECT", "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", ErrConnectNotSupported},
	{"empty header name", "GET / HTTP/1.1\r\nHost: h\r\n: v\r\n\r\n", ErrBadHeaderName},
	{"bad header name", "GET / HTTP/1.1\r\nHost: h\r\nX(y): v\r\n\r\n", ErrBadHeaderName},
	{"non-ascii header name", "GET / HTTP/1.1\r\nHost: h\r\nX\xc3\xa9: v\r\n\r\n", ErrBadHeaderName},
	{"space before colon", "GET / HTTP/1.1\r\nHost : h\r\n\r\n", ErrSpaceBeforeColon},
	{"tab before colon", "GET / HTTP/1.1\r\nHost\t: h\r\n\r\n", ErrSpaceBeforeColon},
	{"space inside name", "GET / HTTP/1.1\r\nHo st: h\r\n\r\n", ErrSpaceBeforeColon},
	{"obs-fold", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n  b\r\n\r\n", ErrObsFold},
	{"obs-fold tab", "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n\tb\r\n\r\n", ErrObsFold},
	{"whitespace after request line", "GET / HTTP/1.1\r\n Host: h\r\n\r\n", ErrObsFold},
	{"NUL in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\x00b\r\n\r\n", ErrBadHeaderValue},
	{"control in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\x1bb\r\n\r\n", ErrBadHeaderValue},
	{"DEL in value", "GET / HTTP/1.1\r\nHost: h\r\nX: a\x7f\r\n\r\n", ErrBadHeaderValue},
	{"CL and TE", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", ErrCLandTE},
	{"TE and CL", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", ErrCLandTE},
	{"CL letters", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: abc\r\n\r\n", ErrBadContentLength},
	{"CL negative", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\n", ErrBadContentLength},
	{"CL plus sign", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +5\r\n\r\n", ErrBadContentLength},
	{"CL empty", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length:\r\n\r\n", ErrBadContentLength},
	{"CL inner space", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1 2\r\n\r\n", ErrBadContentLength},
	{"CL hex", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 0x10\r\n\r\n", ErrBadContentLength},
	{"CL differing list", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 6\r\n\r\n", ErrBadContentLength},
	{"CL empty list element", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5,,5\r\n\r\n", ErrBadContentLength},
	{"CL differing fields", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", ErrBadContentLength},
	{"CL overflow", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n", ErrBadContentLength},
	{"CL 19 digits", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1000000000000000000\r\n\r\n", ErrBadContentLength},
	{"TE gzip", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n", ErrUnknownTransferEncoding},
	{"TE gzip, chunked", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", ErrUnknownTransferEncoding},
	{"TE chunked, gzip", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", ErrUnknownTransferEncoding},
	{"TE chunked twice in list", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", ErrUnknownTransferEncoding},
	{"TE two fields", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", ErrUnknownTransferEncoding},
	{"TE identity", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: identity\r\n\r\n", ErrUnknownTransferEncoding},
	{"TE empty", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding:\r\n\r\n", ErrUnknownTransferEncoding},
	{"TE chunked-false", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: xchunked\r\n\r\n", ErrUnknownTransferEncoding},
	{"TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", ErrTransferEncodingHTTP10},
	{"missing host", "GET / HTTP/1.1\r\nX: y\r\n\r\n", ErrMissingHost},
	{"duplicate host", "GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", ErrDuplicateHost},
	{"host with space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", ErrBadHost},
	{"host with slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", ErrBadHost},
	{"host with userinfo", "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", ErrBadHost},
	{"body too large", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10485761\r\n\r\n", ErrBodyTooLarge},
	{"URI too long", "GET /" + strings.Repeat("a", DefaultMaxURIBytes) + " HTTP/1.1\r\nHost: h\r\n\r\n", ErrURITooLong},
	{"too many headers", "GET / HTTP/1.1\r\nHost: h\r\n" + strings.Repeat("X: y\r\n", DefaultMaxHeaderCount) + "\r\n", ErrHeadersTooLarge},
	{"head too large", "GET / HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("a", DefaultMaxHeaderBytes) + "\r\n\r\n", ErrHeadersTooLarge},
}

func TestParseRequestRejects(t *testing.T) {
	for _, tt := range badRequests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			n, err := ParseRequest([]byte(tt.in), &r, nil)
			if err != tt.want || n != 0 {
				t.Fatalf("ParseRequest = %d, %v; want 0, %v", n, err, tt.want)
			}
			e := err.(*Error)
			if e.Status != tt.want.Status || e.Code != e.Status*100+1 {
				t.Errorf("Status/Code = %d/%d", e.Status, e.Code)
			}
		})
	}
}

func TestErrorStatusAndCode(t *testing.T) {
	tests := []struct {
		err          *Error
		status, code int
	}{
		{ErrMalformed, 400, 40001},
		{ErrBadChunk, 400, 40001},
		{ErrURITooLong, 414, 41401},
		{ErrHeadersTooLarge, 431, 43101},
		{ErrBodyTooLarge, 413, 41301},
		{ErrBadResponse, 502, 50202},
		{ErrResponseHeadTooLarge, 502, 50203},
	}
	for _, tt := range tests {
		if tt.err.Status != tt.status || tt.err.Code != tt.code || tt.err.Error() != tt.err.Message {
			t.Errorf("%q: %d/%d, want %d/%d", tt.err.Message, tt.err.Status, tt.err.Code, tt.status, tt.code)
		}
	}
	// Distinct sentinels carry distinct messages, so logs tell the 400s apart.
	byMessage := map[string]*Error{}
	for _, tt := range badRequests {
		if prev, ok := byMessage[tt.want.Message]; ok && prev != tt.want {
			t.Errorf("two sentinels share message %q", tt.want.Message)
		}
		byMessage[tt.want.Message] = tt.want
	}
}

// validRequests are complete heads (with bodies where they have one) used for prefix and pipelining tests.
var validRequests = []string{
	typicalGET,
	"POST /submit HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n",
	"POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n",
	"\r\n\r\nGET http://h:1/x?y HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
	"OPTIONS * HTTP/1.1\r\nHost: h\r\nX-Empty:\r\n\r\n",
}

func TestParseRequestEveryPrefix(t *testing.T) {
	for _, full := range validRequests {
		var want Request
		n, err := ParseRequest([]byte(full), &want, nil)
		if err != nil || n != len(full) {
			t.Fatalf("%q: ParseRequest = %d, %v", full, n, err)
		}
		wantDesc := describeRequest(&want)
		var r Request
		for k := 0; k < len(full); k++ {
			// Copy so that no view can reach beyond the prefix.
			prefix := append([]byte(nil), full[:k]...)
			if n, err := ParseRequest(prefix, &r, nil); n != 0 || err != nil {
				t.Fatalf("%q prefix %d: ParseRequest = %d, %v; want 0, nil", full, k, n, err)
			}
		}
		if n, err := ParseRequest([]byte(full), &r, nil); n != len(full) || err != nil || describeRequest(&r) != wantDesc {
			t.Fatalf("%q: reparse after prefixes = %d, %v, %s", full, n, err, describeRequest(&r))
		}
	}
}

// A bad request must already fail on every prefix long enough to contain the bad line's end
// and, when it fails earlier, fail with the same error.
func TestParseRequestPrefixErrorsAgree(t *testing.T) {
	for _, tt := range badRequests {
		for _, k := range cutPoints(len(tt.in)) {
			var r Request
			n, err := ParseRequest([]byte(tt.in[:k]), &r, nil)
			if n != 0 {
				t.Fatalf("%s: prefix %d parsed as complete (n=%d)", tt.name, k, n)
			}
			if err != nil && err != tt.want {
				t.Fatalf("%s: prefix %d: %v, whole: %v", tt.name, k, err, tt.want)
			}
		}
	}
}

func TestParseRequestPipelined(t *testing.T) {
	for _, first := range validRequests {
		for _, second := range validRequests {
			buf := []byte(first + second)
			var r Request
			n, err := ParseRequest(buf, &r, nil)
			if err != nil || n != len(first) {
				t.Fatalf("first: %d, %v; want %d", n, err, len(first))
			}
			n2, err := ParseRequest(buf[n:], &r, nil)
			if err != nil || n2 != len(second) {
				t.Fatalf("second: %d, %v; want %d", n2, err, len(second))
			}
		}
	}
}

func TestParseRequestLimitBoundaries(t *testing.T) {
	head := "GET /abc HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n"
	tests := []struct {
		name string
		lim  Limits
		want error
	}{
		{"uri at limit", Limits{MaxURIBytes: 4}, nil},
		{"uri over limit", Limits{MaxURIBytes: 3}, ErrURITooLong},
		{"count at limit", Limits{MaxHeaderCount: 3}, nil},
		{"count over limit", Limits{MaxHeaderCount: 2}, ErrHeadersTooLarge},
		{"bytes at limit", Limits{MaxHeaderBytes: len(head)}, nil},
		{"bytes over limit", Limits{MaxHeaderBytes: len(head) - 1}, ErrHeadersTooLarge},
		{"bytes over limit in request line", Limits{MaxHeaderBytes: 10}, ErrHeadersTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			n, err := ParseRequest([]byte(head), &r, &tt.lim)
			if err != tt.want {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if err == nil && n != len(head) {
				t.Fatalf("n = %d, want %d", n, len(head))
			}
			// Every prefix must either need more or fail the same way.
			for k := 0; k < len(head); k++ {
				n, err := ParseRequest([]byte(head[:k]), &r, &tt.lim)
				if n != 0 || (err != nil && err != tt.want) {
					t.Fatalf("prefix %d: %d, %v", k, n, err)
				}
			}
		})
	}

	body := "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n"
	var r Request
	if _, err := ParseRequest([]byte(body), &r, &Limits{MaxBodyBytes: 100}); err != nil {
		t.Errorf("body at limit: %v", err)
	}
	if _, err := ParseRequest([]byte(body), &r, &Limits{MaxBodyBytes: 99}); err != ErrBodyTooLarge {
		t.Errorf("body over limit: %v", err)
	}
}

func TestParseRequestLimitsOnPartialInput(t *testing.T) {
	tests := []struct {
		name, in string
		want     error
	}{
		{"long target without CRLF", "GET /" + strings.Repeat("a", DefaultMaxURIBytes), ErrURITooLong},
		{"target at limit without CRLF", "GET /" + strings.Repeat("a", DefaultMaxURIBytes-1), nil},
		{"long method without CRLF", strings.Repeat("M", DefaultMaxHeaderBytes), ErrHeadersTooLarge},
		{"head without end", "GET / HTTP/1.1\r\nHost: h\r\nX: " + strings.Repeat("a", DefaultMaxHeaderBytes), ErrHeadersTooLarge},
		{"endless empty lines", strings.Repeat("\r\n", DefaultMaxHeaderBytes/2), ErrHeadersTooLarge},
		{"bad method byte", "GE\x16", ErrBadRequestLine},
		{"TLS ClientHello", "\x16\x03\x01\x02\x00\x01", ErrBadRequestLine},
		{"bad version prefix", "GET / HTTP/2", ErrBadVersion},
		{"version too long", "GET / HTTP/1.1x", ErrBadVersion},
		{"bad target byte", "GET /a\x00", ErrBadTarget},
		{"obs-fold before end", "GET / HTTP/1.1\r\nHost: h\r\n x", ErrObsFold},
		{"head one byte short of limit", "GET / HTTP/1.1\r\n" + strings.Repeat("a", DefaultMaxHeaderBytes-17), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Request
			n, err := ParseRequest([]byte(tt.in), &r, nil)
			if n != 0 || err != tt.want {
				t.Fatalf("ParseRequest = %d, %v; want 0, %v", n, err, tt.want)
			}
		})
	}
}

func TestRequestResetKeepsCapacity(t *testing.T) {
	var r Request
	if _, err := ParseRequest([]byte(typicalGET), &r, nil); err != nil {
		t.Fatal(err)
	}
	c := cap(r.Headers)
	r.Reset()
	if len(r.Headers) != 0 || cap(r.Headers) != c || r.ContentLength != -1 || r.Method != nil {
		t.Fatalf("Reset: len %d cap %d (was %d) cl %d", len(r.Headers), cap(r.Headers), c, r.ContentLength)
	}
	if !(&Request{Method: []byte("HEAD")}).IsHEAD() || (&Request{Method: []byte("GET")}).IsHEAD() {
		t.Error("IsHEAD")
	}
}

func TestLimitsWithDefaults(t *testing.T) {
	if got := (Limits{}).WithDefaults(); got != DefaultLimits() {
		t.Errorf("zero Limits.WithDefaults() = %+v", got)
	}
	l := Limits{MaxURIBytes: 1, MaxHeaderCount: -1, MaxHeaderBytes: 2, MaxBodyBytes: 3}.WithDefaults()
	want := Limits{MaxURIBytes: 1, MaxHeaderCount: DefaultMaxHeaderCount, MaxHeaderBytes: 2, MaxBodyBytes: 3}
	if l != want {
		t.Errorf("WithDefaults = %+v, want %+v", l, want)
	}
}
