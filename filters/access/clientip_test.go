// Tests for ClientIP and ParsePrefixes, including spoofing attempts.

package access

import (
	"net/netip"
	"slices"
	"testing"
)

func TestClientIP(t *testing.T) {
	trusted := prefixes(t, "10.0.0.0/8", "127.0.0.1", "2001:db8:ffff::/48")
	for _, tc := range []struct {
		name    string
		peer    string
		headers []string
		want    string
	}{
		{"untrusted peer, no headers", "203.0.113.9", nil, "203.0.113.9"},
		{"untrusted peer spoofs XFF", "203.0.113.9", []string{"X-Forwarded-For: 1.1.1.1"}, "203.0.113.9"},
		{"untrusted peer spoofs X-Real-IP", "203.0.113.9", []string{"X-Real-IP: 1.1.1.1"}, "203.0.113.9"},
		{"untrusted peer claims a trusted hop", "203.0.113.9", []string{"X-Forwarded-For: 1.1.1.1, 10.0.0.1"}, "203.0.113.9"},
		{"trusted peer, one hop", "10.0.0.1", []string{"X-Forwarded-For: 198.51.100.7"}, "198.51.100.7"},
		{"client-supplied entries left of the real one are ignored", "10.0.0.1",
			[]string{"X-Forwarded-For: 6.6.6.6, 198.51.100.7"}, "198.51.100.7"},
		{"trusted hops on the right are skipped", "10.0.0.1",
			[]string{"X-Forwarded-For: 6.6.6.6, 198.51.100.7, 10.9.9.9, 127.0.0.1"}, "198.51.100.7"},
		{"client pretends to be a trusted proxy", "10.0.0.1",
			[]string{"X-Forwarded-For: 10.0.0.99, 198.51.100.7"}, "198.51.100.7"},
		{"several XFF fields read as one list", "10.0.0.1",
			[]string{"X-Forwarded-For: 6.6.6.6", "x-forwarded-for: 198.51.100.7, 10.0.0.2"}, "198.51.100.7"},
		{"last field trusted only", "10.0.0.1",
			[]string{"X-Forwarded-For: 198.51.100.7", "X-Forwarded-For: 10.0.0.2"}, "198.51.100.7"},
		{"all trusted: leftmost", "10.0.0.1", []string{"X-Forwarded-For: 10.0.0.7, 10.0.0.8"}, "10.0.0.7"},
		{"walk stops at garbage", "10.0.0.1",
			[]string{"X-Forwarded-For: 6.6.6.6, unknown, 10.0.0.2"}, "10.0.0.2"},
		{"garbage rightmost: the peer, never the client's X-Real-IP", "10.0.0.1",
			[]string{"X-Forwarded-For: 6.6.6.6, garbage", "X-Real-IP: 198.51.100.8"}, "10.0.0.1"},
		{"unknown: the peer, never the client's X-Real-IP", "10.0.0.1",
			[]string{"X-Real-IP: 6.6.6.6", "X-Forwarded-For: unknown"}, "10.0.0.1"},
		{"unknown left of a trusted hop: that hop", "10.0.0.1",
			[]string{"X-Real-IP: 6.6.6.6", "X-Forwarded-For: unknown, 10.0.0.2"}, "10.0.0.2"},
		{"garbage rightmost, no X-Real-IP: peer", "10.0.0.1",
			[]string{"X-Forwarded-For: 6.6.6.6, garbage"}, "10.0.0.1"},
		{"empty entries skipped", "10.0.0.1", []string{"X-Forwarded-For: 198.51.100.7,, 10.0.0.2 ,"}, "198.51.100.7"},
		{"empty XFF: X-Real-IP", "10.0.0.1", []string{"X-Forwarded-For:", "X-Real-IP: 198.51.100.8"}, "198.51.100.8"},
		{"X-Real-IP alone", "10.0.0.1", []string{"X-Real-IP: 198.51.100.8"}, "198.51.100.8"},
		{"two X-Real-IP: the last, the proxy's", "10.0.0.1",
			[]string{"X-Real-IP: 6.6.6.6", "x-real-ip: 198.51.100.8"}, "198.51.100.8"},
		{"last X-Real-IP invalid: peer, not the one before", "10.0.0.1",
			[]string{"X-Real-IP: 6.6.6.6", "X-Real-IP: nope"}, "10.0.0.1"},
		{"X-Real-IP list refused", "10.0.0.1", []string{"X-Real-IP: 198.51.100.8, 6.6.6.6"}, "10.0.0.1"},
		{"invalid X-Real-IP: peer", "10.0.0.1", []string{"X-Real-IP: nope"}, "10.0.0.1"},
		{"XFF wins over X-Real-IP", "10.0.0.1",
			[]string{"X-Real-IP: 198.51.100.8", "X-Forwarded-For: 198.51.100.7"}, "198.51.100.7"},
		{"ports are dropped", "10.0.0.1", []string{"X-Forwarded-For: 198.51.100.7:5555, [2001:db8::5]:443"}, "2001:db8::5"},
		{"IPv6 client", "10.0.0.1", []string{"X-Forwarded-For: 2001:db8::7"}, "2001:db8::7"},
		{"IPv6 trusted peer and hop", "2001:db8:ffff::1",
			[]string{"X-Forwarded-For: 2001:db8::7, 2001:db8:ffff::2"}, "2001:db8::7"},
		{"4in6 peer matches IPv4 trust", "::ffff:10.0.0.1", []string{"X-Forwarded-For: 198.51.100.7"}, "198.51.100.7"},
		{"4in6 untrusted peer is unmapped", "::ffff:203.0.113.9", []string{"X-Forwarded-For: 1.1.1.1"}, "203.0.113.9"},
		{"4in6 entry unmapped and checked against trust", "10.0.0.1",
			[]string{"X-Forwarded-For: 198.51.100.7, ::ffff:10.0.0.3"}, "198.51.100.7"},
		{"zoned entry refused", "10.0.0.1", []string{"X-Forwarded-For: fe80::1%eth0", "X-Real-IP: 198.51.100.8"}, "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := parse(t, append([]string{"GET / HTTP/1.1", "Host: a"}, tc.headers...)...)
			got := ClientIP(netip.MustParseAddr(tc.peer), req.Headers, trusted)
			if got != netip.MustParseAddr(tc.want) {
				t.Errorf("ClientIP = %v, want %s", got, tc.want)
			}
		})
	}
}

