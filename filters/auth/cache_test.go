// Tests of the verification cache and of revocation.

package auth

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/loopgate/loopgate/pool/units"
)

// cached reports whether token is in loop 0's cache, by its hash.
func cached(v *Verifier, token string) bool {
	_, ok := v.caches[0].entries[credentialKey([]byte(token))]
	return ok
}

// A cached token is trusted for cache_ttl without re-verifying: the test
// removes the key, so only the cache can still admit it.
func TestCacheTTL(t *testing.T) {
	v, now := newVerifier(t, baseConfig(), 1) // TTL 30s
	tok := hsToken(t, m{"sub": "alice", "exp": t0.Unix() + 3600})
	if _, fail := verify(t, v, "Bearer "+tok); fail != nil {
		t.Fatal(fail)
	}
	if !cached(v, tok) {
		t.Fatal("verified token not cached")
	}
	v.keys = &keySet{} // from now on, only a cache hit can succeed

	*now = t0.Add(29 * time.Second)
	if id, fail := verify(t, v, "Bearer "+tok); fail != nil || string(id.Subject) != "alice" {
		t.Fatalf("within TTL: %+v, %v", id, fail)
	}
	*now = t0.Add(30 * time.Second)
	if _, fail := verify(t, v, "Bearer "+tok); fail != FailInvalid {
		t.Fatalf("after TTL: %v, want a re-verification that fails", fail)
	}
}

// A cache hit reads no clock: its entry expires on the monotonic clock the
// exchange already read (Exchange.Now), and the wall clock is read only
// for a revocation check while some revocation is in force.
func TestCacheHitReadsNoClock(t *testing.T) {
	v, now := newVerifier(t, baseConfig(), 1)
	reads := 0
	v.now = func() time.Time { reads++; return *now }
	tok := hsToken(t, m{"sub": "alice", "exp": t0.Unix() + 3600})
	if _, fail := verify(t, v, "Bearer "+tok); fail != nil {
		t.Fatal(fail)
	}
	reads = 0
	if _, fail := verify(t, v, "Bearer "+tok); fail != nil || reads != 0 {
		t.Fatalf("cache hit: %v, %d wall clock reads, want none", fail, reads)
	}
	v.Revoke("Bearer "+hsToken(t, m{"sub": "bob"}), t0.Add(time.Minute))
	reads = 0
	if _, fail := verify(t, v, "Bearer "+tok); fail != nil || reads == 0 {
		t.Fatalf("cache hit with a revocation in force: %v, %d wall clock reads, want the revocation check's", fail, reads)
	}
}

// By default the cache's clock is the exchange's (Exchange.Now, here read
// outside a phase): an entry expires the TTL after the verification, on
// that clock.
func TestCacheExpiresOnTheExchangeClock(t *testing.T) {
	v, err := NewVerifier(baseConfig(), 1, nil) // TTL 30s
	if err != nil {
		t.Fatal(err)
	}
	tok := hsToken(t, m{"sub": "alice"}) // no exp: the TTL bounds the entry
	x, _ := exchange(t, get(""), 0)
	before := x.Now()
	if _, fail := v.Verify(x, []byte("Bearer "+tok)); fail != nil {
		t.Fatal(fail)
	}
	after := x.Now()
	e := v.caches[0].entries[credentialKey([]byte(tok))]
	if ttl := int64(30 * time.Second); e.expires < before+ttl || e.expires > after+ttl {
		t.Fatalf("entry expires at %d, want within [%d, %d]", e.expires, before+ttl, after+ttl)
	}
}

// An entry never outlives its token's exp.
func TestCacheBoundedByExp(t *testing.T) {
	v, now := newVerifier(t, baseConfig(), 1)
	tok := hsToken(t, m{"exp": t0.Unix() + 10})
	if _, fail := verify(t, v, "Bearer "+tok); fail != nil {
		t.Fatal(fail)
	}
	*now = t0.Add(9 * time.Second)
	if _, fail := verify(t, v, "Bearer "+tok); fail != nil {
		t.Fatalf("before exp: %v", fail)
	}
	*now = t0.Add(10 * time.Second)
	if _, fail := verify(t, v, "Bearer "+tok); fail != FailExpired {
		t.Fatalf("at exp: %v, want expired", fail)
	}
}

