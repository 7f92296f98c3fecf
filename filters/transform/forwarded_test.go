// Tests for the forwarded filter, including spoofing from untrusted peers.

package transform

import (
	"crypto/tls"
	"net/netip"
	"testing"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
)

func TestForwarded(t *testing.T) {
	trusted, err := access.ParsePrefixes([]string{"10.0.0.0/8", "2001:db8:ffff::/48"})
	if err != nil {
		t.Fatal(err)
	}
	const keep = "(kept)" // the incoming header is left alone: no edit
	const drop = "(removed)"
	for _, tc := range []struct {
		name                     string
		peer                     string
		headers                  []string
		xff, realIP, proto, host string
	}{
		{"untrusted peer, no headers", "203.0.113.9", nil,
			"203.0.113.9", "203.0.113.9", "http", "api.example.com"},
		{"untrusted peer spoofs everything", "203.0.113.9",
			[]string{"X-Forwarded-For: 1.1.1.1, 10.0.0.5", "X-Real-IP: 1.1.1.1", "X-Forwarded-Proto: https", "X-Forwarded-Host: evil.example"},
			"203.0.113.9", "203.0.113.9", "http", "api.example.com"},
		{"trusted peer appends", "10.0.0.1",
			[]string{"X-Forwarded-For: 198.51.100.7", "X-Forwarded-Proto: https", "X-Forwarded-Host: www.example.com"},
			"198.51.100.7, 10.0.0.1", "198.51.100.7", keep, keep},
		{"trusted peer, several XFF fields", "10.0.0.1",
			[]string{"X-Forwarded-For: 6.6.6.6", "X-Forwarded-For: 198.51.100.7, 10.0.0.9"},
			"6.6.6.6, 198.51.100.7, 10.0.0.9, 10.0.0.1", "198.51.100.7", "http", "api.example.com"},
		{"trusted peer without forwarding headers", "10.0.0.1", nil,
			"10.0.0.1", "10.0.0.1", "http", "api.example.com"},
		{"trusted peer, empty XFF", "10.0.0.1", []string{"X-Forwarded-For:"},
			"10.0.0.1", "10.0.0.1", "http", "api.example.com"},
		{"IPv6 untrusted peer", "2001:db8::1", []string{"X-Forwarded-For: 1.1.1.1"},
			"2001:db8::1", "2001:db8::1", "http", "api.example.com"},
		{"IPv6 trusted peer", "2001:db8:ffff::1", []string{"X-Forwarded-For: 2001:db8::7"},
			"2001:db8::7, 2001:db8:ffff::1", "2001:db8::7", "http", "api.example.com"},
		{"4in6 peer unmapped", "::ffff:203.0.113.9", nil,
			"203.0.113.9", "203.0.113.9", "http", "api.example.com"},
		{"4in6 trusted peer", "::ffff:10.0.0.1", []string{"X-Forwarded-For: 198.51.100.7"},
			"198.51.100.7, 10.0.0.1", "198.51.100.7", "http", "api.example.com"},
		{"unknown peer", "", []string{"X-Forwarded-For: 1.1.1.1", "X-Real-IP: 1.1.1.1"},
			drop, drop, "http", "api.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, raw := request(t, append([]string{"GET /x HTTP/1.1", "Host: api.example.com"}, tc.headers...)...)
			x := exchange(req, tc.peer)
			x.ClientIP = access.ClientIP(x.Peer, req.Headers, trusted) // as the engine does
			NewForwarded(800, trusted, 1).Request(x)
			scribble(raw)
			for _, want := range []struct{ name, value string }{
				{"X-Forwarded-For", tc.xff}, {"X-Real-IP", tc.realIP},
				{"X-Forwarded-Proto", tc.proto}, {"X-Forwarded-Host", tc.host},
			} {
				got, set := setValue(&x.ReqEdits, want.name)
				removed := removes(&x.ReqEdits, want.name)
				switch want.value {
				case keep:
					if set || removed {
						t.Errorf("%s edited (set %q, removed %v), want kept", want.name, got, removed)
					}
				case drop:
					if set || !removed {
						t.Errorf("%s: set %q, removed %v; want removed", want.name, got, removed)
					}
				default:
					if got != want.value {
						t.Errorf("%s = %q (set %v), want %q", want.name, got, set, want.value)
					}
				}
			}
		})
	}
}

