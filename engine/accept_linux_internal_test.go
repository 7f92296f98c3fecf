//go:build linux

package engine

import (
	"net"
	"strconv"
	"syscall"
	"testing"
)

// The loop's own accept4 names the peer as the dialer sees itself, over
// IPv4, IPv6 and an IPv4 client of a dual-stack listener (the kernel hands
// that one over as a v4-mapped IPv6 address): the address every IP-based
// feature (allow lists, bans, limits by ip, X-Forwarded-For) starts from.
func TestAcceptNamesThePeer(t *testing.T) {
	for _, tc := range []struct {
		name, listenNet, listenAddr, dialNet, dialHost string
		wantV4                                         bool
	}{
		{"ipv4", "tcp4", "127.0.0.1:0", "tcp4", "127.0.0.1", true},
		{"ipv6", "tcp6", "[::1]:0", "tcp6", "::1", false},
		{"v4-mapped", "tcp", "[::]:0", "tcp4", "127.0.0.1", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen(tc.listenNet, tc.listenAddr)
			if err != nil {
				t.Skipf("no %s listener here: %v", tc.listenNet, err)
			}
			defer ln.Close()
			f, err := ln.(*net.TCPListener).File() // a blocking duplicate: accept4 waits for the dial
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
			c, err := net.Dial(tc.dialNet, net.JoinHostPort(tc.dialHost, port))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fd, remote, err := accept4(int(f.Fd()))
			if err != nil {
				t.Fatalf("accept4: %v", err)
			}
			syscall.Close(fd)
			if got, want := remote.String(), c.LocalAddr().String(); got != want {
				t.Errorf("accept4 names the peer %s, want %s", got, want)
			}
			if isV4 := remote.(*net.TCPAddr).IP.To4() != nil; isV4 != tc.wantV4 {
				t.Errorf("peer %s: IPv4 = %v, want %v", remote, isV4, tc.wantV4)
			}
		})
	}
}
