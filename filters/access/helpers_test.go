// Test helpers: exchanges built from raw request heads.

package access

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

// parse parses a head given as lines (CRLFs added) with the default limits.
func parse(t testing.TB, lines ...string) *codec.Request {
	t.Helper()
	raw := strings.Join(lines, "\r\n") + "\r\n\r\n"
	req := &codec.Request{}
	n, err := codec.ParseRequest([]byte(raw), req, nil)
	if err != nil || n != len(raw) {
		t.Fatalf("parse %q: n=%d err=%v", raw, n, err)
	}
	return req
}

// exchange returns an exchange for req from peer, with ClientIP = client.
func exchange(req *codec.Request, peer, client string) *filters.Exchange {
	x := &filters.Exchange{}
	x.Reset(req, []byte("generated-id"), netip.MustParseAddr(peer), 0, nil)
	if client != "" {
		x.ClientIP = netip.MustParseAddr(client)
	}
	return x
}

func prefixes(t testing.TB, list ...string) []netip.Prefix {
	t.Helper()
	ps, err := ParsePrefixes(list)
	if err != nil {
		t.Fatal(err)
	}
	return ps
}
