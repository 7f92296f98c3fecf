//go:build linux

package engine

import (
	"net"
	"syscall"
	"testing"
)

// The loop's own accept4 names the peer as the dialer sees itself, over
// IPv4 and IPv6: the address every IP-based feature (allow lists, bans,
// limits by ip, X-Forwarded-For) starts from.
func TestAcceptNamesThePeer(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Logf("%s: %v (skipped)", network, err)
			continue
		}
		f, err := ln.(*net.TCPListener).File() // a blocking duplicate: accept4 waits for the dial
		if err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial(network, ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fd, remote, err := accept4(int(f.Fd()))
		if err != nil {
			t.Fatalf("%s: accept4: %v", network, err)
		}
		syscall.Close(fd)
		if got, want := remote.String(), c.LocalAddr().String(); got != want {
			t.Errorf("%s: accept4 names the peer %s, want %s", network, got, want)
		}
		c.Close()
		f.Close()
		ln.Close()
	}
}
