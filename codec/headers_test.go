// Tests for Headers lookups and IsHopByHop.

package codec

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/loopgate/loopgate/pool/pooltest"
)

func TestHeadersLookups(t *testing.T) {
	h := Headers{
		{Name: []byte("Content-Type"), Value: []byte("text/plain")},
		{Name: []byte("connection"), Value: []byte("keep-alive, X-Secret ,Upgrade")},
		{Name: []byte("X-Dup"), Value: []byte("first")},
		{Name: []byte("x-dup"), Value: []byte("second")},
		{Name: []byte("CONNECTION"), Value: []byte("te")},
	}
	if got := string(h.Get("content-type")); got != "text/plain" {
		t.Errorf("Get(content-type) = %q", got)
	}
	if got := string(h.Get("X-DUP")); got != "first" {
		t.Errorf("Get(X-DUP) = %q, want first match", got)
	}
	if h.Get("missing") != nil || h.Get("content-typ") != nil {
		t.Error("Get of absent name returned non-nil")
	}
	for _, tok := range []string{"keep-alive", "x-secret", "UPGRADE", "TE"} {
		if !h.ConnectionHas(tok) || !h.Listed([]byte(tok)) {
			t.Errorf("ConnectionHas/Listed(%q) = false", tok)
		}
	}
	for _, tok := range []string{"close", "x-secre", "", "keep-alive, x-secret"} {
		if h.ConnectionHas(tok) || h.Listed([]byte(tok)) {
			t.Errorf("ConnectionHas/Listed(%q) = true", tok)
		}
	}
	if (Headers{}).ConnectionHas("close") {
		t.Error("empty Headers has close")
	}
}

func TestListHasEmptyElements(t *testing.T) {
	if !listHas([]byte(" , ,close,"), "close") || listHas([]byte(",,"), "close") || !listHas([]byte(",,"), "") {
		t.Error("listHas mishandles empty list elements")
	}
}

func TestIsHopByHop(t *testing.T) {
	hop := []string{"Connection", "keep-alive", "Proxy-Connection", "proxy-authenticate", "PROXY-AUTHORIZATION",
		"te", "Trailer", "Transfer-Encoding", "upgrade"}
	for _, n := range hop {
		if !IsHopByHop([]byte(n)) {
			t.Errorf("IsHopByHop(%q) = false", n)
		}
	}
	for _, n := range []string{"Host", "Content-Length", "Trailers", "Upgrade-Insecure-Requests", "tx", "", "X-Forwarded-For", "Authorization"} {
		if IsHopByHop([]byte(n)) {
			t.Errorf("IsHopByHop(%q) = true", n)
		}
	}
}

func TestHeadersLookupAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	var r Request
	if _, err := ParseRequest([]byte(typicalGET), &r, nil); err != nil {
		t.Fatal(err)
	}
	name := []byte("X-Request-Id")
	allocs := testing.AllocsPerRun(100, func() {
		_ = r.Headers.Get("authorization")
		_ = r.Headers.ConnectionHas("close")
		_ = r.Headers.Listed(name)
		_ = IsHopByHop(name)
	})
	if allocs != 0 {
		t.Errorf("lookups allocate %v times", allocs)
	}
}

func TestValidValueMatchesTable(t *testing.T) {
	// Every byte value at every position of values of every length up to 48 (three 16-byte steps,
	// and every tail), on a clean filler and on one of obs-text, against the byte table.
	for _, fill := range []byte{'a', 0x80, 0xff} {
		for n := 1; n <= 48; n++ {
			buf := bytes.Repeat([]byte{fill}, n)
			for pos := range buf {
				for c := 0; c < 256; c++ {
					v := append([]byte(nil), buf...)
					v[pos] = byte(c)
					if got, want := validValue(v), valueTable[c]; got != want {
						t.Fatalf("validValue of %d bytes of %#x with %#x at %d = %v, want %v", n, fill, c, pos, got, want)
					}
				}
			}
		}
	}
	// Random values, mostly clean, with an occasional control byte, HTAB or DEL, some of them more
	// than once, against the byte-wise definition.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		v := make([]byte, rng.IntN(70))
		for i := range v {
			switch r := rng.IntN(100); {
			case r < 2:
				v[i] = byte(rng.IntN(0x20))
			case r < 3:
				v[i] = 0x7f
			case r < 5:
				v[i] = '\t'
			default:
				v[i] = byte(0x20 + rng.IntN(0xe0))
			}
		}
		if got, want := validValue(v), validBytesRef(v); got != want {
			t.Fatalf("validValue(%q) = %v, want %v", v, got, want)
		}
	}
}

// validBytesRef is the field-value definition (RFC 9110 5.5), written out apart from valueTable.
func validBytesRef(v []byte) bool {
	for _, c := range v {
		if c != '\t' && (c < 0x20 || c == 0x7f) {
			return false
		}
	}
	return true
}

func TestHeadersOnly(t *testing.T) {
	h := Headers{{Name: []byte("A"), Value: []byte("1")}, {Name: []byte("b"), Value: []byte("x, y")},
		{Name: []byte("a"), Value: []byte("2")}, {Name: []byte("A"), Value: []byte("3")}}
	for _, tc := range []struct {
		name string
		v    string
		n    int
	}{{"a", "1", 2}, {"B", "x, y", 1}, {"c", "", 0}} {
		if v, n := h.Only(tc.name); string(v) != tc.v || n != tc.n {
			t.Errorf("Only(%q) = %q, %d; want %q, %d", tc.name, v, n, tc.v, tc.n)
		}
	}
}
