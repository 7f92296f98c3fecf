// Benchmarks for the per-request paths; each must report 0 allocs/op.

package access

import (
	"net/netip"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters"
)

func BenchmarkClientIP(b *testing.B) {
	trusted := prefixes(b, "10.0.0.0/8", "172.16.0.0/12", "2001:db8:ffff::/48")
	req := parse(b, "GET /api/users HTTP/1.1", "Host: api.example.com", "User-Agent: bench",
		"X-Forwarded-For: 203.0.113.7, 10.0.0.2", "Accept: */*")
	peer := netip.MustParseAddr("10.0.0.1")
	want := netip.MustParseAddr("203.0.113.7")
	b.ReportAllocs()
	for b.Loop() {
		if ClientIP(peer, req.Headers, trusted) != want {
			b.Fatal("wrong client")
		}
	}
}

func BenchmarkClientIPv6(b *testing.B) {
	trusted := prefixes(b, "10.0.0.0/8", "2001:db8:ffff::/48")
	req := parse(b, "GET / HTTP/1.1", "Host: a", "X-Forwarded-For: 2001:db8:1:2:3:4:5:6, 2001:db8:ffff::9")
	peer := netip.MustParseAddr("2001:db8:ffff::1")
	b.ReportAllocs()
	for b.Loop() {
		if !ClientIP(peer, req.Headers, trusted).Is6() {
			b.Fatal("wrong client")
		}
	}
}

func BenchmarkIPFilter(b *testing.B) {
	allow := prefixes(b, "10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "203.0.113.0/24", "198.51.100.0/24",
		"192.0.2.0/24", "100.64.0.0/10", "2001:db8::/32", "fd00::/8", "169.254.0.0/16")
	f := NewIPFilter(200, allow, nil, nil, nil, NewBans(0))
	x := exchange(parse(b, "GET / HTTP/1.1", "Host: a"), "127.0.0.1", "198.51.100.7")
	b.ReportAllocs()
	for b.Loop() {
		if f.Request(x) != filters.Continue {
			b.Fatal("denied")
		}
	}
}

func BenchmarkBannedHit(b *testing.B) {
	bans := NewBans(0)
	for i := 0; i < 1000; i++ {
		bans.Ban(netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 51, byte(i >> 8), byte(i)}), 32), time.Hour)
	}
	bans.Ban(pfx("203.0.113.0/24"), time.Hour)
	client := netip.MustParseAddr("203.0.113.7")
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		if !bans.Banned(client, now) {
			b.Fatal("not banned")
		}
	}
}
