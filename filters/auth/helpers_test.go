// Test helpers: keys, token signing, configs and exchanges.

package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool/units"
)

const testSecret = "0123456789abcdef0123456789abcdef" // 32 bytes

// t0 is the tests' fixed "now".
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// RSA key generation is slow; every test shares two keys.
var rsaKeys = sync.OnceValue(func() [2]*rsa.PrivateKey {
	var ks [2]*rsa.PrivateKey
	for i := range ks {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		ks[i] = k
	}
	return ks
})

func ecKey(t testing.TB) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pkixPEM(t testing.TB, pub any) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func writeFile(t testing.TB, name, data string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// header and claims are JSON objects; sign produces the signature bytes.
type m = map[string]any

func encodePart(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func makeToken(t testing.TB, header, claims m, sign func(signed []byte) []byte) string {
	signed := encodePart(t, header) + "." + encodePart(t, claims)
	return signed + "." + base64.RawURLEncoding.EncodeToString(sign([]byte(signed)))
}

func hs256(secret []byte) func([]byte) []byte {
	return func(signed []byte) []byte {
		mac := hmac.New(sha256.New, secret)
		mac.Write(signed)
		return mac.Sum(nil)
	}
}

func rs256(k *rsa.PrivateKey) func([]byte) []byte {
	return func(signed []byte) []byte {
		d := sha256.Sum256(signed)
		sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
		if err != nil {
			panic(err)
		}
		return sig
	}
}

// es256 signs in JWS form, R||S, 32 bytes each, with the low S Loopgate
// takes.
func es256(k *ecdsa.PrivateKey) func([]byte) []byte { return es256S(k, false) }

// es256High signs like es256 but with the high S, n-s: the same signature's
// malleated twin, which ecdsa.Verify accepts.
func es256High(k *ecdsa.PrivateKey) func([]byte) []byte { return es256S(k, true) }

func es256S(k *ecdsa.PrivateKey, high bool) func([]byte) []byte {
	return func(signed []byte) []byte {
		d := sha256.Sum256(signed)
		r, s, err := ecdsa.Sign(rand.Reader, k, d[:])
		if err != nil {
			panic(err)
		}
		n := elliptic.P256().Params().N
		half := new(big.Int).Rsh(n, 1)
		if (s.Cmp(half) > 0) != high {
			s.Sub(n, s)
		}
		out := make([]byte, 64)
		r.FillBytes(out[:32])
		s.FillBytes(out[32:])
		return out
	}
}

func hsToken(t testing.TB, claims m) string {
	return makeToken(t, m{"alg": "HS256", "typ": "JWT"}, claims, hs256([]byte(testSecret)))
}

// baseConfig is the auth section as Global.Provision defaults it, with an HS256
// secret.
func baseConfig() *Config {
	return &Config{
		Header:    "Authorization",
		CacheTTL:  units.Duration(30 * time.Second),
		CacheSize: 100,
		JWT: JWT{
			HS256Secret: testSecret,
			RolesClaim:  "roles",
			TenantClaim: "tenant",
		},
		IdentityHeaders: IdentityHeaders{
			Subject: ptr(DefaultSubjectHeader),
			Tenant:  ptr(DefaultTenantHeader),
			Roles:   ptr(DefaultRolesHeader),
			Kind:    ptr(DefaultKindHeader),
		},
	}
}

func ptr(s string) *string { return &s }

// newVerifier builds a Verifier on a clock the test controls.
func newVerifier(t testing.TB, cfg *Config, loops int) (*Verifier, *time.Time) {
	t.Helper()
	v, err := NewVerifier(cfg, loops, nil)
	if err != nil {
		t.Fatal(err)
	}
	now := t0
	v.now = func() time.Time { return now }
	v.mono = func(*filters.Exchange) int64 { return now.UnixNano() } // the cache's clock moves with it
	return v, &now
}

// exchange parses raw and prepares an exchange on loop; the verdict of the
// function its ticket is resumed with is sent to the returned channel.
func exchange(t testing.TB, raw string, loop int) (*filters.Exchange, chan filters.Verdict) {
	return exchangeFrom(t, []byte(raw), loop)
}

// exchangeFrom is exchange on a buffer the test keeps (the request's views
// point into it).
func exchangeFrom(t testing.TB, buf []byte, loop int) (*filters.Exchange, chan filters.Verdict) {
	t.Helper()
	req := new(codec.Request)
	if _, err := codec.ParseRequest(buf, req, nil); err != nil {
		t.Fatalf("parse %q: %v", buf, err)
	}
	resumed := make(chan filters.Verdict, 1)
	x := new(filters.Exchange)
	p := &testParker{x: x, resumed: func(v filters.Verdict) { resumed <- v }}
	x.Reset(req, []byte("req-1"), netip.MustParseAddr("192.0.2.7"), loop, p)
	return x, resumed
}

// testParker stands in for the engine's parking: a ticket resumes once,
// running its function at once on the caller's goroutine, and hands the
// verdict to resumed.
type testParker struct {
	x       *filters.Exchange
	gen     uint64
	out     bool // a ticket for gen is out and unresumed
	resumed func(filters.Verdict)
}

func (p *testParker) Park() filters.Ticket {
	if !p.out {
		p.gen++
		p.out = true
	}
	return filters.NewTicket(p, p.gen)
}

func (p *testParker) Resume(gen uint64, fn func(*filters.Exchange) filters.Verdict) {
	if gen != p.gen || !p.out {
		return
	}
	p.out = false
	p.resumed(fn(p.x))
}

func get(headers string) string {
	return "GET /orders?id=7 HTTP/1.1\r\nHost: api.example\r\n" + headers + "\r\n"
}

func withAuth(cred string) string { return get("Authorization: " + cred + "\r\n") }

// verify runs v on a fresh exchange on loop 0.
func verify(t testing.TB, v *Verifier, cred string) (filters.Identity, *Failure) {
	t.Helper()
	x, _ := exchange(t, get(""), 0)
	return v.Verify(x, []byte(cred))
}
