// What a client controls in the keys the gateway decides on: repeated key
// headers, and the client IP behind trusted proxies, through a real gateway
// and an upstream that counts what it admits.

package engine_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// keyUpstream is an HTTP upstream that counts the requests reaching
// it by path and keeps the values of one header each carried.
type keyUpstream struct {
	addr   string
	header string
	mu     sync.Mutex
	n      map[string]int
	values map[string][][]string
}

func startKeyUpstream(t *testing.T, header string) *keyUpstream {
	u := &keyUpstream{header: header, n: map[string]int{}, values: map[string][][]string{}}
	u.addr = startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.n[r.URL.Path]++
		u.values[r.URL.Path] = append(u.values[r.URL.Path], r.Header.Values(u.header))
		u.mu.Unlock()
		w.Write([]byte("ok"))
	}))
	return u
}

func (u *keyUpstream) count(path string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.n[path]
}

func (u *keyUpstream) seen(path string) [][]string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.values[path])
}

// Issue 18 item 6: a header-keyed limit read only the first of repeated
// fields, so "X-Api-Key: r<i>" then "X-Api-Key: abuser5", the first value
// rotating, had 100 of 100 admitted while the upstream got both values.
// A repeated key header is now refused (400, 40001) before any token is
// taken, for header keys, the tenant header and a hash header alike; one
// field, commas included, is one key, and the upstream gets that field.
// One request of each kind is written a byte at a time.
func TestRepeatedKeyHeaderIsRefused(t *testing.T) {
	up := startKeyUpstream(t, "X-Api-Key")
	g := startGateway(t, `
rate_limit: {tenant_header: X-Org}
upstreams: [{name: backend, nodes: ["%s"]}]
routes:
  - {id: keyed, prefix: /keyed, upstream: backend, rate_limits: [{key: "header:X-Api-Key", rate: 0.001, burst: 5}]}
  - {id: tenant, prefix: /tenant, upstream: backend, rate_limits: [{key: tenant, rate: 0.001, burst: 5}]}
  - {id: sticky, prefix: /sticky, upstream: backend, hash: {header: X-Session}}
`, up.addr)
	c := g.client(t)
	send := func(path string, bytewise bool, fields ...string) int {
		t.Helper()
		raw := "GET " + path + " HTTP/1.1\r\nHost: t\r\n" + strings.Join(fields, "\r\n") + "\r\n\r\n"
		if !bytewise {
			c.send(raw)
		}
		for i := 0; bytewise && i < len(raw); i++ {
			c.send(raw[i : i+1])
		}
		resp, body := readResponse(t, c.br, "GET")
		if resp.StatusCode == 400 {
			expectError(t, resp, body, 400, 40001)
		}
		return resp.StatusCode
	}

	for _, tc := range []struct{ path, name string }{
		{"/keyed", "X-Api-Key"}, {"/tenant", "X-Org"}, {"/sticky", "X-Session"},
	} {
		refused := 0
		for i := range 100 {
			if send(tc.path, i == 0, fmt.Sprintf("%s: r%d", tc.name, i), tc.name+": abuser5") == 400 {
				refused++
			}
		}
		if n := up.count(tc.path); refused != 100 || n != 0 {
			t.Errorf("%s with two %s fields: %d of 100 refused, %d admitted by the upstream; want all refused", tc.path, tc.name, refused, n)
		}
	}

	// The limit itself: one key, its burst of 5 and no more. The refusals
	// above took none of abuser5's tokens.
	admitted := 0
	for range 20 {
		if send("/keyed", false, "X-Api-Key: abuser5") == 200 {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf("abuser5 alone: %d of 20 admitted, want its burst of 5", admitted)
	}
	// One field with a comma is one key, and it is the field the upstream
	// receives.
	admitted = 0
	for range 20 {
		if send("/keyed", false, "X-Api-Key: r1, r2") == 200 {
			admitted++
		}
	}
	if admitted != 5 {
		t.Fatalf(`"r1, r2": %d of 20 admitted, want a burst of 5`, admitted)
	}
	for _, v := range up.seen("/keyed") {
		if len(v) != 1 || v[0] != "abuser5" && v[0] != "r1, r2" {
			t.Fatalf("the upstream got X-Api-Key %q", v)
		}
	}
	// Single fields pass the tenant and hash routes.
	if st := send("/tenant", false, "X-Org: a"); st != 200 {
		t.Fatalf("/tenant with one X-Org: %d", st)
	}
	if st := send("/sticky", false, "X-Session: a"); st != 200 {
		t.Fatalf("/sticky with one X-Session: %d", st)
	}
}

// Issue 18 item 7: behind a trusted proxy, the client's own X-Real-IP won.
// Two X-Real-IP fields (the client's, rotating, then the proxy's) had 100
// of 100 admitted against an ip limit, and so did "X-Forwarded-For:
// unknown" with a client-supplied X-Real-IP. The last X-Real-IP is the
// proxy's, and an unparsable X-Forwarded-For entry leaves the last trusted
// hop (here the peer), never a header the client chose. The gateway's peer
// is the test, a trusted proxy; one request of each kind goes a byte at a
// time.
func TestClientIPIgnoresClientHeadersBehindTrustedProxy(t *testing.T) {
	up := startKeyUpstream(t, "X-Real-IP")
	g := startGateway(t, `
trusted_proxies: ["127.0.0.1/32"]
upstreams: [{name: backend, nodes: ["%s"]}]
routes:
  - {id: realip, prefix: /realip, upstream: backend, rate_limits: [{key: ip, rate: 0.001, burst: 10}]}
  - {id: unknown, prefix: /unknown, upstream: backend, rate_limits: [{key: ip, rate: 0.001, burst: 10}]}
  - {id: xff, prefix: /xff, upstream: backend, rate_limits: [{key: ip, rate: 0.001, burst: 10}]}
`, up.addr)
	c := g.client(t)
	for _, tc := range []struct {
		path   string
		fields func(i int) string
		want   string // the X-Real-IP the upstream gets: the client IP
	}{
		{"/realip", func(i int) string { return fmt.Sprintf("X-Real-IP: 203.0.113.%d\r\nX-Real-IP: 198.51.100.8", i) }, "198.51.100.8"},
		{"/unknown", func(i int) string { return fmt.Sprintf("X-Forwarded-For: unknown\r\nX-Real-IP: 203.0.113.%d", i) }, "127.0.0.1"},
		// The client's X-Forwarded-For entries left of the proxy's count
		// for nothing either.
		{"/xff", func(i int) string {
			return fmt.Sprintf("X-Forwarded-For: 203.0.113.%d\r\nX-Real-IP: 203.0.113.%d\r\nX-Forwarded-For: 198.51.100.9", i, i)
		}, "198.51.100.9"},
	} {
		admitted := 0
		for i := range 100 {
			raw := "GET " + tc.path + " HTTP/1.1\r\nHost: t\r\n" + tc.fields(i) + "\r\n\r\n"
			if i == 0 {
				for j := range len(raw) {
					c.send(raw[j : j+1])
				}
			} else {
				c.send(raw)
			}
			if resp, _ := readResponse(t, c.br, "GET"); resp.StatusCode == 200 {
				admitted++
			}
		}
		if n := up.count(tc.path); admitted != 10 || n != 10 {
			t.Errorf("%s: %d of 100 admitted (%d reached the upstream) against a burst of 10", tc.path, admitted, n)
		}
		for _, v := range up.seen(tc.path) {
			if len(v) != 1 || v[0] != tc.want {
				t.Errorf("%s: the upstream got X-Real-IP %q, want %s", tc.path, v, tc.want)
				break
			}
		}
	}
}