func TestClientIPWithoutTrustedProxies(t *testing.T) {
	req := parse(t, "GET / HTTP/1.1", "Host: a", "X-Forwarded-For: 1.1.1.1", "X-Real-IP: 2.2.2.2")
	peer := netip.MustParseAddr("10.0.0.1")
	if got := ClientIP(peer, req.Headers, nil); got != peer {
		t.Errorf("ClientIP = %v, want the peer", got)
	}
}

func TestParsePrefixes(t *testing.T) {
	got, err := ParsePrefixes([]string{" 10.1.2.3/8", "192.0.2.1", "2001:db8::/32", "2001:db8::1", "::ffff:10.0.0.0/104", "::ffff:1.2.3.4"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("192.0.2.1/32"),
		netip.MustParsePrefix("2001:db8::/32"),
		netip.MustParsePrefix("2001:db8::1/128"),
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("1.2.3.4/32"),
	}
	if !slices.Equal(got, want) {
		t.Errorf("ParsePrefixes = %v, want %v", got, want)
	}
	for _, bad := range []string{"", "10.0.0.0/33", "nope", "fe80::1%eth0", "10.0.0.1/", "1.2.3"} {
		if _, err := ParsePrefixes([]string{"10.0.0.0/8", bad}); err == nil {
			t.Errorf("ParsePrefixes accepted %q", bad)
		}
	}
	if ps, err := ParsePrefixes(nil); ps != nil || err != nil {
		t.Errorf("ParsePrefixes(nil) = %v, %v", ps, err)
	}
}
