// Tests for the ip_access filter and its range sets.

package access

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters"
)

func TestIPFilter(t *testing.T) {
	bans, _ := newTestBans(10)
	if err := bans.Ban(pfx("198.51.100.66/32"), time.Hour); err != nil {
		t.Fatal(err)
	}
	type lists struct{ gAllow, gDeny, rAllow, rDeny []string }
	for _, tc := range []struct {
		name   string
		lists  lists
		client string
		banned bool // use bans
		want   filters.Verdict
	}{
		{"no lists", lists{}, "198.51.100.1", false, filters.Continue},
		{"banned", lists{}, "198.51.100.66", true, filters.Respond},
		{"banned 4in6", lists{}, "::ffff:198.51.100.66", true, filters.Respond},
		{"banned but bans not used", lists{}, "198.51.100.66", false, filters.Continue},
		{"ban beats allow", lists{gAllow: []string{"198.51.100.0/24"}}, "198.51.100.66", true, filters.Respond},
		{"global deny", lists{gDeny: []string{"198.51.100.0/24"}}, "198.51.100.1", false, filters.Respond},
		{"route deny", lists{rDeny: []string{"198.51.100.1"}}, "198.51.100.1", false, filters.Respond},
		{"deny miss", lists{gDeny: []string{"198.51.100.0/24"}}, "198.51.101.1", false, filters.Continue},
		{"deny beats global allow", lists{gAllow: []string{"198.51.100.0/24"}, gDeny: []string{"198.51.100.1"}}, "198.51.100.1", false, filters.Respond},
		{"deny beats route allow", lists{rAllow: []string{"198.51.100.1"}, gDeny: []string{"198.51.0.0/16"}}, "198.51.100.1", false, filters.Respond},
		{"global allow hit", lists{gAllow: []string{"10.0.0.0/8", "198.51.100.0/24"}}, "198.51.100.1", false, filters.Continue},
		{"global allow miss", lists{gAllow: []string{"10.0.0.0/8"}}, "198.51.100.1", false, filters.Respond},
		{"route allow miss", lists{rAllow: []string{"10.0.0.0/8"}}, "198.51.100.1", false, filters.Respond},
		{"route allow narrows global: inside both", lists{gAllow: []string{"10.0.0.0/8"}, rAllow: []string{"10.1.0.0/16"}}, "10.1.2.3", false, filters.Continue},
		{"route allow narrows global: global only", lists{gAllow: []string{"10.0.0.0/8"}, rAllow: []string{"10.1.0.0/16"}}, "10.2.2.3", false, filters.Respond},
		{"route allow cannot widen global", lists{gAllow: []string{"10.0.0.0/8"}, rAllow: []string{"192.0.2.0/24"}}, "192.0.2.1", false, filters.Respond},
		{"IPv6 allow hit", lists{gAllow: []string{"2001:db8::/32"}}, "2001:db8:1::1", false, filters.Continue},
		{"IPv6 allow miss", lists{gAllow: []string{"2001:db8::/32"}}, "2001:db9::1", false, filters.Respond},
		{"IPv4 allow does not admit IPv6", lists{gAllow: []string{"0.0.0.0/0"}}, "2001:db8::1", false, filters.Respond},
		{"IPv6 deny", lists{rDeny: []string{"2001:db8::/32"}}, "2001:db8::1", false, filters.Respond},
		{"4in6 client matches IPv4 deny", lists{gDeny: []string{"192.0.2.0/24"}}, "::ffff:192.0.2.1", false, filters.Respond},
		{"zoned client matches IPv6 deny", lists{gDeny: []string{"fe80::/10"}}, "fe80::1%eth0", false, filters.Respond},
		{"unknown client with allow list", lists{gAllow: []string{"0.0.0.0/0", "::/0"}}, "", false, filters.Respond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b *Bans
			if tc.banned {
				b = bans
			}
			f := NewIPFilter(200, prefixes(t, tc.lists.gAllow...), prefixes(t, tc.lists.gDeny...),
				prefixes(t, tc.lists.rAllow...), prefixes(t, tc.lists.rDeny...), b)
			x := exchange(parse(t, "GET / HTTP/1.1", "Host: a"), "127.0.0.1", "")
			if tc.client != "" {
				x.ClientIP = netip.MustParseAddr(tc.client)
			} else {
				x.ClientIP = netip.Addr{}
			}
			got := f.Request(x)
			if got != tc.want {
				t.Fatalf("verdict %v, want %v", got, tc.want)
			}
			if got == filters.Respond && (x.Rejection.Status != 403 || x.Rejection.Code != 40302) {
				t.Errorf("rejection %+v, want 403/40302", x.Rejection)
			}
			if f.Name() != "ip_access" || f.Order() != 200 {
				t.Errorf("name/order %s/%d", f.Name(), f.Order())
			}
		})
	}
}

// TestPrefixSetMatchesLinearScan checks the merged range set, and the
// intersection of two, against netip.Prefix.Contains on random data.
func TestPrefixSetMatchesLinearScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	randAddr := func(v6 bool) netip.Addr {
		if v6 {
			var b [16]byte
			b[0], b[1] = 0x20, 0x01 // keep addresses close so prefixes overlap
			b[2] = byte(rng.IntN(4))
			for i := 3; i < 16; i++ {
				b[i] = byte(rng.IntN(256))
			}
			return netip.AddrFrom16(b)
		}
		return netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(256)), byte(rng.IntN(256))})
	}
	randPrefixes := func(n int) []netip.Prefix {
		ps := make([]netip.Prefix, n)
		for i := range ps {
			v6 := rng.IntN(2) == 0
			a := randAddr(v6)
			bits := 8 + rng.IntN(a.BitLen()-7)
			if v6 {
				bits = 16 + rng.IntN(113)
			}
			ps[i], _ = a.Prefix(bits)
		}
		return ps
	}
	for round := 0; round < 200; round++ {
		a, b := randPrefixes(1+rng.IntN(12)), randPrefixes(1+rng.IntN(12))
		sa, sb := newPrefixSet(a), newPrefixSet(b)
		both := intersect(sa, sb)
		for probe := 0; probe < 200; probe++ {
			ip := randAddr(rng.IntN(2) == 0)
			inA, inB := Contains(a, ip), Contains(b, ip)
			if sa.contains(ip) != inA {
				t.Fatalf("set %v contains(%v) = %v, linear %v", a, ip, !inA, inA)
			}
			if both.contains(ip) != (inA && inB) {
				t.Fatalf("intersect(%v, %v) contains(%v) = %v, want %v", a, b, ip, !(inA && inB), inA && inB)
			}
		}
	}
}

func TestPrefixSetEdges(t *testing.T) {
	s := newPrefixSet(prefixes(t, "0.0.0.0/0", "::/0"))
	for _, a := range []string{"0.0.0.0", "255.255.255.255", "::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"} {
		if !s.contains(netip.MustParseAddr(a)) {
			t.Errorf("/0 set misses %s", a)
		}
	}
	s = newPrefixSet(prefixes(t, "255.255.255.255", "255.255.255.254", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"))
	if len(s.v4) != 1 || !s.contains(netip.MustParseAddr("255.255.255.254")) || s.contains(netip.MustParseAddr("255.255.255.253")) {
		t.Errorf("top-of-range merge wrong: %+v", s.v4)
	}
	if s.contains(netip.Addr{}) {
		t.Error("the zero address is contained")
	}
}
