// Tests for Bans: expiry, capacity, unban, and concurrent readers.

package access

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock for Bans.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time { return c.t }

func newTestBans(max int) (*Bans, *fakeClock) {
	c := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	b := NewBans(max)
	b.clock = c.now
	return b, c
}

func ip(s string) netip.Addr { return netip.MustParseAddr(s) }

func pfx(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func TestBansExpire(t *testing.T) {
	b, clock := newTestBans(10)
	start := clock.t
	if err := b.Ban(pfx("203.0.113.0/24"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := b.Ban(pfx("2001:db8::/64"), 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ip   string
		at   time.Duration
		want bool
	}{
		{"203.0.113.7", 0, true},
		{"::ffff:203.0.113.7", 0, true},
		{"203.0.114.7", 0, false},
		{"203.0.113.7", time.Minute - 1, true},
		{"203.0.113.7", time.Minute, false}, // expiry is exclusive
		{"2001:db8::99", time.Minute, true},
		{"2001:db8:0:1::99", time.Minute, false},
		{"2001:db8::99", 2 * time.Minute, false},
		{"fe80::1", 0, false},
	} {
		if got := b.Banned(ip(tc.ip), start.Add(tc.at)); got != tc.want {
			t.Errorf("Banned(%s, +%v) = %v, want %v", tc.ip, tc.at, got, tc.want)
		}
	}
	if got := b.Banned(netip.Addr{}, start); got {
		t.Error("the zero address is banned")
	}
}

func TestBansReBanSetsNewExpiry(t *testing.T) {
	b, clock := newTestBans(10)
	start := clock.t
	b.Ban(pfx("198.51.100.1/32"), time.Hour)
	b.Ban(pfx("198.51.100.1/32"), time.Second) // shortened
	if b.Banned(ip("198.51.100.1"), start.Add(2*time.Second)) {
		t.Error("re-ban did not replace the expiry")
	}
	if n := len(b.List(start)); n != 1 {
		t.Errorf("List has %d entries, want 1", n)
	}
}

func TestBansUnban(t *testing.T) {
	b, clock := newTestBans(10)
	b.Ban(pfx("198.51.100.0/24"), time.Hour)
	b.Ban(pfx("198.51.100.7/32"), time.Hour)
	if b.Unban(pfx("198.51.100.0/25")) {
		t.Error("Unban of a prefix never banned reported true")
	}
	if !b.Unban(pfx("198.51.100.0/24")) {
		t.Error("Unban of a banned prefix reported false")
	}
	if b.Banned(ip("198.51.100.8"), clock.t) {
		t.Error("still banned after Unban")
	}
	if !b.Banned(ip("198.51.100.7"), clock.t) {
		t.Error("Unban lifted a different, more specific ban")
	}
}

func TestBansCapacity(t *testing.T) {
	b, clock := newTestBans(2)
	if err := b.Ban(pfx("192.0.2.1/32"), time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Ban(pfx("192.0.2.2/32"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := b.Ban(pfx("192.0.2.3/32"), time.Hour); !errors.Is(err, ErrTooManyBans) {
		t.Fatalf("third ban: err = %v, want ErrTooManyBans", err)
	}
	if err := b.Ban(pfx("192.0.2.2/32"), 2*time.Hour); err != nil {
		t.Errorf("re-ban at capacity: %v", err)
	}
	clock.t = clock.t.Add(time.Second) // the first ban expires and is pruned
	if err := b.Ban(pfx("192.0.2.3/32"), time.Hour); err != nil {
		t.Errorf("ban after expiry freed room: %v", err)
	}
	list := b.List(clock.t)
	if len(list) != 2 || list[0].Prefix != pfx("192.0.2.2/32") || list[1].Prefix != pfx("192.0.2.3/32") {
		t.Errorf("List = %v", list)
	}
}

func TestBansRefuseBadInput(t *testing.T) {
	b, _ := newTestBans(2)
	for _, tc := range []struct {
		p   netip.Prefix
		ttl time.Duration
	}{
		{netip.Prefix{}, time.Hour},
		{pfx("192.0.2.0/24"), 0},
		{pfx("192.0.2.0/24"), -time.Second},
	} {
		if err := b.Ban(tc.p, tc.ttl); err == nil {
			t.Errorf("Ban(%v, %v) succeeded", tc.p, tc.ttl)
		}
	}
}

func TestBansListOrderAndNormalisation(t *testing.T) {
	b, clock := newTestBans(10)
	b.Ban(pfx("10.1.2.3/8"), time.Hour)
	b.Ban(pfx("::ffff:192.0.2.0/120"), time.Hour)
	b.Ban(pfx("2001:db8::1/128"), time.Hour)
	got := b.List(clock.t)
	want := []netip.Prefix{pfx("2001:db8::1/128"), pfx("192.0.2.0/24"), pfx("10.0.0.0/8")}
	if len(got) != len(want) {
		t.Fatalf("List = %v", got)
	}
	for i := range want {
		if got[i].Prefix != want[i] || !got[i].Until.Equal(clock.t.Add(time.Hour)) {
			t.Errorf("List[%d] = %v, want %v until +1h", i, got[i], want[i])
		}
	}
}

// TestBansConcurrent has readers look up while a writer bans and unbans;
// -race checks the snapshot hand-off.
func TestBansConcurrent(t *testing.T) {
	b := NewBans(1000)
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					b.Banned(ip("192.0.2.77"), time.Now())
				}
			}
		}()
	}
	for i := 0; i < 200; i++ {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), 32)
		if err := b.Ban(p, time.Hour); err != nil {
			t.Fatal(err)
		}
		if i%2 == 1 {
			b.Unban(p)
		}
	}
	close(stop)
	wg.Wait()
	if !b.Banned(ip("192.0.2.76"), time.Now()) || b.Banned(ip("192.0.2.77"), time.Now()) {
		t.Error("final state wrong: want .76 banned, .77 unbanned")
	}
	if n := len(b.List(time.Now())); n != 100 {
		t.Errorf("%d bans, want 100", n)
	}
}

// Replace swaps in a whole set (normalised, bounded by the capacity);
// Snapshot is the live set, a copy.
func TestBansReplaceAndSnapshot(t *testing.T) {
	b, clock := newTestBans(2)
	now := clock.t.UnixNano()
	b.Ban(pfx("198.51.100.0/24"), time.Hour)
	b.Replace(map[netip.Prefix]int64{
		pfx("203.0.113.7/24"): now + int64(time.Minute), // normalised to 203.0.113.0/24
		pfx("2001:db8::/32"):  now - 1,                  // lapsed: kept, but not live
	})
	if b.Banned(ip("198.51.100.1"), clock.t) {
		t.Error("a ban the replaced set lacks is still in force")
	}
	if !b.Banned(ip("203.0.113.9"), clock.t) || b.Banned(ip("2001:db8::1"), clock.t) {
		t.Error("the replaced set is not the one in force")
	}
	snap := b.Snapshot()
	if len(snap) != 1 || snap[pfx("203.0.113.0/24")] != now+int64(time.Minute) {
		t.Errorf("snapshot %v", snap)
	}
	delete(snap, pfx("203.0.113.0/24"))
	if !b.Banned(ip("203.0.113.9"), clock.t) {
		t.Error("changing the snapshot changed the bans")
	}
	b.Replace(map[netip.Prefix]int64{pfx("10.0.0.1/32"): now + 1, pfx("10.0.0.2/32"): now + 1, pfx("10.0.0.3/32"): now + 1})
	if n := len(b.Snapshot()); n != 2 {
		t.Errorf("a set past the capacity of 2 kept %d", n)
	}
}