func TestCacheBound(t *testing.T) {
	cfg := baseConfig()
	cfg.CacheSize = 2
	v, _ := newVerifier(t, cfg, 1)
	var toks []string
	for i := range 5 {
		tok := hsToken(t, m{"sub": fmt.Sprint("user", i)})
		toks = append(toks, tok)
		if _, fail := verify(t, v, "Bearer "+tok); fail != nil {
			t.Fatal(fail)
		}
		if n := len(v.caches[0].entries); n > 2 {
			t.Fatalf("after %d tokens the cache holds %d entries, bound 2", i+1, n)
		}
	}
	// FIFO: the two most recent remain.
	for i, tok := range toks {
		if want := i >= 3; cached(v, tok) != want {
			t.Errorf("token %d cached = %v, want %v", i, !want, want)
		}
	}
	// Re-verifying a cached token keeps its slot and evicts nothing.
	if _, fail := verify(t, v, "Bearer "+toks[4]); fail != nil || !cached(v, toks[3]) {
		t.Fatalf("refreshing a cached token evicted another (%v)", fail)
	}
}

// The cache is keyed by a hash of the token, and a token is never stored.
func TestCacheKeyIsHash(t *testing.T) {
	v, _ := newVerifier(t, baseConfig(), 1)
	tok := hsToken(t, m{"sub": "alice"})
	verify(t, v, "Bearer "+tok)
	for k := range v.caches[0].entries {
		if k != credentialKey([]byte(tok)) {
			t.Fatalf("cache key %x is not SHA-256(token)[:16]", k)
		}
	}
}

func TestCachePerLoop(t *testing.T) {
	v, _ := newVerifier(t, baseConfig(), 3)
	tok := hsToken(t, m{"sub": "alice"})
	x, _ := exchange(t, get(""), 2)
	if _, fail := v.Verify(x, []byte("Bearer "+tok)); fail != nil {
		t.Fatal(fail)
	}
	for i, c := range v.caches {
		if got, want := len(c.entries), map[bool]int{true: 1}[i == 2]; got != want {
			t.Errorf("loop %d cache holds %d, want %d", i, got, want)
		}
	}
	// A loop index beyond the caches still verifies, uncached.
	x, _ = exchange(t, get(""), 7)
	if _, fail := v.Verify(x, []byte("Bearer "+tok)); fail != nil {
		t.Fatalf("loop out of range: %v", fail)
	}
}

func TestRevokeCachedJWT(t *testing.T) {
	v, now := newVerifier(t, baseConfig(), 1)
	tok := hsToken(t, m{"sub": "alice"})
	other := hsToken(t, m{"sub": "bob"})
	for _, cred := range []string{tok, other} {
		if _, fail := verify(t, v, "Bearer "+cred); fail != nil {
			t.Fatal(fail)
		}
	}
	if !cached(v, tok) {
		t.Fatal("not cached")
	}

	v.Revoke("Bearer "+tok, t0.Add(time.Minute))
	if _, fail := verify(t, v, "Bearer "+tok); fail != FailRevoked {
		t.Fatalf("revoked cached token: %v", fail)
	}
	if _, fail := verify(t, v, "Bearer "+other); fail != nil {
		t.Fatalf("other token: %v", fail)
	}
	if n := v.Revocations(); n != 1 {
		t.Fatalf("Revocations() = %d, want 1", n)
	}

	// The revocation lapses at its until.
	*now = t0.Add(time.Minute)
	if _, fail := verify(t, v, "Bearer "+tok); fail != nil {
		t.Fatalf("after the revocation's end: %v", fail)
	}
	if n := v.Revocations(); n != 0 {
		t.Fatalf("Revocations() = %d after lapse, want 0", n)
	}

	// Revoke without the prefix names the same token; Unrevoke lifts it.
	v.Revoke(tok, time.Time{})
	if _, fail := verify(t, v, "bearer "+tok); fail != FailRevoked {
		t.Fatalf("revoked for good: %v", fail)
	}
	v.Unrevoke(tok)
	if _, fail := verify(t, v, "Bearer "+tok); fail != nil {
		t.Fatalf("unrevoked: %v", fail)
	}

	// An until already past does nothing.
	v.Revoke(tok, t0)
	if _, fail := verify(t, v, "Bearer "+tok); fail != nil {
		t.Fatalf("revoked into the past: %v", fail)
	}
}

