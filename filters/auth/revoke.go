// Revocation: a copy-on-write set of revocation keys, written by the admin
// API and read lock-free by every loop, and how a credential maps to its key.
// The set is owned by whoever keeps it across config reloads (the engine's
// Server), not by a Verifier: every Verifier compiled from a new config is
// handed the same set.

package auth

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"
)

// Revocations maps revocation keys (see revocationKey) to the instant
// (unix ns) the revocation ends, 0 meaning never. Readers load the current
// map atomically and never block; writers copy it under mu and swap. Its
// keys depend on the credential alone (a jti, a token's signed part, an
// API key's digest), never on the config, so a set outlives the Verifiers
// that use it. Safe for concurrent use; it is written through a
// Verifier's Revoke methods.
type Revocations struct {
	set atomic.Pointer[map[[16]byte]int64] // immutable once stored
	mu  sync.Mutex                         // serialises writers only
}

// NewRevocations returns an empty set, to hand to NewVerifier.
func NewRevocations() *Revocations { return &Revocations{} }

// has reports whether key is revoked at nowNs. Loops call it on every
// Verify, cache hits included.
func (r *Revocations) has(key [16]byte, nowNs int64) bool {
	m := r.set.Load()
	if m == nil {
		return false
	}
	until, ok := (*m)[key]
	return ok && (until == 0 || nowNs < until)
}

// empty reports whether nothing is revoked, so a Verify need not read the
// clock for a second lookup.
func (r *Revocations) empty() bool {
	m := r.set.Load()
	return m == nil || len(*m) == 0
}

// update copies the set without entries that have lapsed, lets edit change
// the copy, and publishes it.
func (r *Revocations) update(nowNs int64, edit func(map[[16]byte]int64)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := map[[16]byte]int64{}
	if old := r.set.Load(); old != nil {
		for k, until := range *old {
			if until == 0 || nowNs < until {
				next[k] = until
			}
		}
	}
	edit(next)
	r.set.Store(&next)
}

// Revoke refuses credential until the given time; the zero time means for
// good. A token's own exp is a natural until. It takes effect on every
// loop's next Verify, cached verifications included. Safe for concurrent
// use; it never blocks a loop.
//
// credential is a JWT, with or without its "Bearer " prefix, or an API key
// (a value without the prefix that is a configured key is always taken as
// the key). A JWT is revoked by its jti claim when it has one, so every
// token carrying that jti is refused; otherwise by its signed header and
// payload, so a copy whose signature is encoded differently is refused too.
// The token's signature is not checked: revoking a forgery only refuses
// that forgery's jti or content.
func (v *Verifier) Revoke(credential string, until time.Time) {
	v.revoke(v.revocationKey([]byte(credential)), until)
}

// RevokeKey refuses an API key for good (until Unrevoke). Safe for
// concurrent use.
func (v *Verifier) RevokeKey(apiKey string) {
	v.revoke(credentialKey([]byte(apiKey)), time.Time{})
}

// RevokeUser refuses every credential whose subject is sub (a JWT's sub,
// an API key's consumer) until the given time; the zero time means for
// good. Like Revoke it takes effect on every loop's next Verify, cached
// verifications included. Safe for concurrent use.
func (v *Verifier) RevokeUser(sub string, until time.Time) {
	v.revoke(subjectKey(sub), until)
}

// UnrevokeUser lifts RevokeUser(sub). Safe for concurrent use.
func (v *Verifier) UnrevokeUser(sub string) {
	key := subjectKey(sub)
	v.revoked.update(v.now().UnixNano(), func(m map[[16]byte]int64) { delete(m, key) })
}

// UserRevocationKey is the key RevokeUser keeps sub under, for a cluster
// to share (engine/admin).
func (v *Verifier) UserRevocationKey(sub string) [16]byte { return subjectKey(sub) }

// Unrevoke lifts a revocation made by Revoke or RevokeKey; credential names
// it as for Revoke. Safe for concurrent use.
func (v *Verifier) Unrevoke(credential string) {
	key := v.revocationKey([]byte(credential))
	v.revoked.update(v.now().UnixNano(), func(m map[[16]byte]int64) { delete(m, key) })
}

// Revocations is the number of revocations in force. Safe for concurrent
// use.
func (v *Verifier) Revocations() int {
	nowNs := v.now().UnixNano()
	m := v.revoked.set.Load()
	if m == nil {
		return 0
	}
	n := 0
	for _, until := range *m {
		if until == 0 || nowNs < until {
			n++
		}
	}
	return n
}

