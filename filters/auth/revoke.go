// Revocation: a copy-on-write set of credential hashes, written by the
// admin API and read lock-free by every loop.

package auth

import (
	"crypto/sha256"
	"sync"
	"sync/atomic"
	"time"
)

// revocations maps the first 16 bytes of SHA-256(token) to the instant
// (unix ns) the revocation ends, 0 meaning never. Readers load the current
// map atomically and never block; writers copy it under mu and swap.
type revocations struct {
	set atomic.Pointer[map[[16]byte]int64] // immutable once stored
	mu  sync.Mutex                         // serialises writers only
}

// has reports whether key is revoked at nowNs. Loops call it on every
// Verify, cache hits included.
func (r *revocations) has(key [16]byte, nowNs int64) bool {
	m := r.set.Load()
	if m == nil {
		return false
	}
	until, ok := (*m)[key]
	return ok && (until == 0 || nowNs < until)
}

// update copies the set without entries that have lapsed, lets edit change
// the copy, and publishes it.
func (r *revocations) update(nowNs int64, edit func(map[[16]byte]int64)) {
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

// Revoke refuses credential (a JWT, with or without its "Bearer " prefix,
// or an API key) until the given time; the zero time means for good. A
// token's own exp is a natural until. It takes effect on every loop's next
// Verify, cached verifications included. Safe for concurrent use; it never
// blocks a loop.
func (v *Verifier) Revoke(credential string, until time.Time) {
	token, _ := splitBearer([]byte(credential))
	v.revoke(token, until)
}

// RevokeKey refuses an API key for good (until Unrevoke). Safe for
// concurrent use.
func (v *Verifier) RevokeKey(apiKey string) {
	v.revoke([]byte(apiKey), time.Time{})
}

// Unrevoke lifts a revocation made by Revoke or RevokeKey. Safe for
// concurrent use.
func (v *Verifier) Unrevoke(credential string) {
	token, _ := splitBearer([]byte(credential))
	key := credentialKey(token)
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

func (v *Verifier) revoke(token []byte, until time.Time) {
	nowNs := v.now().UnixNano()
	var untilNs int64 // forever
	if !until.IsZero() {
		if untilNs = until.UnixNano(); untilNs <= nowNs {
			return // already over
		}
	}
	key := credentialKey(token)
	v.revoked.update(nowNs, func(m map[[16]byte]int64) { m[key] = untilNs })
}

// credentialKey is how a credential is named in caches and revocations:
// never the token itself.
func credentialKey(token []byte) [16]byte {
	sum := sha256.Sum256(token)
	return [16]byte(sum[:16])
}