// Loops verify while the admin goroutine revokes: run with -race.
func TestRevokeConcurrent(t *testing.T) {
	const loops = 4
	v, err := NewVerifier(baseConfig(), loops, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok := hsToken(t, m{"sub": "alice"})
	target := hsToken(t, m{"sub": "mallory"})

	var wg sync.WaitGroup
	for loop := range loops {
		x, _ := exchange(t, get(""), loop)
		wg.Go(func() {
			for range 200 {
				if _, fail := v.Verify(x, []byte("Bearer "+tok)); fail != nil {
					t.Errorf("loop %d: %v", loop, fail)
					return
				}
				v.Verify(x, []byte("Bearer "+target))
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			v.Revoke(target, time.Time{})
			v.Unrevoke(target)
		}
		v.Revoke(target, time.Time{})
	})
	wg.Wait()
	for loop := range loops {
		x, _ := exchange(t, get(""), loop)
		if _, fail := v.Verify(x, []byte("Bearer "+target)); fail != FailRevoked {
			t.Errorf("loop %d after the final revoke: %v", loop, fail)
		}
	}
}

// A revoked ES256 token is refused in every encoding of its signature:
// revocation names its signed content, not its bytes. ECDSA signing is
// randomised, so signing the same content twice gives a second valid
// (low-S) signature to present.
func TestRevokeBySignedContent(t *testing.T) {
	k := ecKey(t)
	cfg := baseConfig()
	cfg.JWT.ES256PublicKey = pkixPEM(t, &k.PublicKey)
	v, _ := newVerifier(t, cfg, 1)
	header, claims := m{"alg": "ES256"}, m{"sub": "carol", "exp": t0.Unix() + 3600}
	first := makeToken(t, header, claims, es256(k))
	second := makeToken(t, header, claims, es256(k))
	if first == second {
		t.Fatal("test setup: two signatures of one content are equal")
	}
	for _, tok := range []string{first, second} {
		if _, fail := verify(t, v, "Bearer "+tok); fail != nil {
			t.Fatal(fail)
		}
	}
	v.Revoke(first, time.Time{})
	for name, tok := range map[string]string{"revoked": first, "re-signed": second, "high-S twin": twinES256(t, second)} {
		if _, fail := verify(t, v, "Bearer "+tok); fail == nil {
			t.Errorf("%s copy of a revoked token admitted", name)
		}
	}
	if _, fail := verify(t, v, "Bearer "+second); fail != FailRevoked {
		t.Errorf("re-signed copy, cached before the revocation: %v, want revoked", fail)
	}
	// Unrevoke by any copy lifts it for all.
	v.Unrevoke("Bearer " + second)
	if _, fail := verify(t, v, "Bearer "+first); fail != nil {
		t.Errorf("after Unrevoke: %v", fail)
	}
	// Other content by the same key is not touched.
	v.Revoke(first, time.Time{})
	if _, fail := verify(t, v, "Bearer "+makeToken(t, header, m{"sub": "dave"}, es256(k))); fail != nil {
		t.Errorf("other token: %v", fail)
	}
}

// A token with a jti is revoked by it: every token carrying that jti is
// refused, from the cache too, whatever else differs.
func TestRevokeByJTI(t *testing.T) {
	v, _ := newVerifier(t, baseConfig(), 1)
	issued := hsToken(t, m{"sub": "alice", "jti": "j-1"})
	reissued := hsToken(t, m{"sub": "alice", "jti": "j-1", "iat": t0.Unix()})
	other := hsToken(t, m{"sub": "alice", "jti": "j-2"})
	for _, tok := range []string{issued, reissued, other} {
		if _, fail := verify(t, v, "Bearer "+tok); fail != nil {
			t.Fatal(fail)
		}
	}
	if !cached(v, reissued) {
		t.Fatal("not cached")
	}
	v.Revoke("Bearer "+issued, time.Time{})
	if _, fail := verify(t, v, "Bearer "+reissued); fail != FailRevoked {
		t.Errorf("cached token with a revoked jti: %v, want revoked", fail)
	}
	if _, fail := verify(t, v, "Bearer "+other); fail != nil {
		t.Errorf("other jti: %v", fail)
	}
	if _, fail := verify(t, v, "Bearer "+hsToken(t, m{"sub": "alice", "jti": 7})); fail != FailInvalid {
		t.Errorf("numeric jti: %v, want invalid", fail)
	}
}

// Revoke takes an API key as the key even when it is shaped like a token.
func TestRevokeDottedAPIKey(t *testing.T) {
	cfg := baseConfig()
	cfg.APIKeys = []APIKey{{Key: "e30.e30.sig", Consumer: "svc"}} // "{}" twice: JSON objects
	v, _ := newVerifier(t, cfg, 1)
	if _, fail := verify(t, v, "e30.e30.sig"); fail != nil {
		t.Fatal(fail)
	}
	v.Revoke("e30.e30.sig", time.Time{})
	if _, fail := verify(t, v, "e30.e30.sig"); fail != FailRevoked {
		t.Fatalf("revoked dotted key: %v", fail)
	}
}

// RevocationKey names what Revoke and RevokeKey revoke, with a JWT's exp
// (plus leeway); a set replaced whole (a cluster's) refuses a cached
// token and, replaced again without it, admits it.
func TestRevocationKeyAndReplace(t *testing.T) {
	cfg := baseConfig()
	cfg.JWT.Leeway = units.Duration(5 * time.Second)
	v, _ := newVerifier(t, cfg, 1)
	tok := "Bearer " + hsToken(t, m{"sub": "alice", "jti": "j-1", "exp": t0.Unix() + 60})
	key, exp := v.RevocationKey(tok, false)
	if key != revocationKeyOf("j-1", nil) || !exp.Equal(time.Unix(t0.Unix()+65, 0)) {
		t.Fatalf("JWT: key %x exp %v", key, exp)
	}
	if key, exp := v.RevocationKey("k-1", true); key != credentialKey([]byte("k-1")) || !exp.IsZero() {
		t.Fatalf("API key: key %x exp %v", key, exp)
	}
	if _, fail := verify(t, v, tok); fail != nil {
		t.Fatal(fail)
	}
	v.revoked.Replace(map[[16]byte]int64{key: 0})
	if _, fail := verify(t, v, tok); fail != FailRevoked {
		t.Fatalf("cached token after Replace: %v", fail)
	}
	if n := len(v.revoked.Snapshot()); n != 1 {
		t.Fatalf("Snapshot: %d entries", n)
	}
	v.revoked.Replace(map[[16]byte]int64{})
	if _, fail := verify(t, v, tok); fail != nil {
		t.Fatalf("after a Replace without it: %v", fail)
	}
}

// A revoked user's every credential is refused, cached JWTs and API keys
// of that consumer alike, until the revocation ends or is lifted; another
// user's are not.
func TestRevokeUser(t *testing.T) {
	cfg := baseConfig()
	cfg.APIKeys = []APIKey{{Key: "k-alice-123", Consumer: "alice"}, {Key: "k-bob-1234", Consumer: "bob"}}
	v, now := newVerifier(t, cfg, 1)
	alice1, alice2, bob := hsToken(t, m{"sub": "alice", "jti": "1"}), hsToken(t, m{"sub": "alice", "jti": "2"}), hsToken(t, m{"sub": "bob"})
	creds := map[string]bool{"Bearer " + alice1: true, "Bearer " + alice2: true, "k-alice-123": true, "Bearer " + bob: false, "k-bob-1234": false}
	for cred := range creds {
		if _, fail := verify(t, v, cred); fail != nil {
			t.Fatalf("%q before: %v", cred, fail)
		}
	}
	v.RevokeUser("alice", t0.Add(time.Minute))
	for cred, alices := range creds {
		if _, fail := verify(t, v, cred); alices && fail != FailRevoked || !alices && fail != nil {
			t.Errorf("%q with alice revoked: %v", cred, fail)
		}
	}
	if v.UserRevocationKey("alice") == v.UserRevocationKey("bob") || v.UserRevocationKey("alice") == credentialKey([]byte("alice")) {
		t.Error("user keys collide with each other or with an API key's")
	}
	*now = t0.Add(time.Minute)
	if _, fail := verify(t, v, "Bearer "+alice1); fail != nil {
		t.Fatalf("after the revocation's end: %v", fail)
	}
	v.RevokeUser("alice", time.Time{})
	v.UnrevokeUser("alice")
	if _, fail := verify(t, v, "k-alice-123"); fail != nil || v.Revocations() != 0 {
		t.Fatalf("lifted: %v, %d revocations", fail, v.Revocations())
	}
}