func (v *Verifier) revoke(key [16]byte, until time.Time) {
	nowNs := v.now().UnixNano()
	var untilNs int64 // forever
	if !until.IsZero() {
		if untilNs = until.UnixNano(); untilNs <= nowNs {
			return // already over
		}
	}
	v.revoked.update(nowNs, func(m map[[16]byte]int64) { m[key] = untilNs })
}

// revocationKey is the key credential is revoked under, as Verify will
// compute it: an API key's credentialKey, or a JWT's jwtRevocationKey.
func (v *Verifier) revocationKey(credential []byte) [16]byte {
	token, bearer := splitBearer(credential)
	if !bearer {
		if _, ok := v.apiKeys[sha256.Sum256(token)]; ok {
			return credentialKey(token) // Verify takes it as a key too
		}
	}
	if key, ok := jwtRevocationKey(token); ok {
		return key
	}
	return credentialKey(token) // neither: an unconfigured API key
}

// jwtRevocationKey is the key a three-part token is revoked under: its jti
// claim when it has one, else a digest of its signed part (header and
// payload). Neither depends on the signature bytes, which an attacker can
// re-encode; the low-S rule makes ES256's unique as well, but keying on
// the signed content does not rely on every algorithm being so. ok is false
// when token is not three dot-separated parts.
func jwtRevocationKey(token []byte) (key [16]byte, ok bool) {
	dot1, dot2, ok := splitJWS(token)
	if !ok {
		return key, false
	}
	var jti string
	if claims, err := decodeObject(token[dot1+1 : dot2]); err == nil {
		// A jti that is not a string makes the token invalid at Verify;
		// any key will do for it.
		_ = stringMember(claims, "jti", &jti)
	}
	return revocationKeyOf(jti, token[:dot2]), true
}

// revocationKeyOf keys a verified JWT: by jti when it is not empty, else by
// its signed part. The domain prefixes keep the two, and API keys (a plain
// SHA-256 of the key), from ever naming one another.
func revocationKeyOf(jti string, signed []byte) [16]byte {
	h := sha256.New()
	if jti != "" {
		h.Write([]byte("loopgate jti\x00"))
		h.Write([]byte(jti))
	} else {
		h.Write([]byte("loopgate jws\x00"))
		h.Write(signed)
	}
	var sum [sha256.Size]byte
	return [16]byte(h.Sum(sum[:0])[:16])
}

// subjectKey is the key a user (a subject) is revoked under, in its own
// domain so that it never names a token or an API key.
func subjectKey(sub string) [16]byte {
	h := sha256.New()
	h.Write([]byte("loopgate sub\x00"))
	h.Write([]byte(sub))
	var sum [sha256.Size]byte
	return [16]byte(h.Sum(sum[:0])[:16])
}

// credentialKey is how a credential is named in the cache, and an API key
// in revocations: never the token itself.
func credentialKey(token []byte) [16]byte {
	sum := sha256.Sum256(token)
	return [16]byte(sum[:16])
}

// RevocationKey is the key credential is revoked under: as Revoke names
// it, or as RevokeKey does when apiKey is set. exp is a JWT's exp claim
// when it has one (else zero): a revocation need not outlast it, the token
// being refused as expired from then on. A cluster keeps revocations by
// this key (engine/admin); it never holds the credential.
func (v *Verifier) RevocationKey(credential string, apiKey bool) (key [16]byte, exp time.Time) {
	if apiKey {
		return credentialKey([]byte(credential)), time.Time{}
	}
	key = v.revocationKey([]byte(credential))
	token, _ := splitBearer([]byte(credential))
	if dot1, dot2, ok := splitJWS(token); ok {
		if claims, err := decodeObject(token[dot1+1 : dot2]); err == nil {
			if ns, present, good := numericDate(claims, "exp"); present && good {
				exp = time.Unix(0, satAdd(ns, int64(v.leeway)))
			}
		}
	}
	return key, exp
}

// Replace makes set the revocations in force, dropping every other: a
// cluster's, read whole from Redis. set must not be changed afterwards.
// Loops see it on their next Verify, cached verifications included.
func (r *Revocations) Replace(set map[[16]byte]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.set.Store(&set)
}

// Snapshot is the set in force now, lapsed entries included, as Replace
// takes it: a cluster seeds a Redis that lost its set with it. It must
// not be changed.
func (r *Revocations) Snapshot() map[[16]byte]int64 {
	if m := r.set.Load(); m != nil {
		return *m
	}
	return nil
}
