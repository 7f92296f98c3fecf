package codec

import "testing"

// ConnectionNames is set exactly when a Connection field names a field
// that is not hop-by-hop already, in requests and responses, and
// TETrailers when a request's TE lists trailers; both survive a head fed
// one byte more at a time.
func TestConnectionNamesAndTETrailers(t *testing.T) {
	for _, tt := range []struct {
		fields       string
		names, trail bool
	}{
		{"", false, false},
		{"Connection: keep-alive\r\n", false, false},
		{"Connection: close\r\n", true, false}, // close is no field name, so not hop-by-hop either
		{"Connection: Keep-Alive, TE\r\n", false, false},
		{"Connection: keep-alive, , te\r\n", false, false},
		{"Connection: x-secret\r\n", true, false},
		{"Connection: te\r\nConnection: X-Secret \r\n", true, false},
		{"Connection: keep-alive,x-secret\r\n", true, false},
		{"X-Connection: x-secret\r\n", false, false},
		{"TE: trailers\r\n", false, true},
		{"te: gzip, Trailers\r\n", false, true},
		{"TE: gzip\r\n", false, false},
		{"X-TE: trailers\r\n", false, false},
	} {
		req := "GET / HTTP/1.1\r\nHost: a.test\r\n" + tt.fields + "\r\n"
		for k := 1; k <= len(req); k++ {
			var r Request
			n, err := ParseRequest([]byte(req[:k]), &r, nil)
			if err != nil || (n == 0) != (k < len(req)) {
				t.Fatalf("%q[:%d]: %d, %v", req, k, n, err)
			}
			if n > 0 && (r.ConnectionNames != tt.names || r.TETrailers != tt.trail) {
				t.Errorf("request %q: ConnectionNames %v TETrailers %v, want %v %v", tt.fields, r.ConnectionNames, r.TETrailers, tt.names, tt.trail)
			}
		}
		resp := "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n" + tt.fields + "\r\n"
		var r Response
		if n, err := ParseResponse([]byte(resp), &r, nil); err != nil || n == 0 {
			t.Fatalf("%q: %d, %v", resp, n, err)
		}
		if r.ConnectionNames != tt.names {
			t.Errorf("response %q: ConnectionNames %v, want %v", tt.fields, r.ConnectionNames, tt.names)
		}
	}
}