// X-Forwarded-Proto names the scheme of the listener the request came in
// on: https when it arrived over TLS (x.TLS set), http otherwise, whatever
// an untrusted client claims; a trusted proxy's value is kept.
func TestForwardedProtoHTTPS(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, tc := range []struct {
		name, peer string
		tls        bool
		headers    []string
		want       string // "" = kept
	}{
		{"https", "203.0.113.9", true, nil, "https"},
		{"https, client claims http", "203.0.113.9", true, []string{"X-Forwarded-Proto: http"}, "https"},
		{"plain, client claims https", "203.0.113.9", false, []string{"X-Forwarded-Proto: https"}, "http"},
		{"https from a trusted proxy without one", "10.0.0.1", true, nil, "https"},
		{"https from a trusted proxy with one", "10.0.0.1", true, []string{"X-Forwarded-Proto: http"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := request(t, append([]string{"GET / HTTP/1.1", "Host: a"}, tc.headers...)...)
			x := exchange(req, tc.peer)
			if tc.tls {
				x.TLS = &tls.ConnectionState{Version: tls.VersionTLS13}
			}
			NewForwarded(800, trusted, 1).Request(x)
			got, set := setValue(&x.ReqEdits, "X-Forwarded-Proto")
			if tc.want == "" && set || tc.want != "" && got != tc.want {
				t.Errorf("X-Forwarded-Proto = %q (set %v), want %q", got, set, tc.want)
			}
		})
	}
}

func TestForwardedNoHost(t *testing.T) {
	req, _ := request(t, "GET / HTTP/1.0", "X-Forwarded-Host: evil.example")
	x := exchange(req, "203.0.113.9")
	NewForwarded(800, nil, 1).Request(x)
	if _, set := setValue(&x.ReqEdits, "X-Forwarded-Host"); set || !removes(&x.ReqEdits, "X-Forwarded-Host") {
		t.Errorf("want X-Forwarded-Host removed, edits %+v", x.ReqEdits)
	}
}

func TestForwardedCopiesTrustedList(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	f := NewForwarded(800, trusted, 1)
	trusted[0] = netip.MustParsePrefix("192.0.2.0/24") // the caller's slice changes later
	req, _ := request(t, "GET / HTTP/1.1", "Host: a", "X-Forwarded-For: 198.51.100.7")
	x := exchange(req, "10.0.0.1")
	f.Request(x)
	if got, _ := setValue(&x.ReqEdits, "X-Forwarded-For"); got != "198.51.100.7, 10.0.0.1" {
		t.Errorf("X-Forwarded-For = %q", got)
	}
}

// A loop's requests from one peer address reuse its text from the loop's
// memo, and each exchange keeps its own copy: a later peer on the same
// loop changes neither an earlier exchange's values nor another loop's
// memo, and a loop past the memos formats the address itself.
func TestForwardedPeerMemo(t *testing.T) {
	f := NewForwarded(800, nil, 2).(*forwarded)
	run := func(peer string, loop int) *filters.Exchange {
		t.Helper()
		req, _ := request(t, "GET / HTTP/1.1", "Host: a")
		x := exchange(req, peer)
		x.Loop = loop
		if v := f.Request(x); v != filters.Continue {
			t.Fatalf("verdict %v", v)
		}
		return x
	}
	want := func(x *filters.Exchange, peer string) {
		t.Helper()
		for _, name := range []string{"X-Forwarded-For", "X-Real-IP"} {
			if got, _ := setValue(&x.ReqEdits, name); got != peer {
				t.Errorf("%s = %q, want %q", name, got, peer)
			}
		}
	}

	first := run("203.0.113.9", 0)
	if m := &f.peers[0]; string(m.text[:m.n]) != "203.0.113.9" {
		t.Fatalf("loop 0's memo holds %q after its first peer", m.text[:m.n])
	}
	// The memo is what the next request from that address writes out.
	copy(f.peers[0].text[:], "203.0.113.x")
	want(run("203.0.113.9", 0), "203.0.113.x")
	// Another address replaces it; the first exchange's values are its own.
	want(run("2001:db8::1", 0), "2001:db8::1")
	want(first, "203.0.113.9")
	want(run("203.0.113.9", 0), "203.0.113.9")
	// Loop 1 has a memo of its own; a loop past the memos has none.
	want(run("198.51.100.1", 1), "198.51.100.1")
	want(run("192.0.2.1", 7), "192.0.2.1")
	if m := &f.peers[0]; string(m.text[:m.n]) != "203.0.113.9" {
		t.Errorf("loop 0's memo holds %q after other loops' requests", m.text[:m.n])
	}
}
