// Tests for the allocation-free address parser, against net/netip.

package access

import (
	"net/netip"
	"testing"
)

var addrCases = []string{
	"0.0.0.0", "1.2.3.4", "255.255.255.255", "192.168.001.1", "01.2.3.4", "1.2.3", "1.2.3.4.5",
	"256.1.1.1", "1..2.3", ".1.2.3", "1.2.3.", "1.2.3.4 ", "", "a.b.c.d", "1.2.3.-4",
	"::", "::1", "1::", "2001:db8::1", "2001:DB8:0:0:8:800:200C:417A", "2001:db8::8:800:200c:417a",
	"1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", "1:2:3:4:5:6:7::", "::2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8::",
	"1::2::3", ":1::2", "1:::2", "12345::", "fffff::1", "::ffff:1.2.3.4", "::ffff:0102:0304",
	"::1.2.3.4", "1:2:3:4:5:6:1.2.3.4", "1:2:3:4:5:6:7:1.2.3.4", "1:2:3:4:5:1.2.3.4", "1::1.2.3.4",
	"::ffff:1.2.3", "::ffff:256.0.0.1", "fe80::1%eth0", "fe80::1%", "[::1]", "::g", "1:2:3:4:5:6:7:",
	"2001:db8::1.2.3.4", "64:ff9b::192.0.2.33",
}

func TestParseAddrMatchesNetip(t *testing.T) {
	for _, s := range addrCases {
		checkParseAddr(t, s)
	}
}

func FuzzParseAddr(f *testing.F) {
	for _, s := range addrCases {
		f.Add(s)
	}
	f.Fuzz(checkParseAddr)
}

// checkParseAddr compares parseAddr with netip.ParseAddr, which differs only
// by refusing zones and unmapping 4in6.
func checkParseAddr(t *testing.T, s string) {
	want, err := netip.ParseAddr(s)
	wantOK := err == nil && want.Zone() == ""
	got, ok := parseAddr([]byte(s))
	if ok != wantOK || (ok && got != want.Unmap()) {
		t.Errorf("parseAddr(%q) = %v, %v; netip says %v, %v", s, got, ok, want, err)
	}
}

func TestParseHostAddr(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" = refused
	}{
		{"1.2.3.4", "1.2.3.4"},
		{"1.2.3.4:8080", "1.2.3.4"},
		{"1.2.3.4:", ""},
		{"1.2.3.4:123456", ""},
		{"1.2.3.4:80:80", ""},
		{"1.2.3.4:8a", ""},
		{"[2001:db8::1]", "2001:db8::1"},
		{"[2001:db8::1]:443", "2001:db8::1"},
		{"[2001:db8::1", ""},
		{"[2001:db8::1]443", ""},
		{"[1.2.3.4]", ""},
		{"2001:db8::1", "2001:db8::1"},
		{"::ffff:10.1.2.3", "10.1.2.3"},
		{"[fe80::1%eth0]", ""},
		{"unknown", ""},
		{"", ""},
	} {
		got, ok := parseHostAddr([]byte(tc.in))
		if tc.want == "" {
			if ok {
				t.Errorf("parseHostAddr(%q) = %v, want refusal", tc.in, got)
			}
			continue
		}
		if !ok || got != netip.MustParseAddr(tc.want) {
			t.Errorf("parseHostAddr(%q) = %v, %v; want %s", tc.in, got, ok, tc.want)
		}
	}
}
