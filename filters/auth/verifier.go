// Verifier: credential checks (JWT or API key) with a per-loop cache, and
// the Failure answers they produce.

package auth

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"slices"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
)

// Failure is why a credential was refused, as the HTTP status and JSON
// error code to answer with. The predefined values are shared; never
// modify one.
type Failure struct {
	Status  int
	Code    int
	Message string
}

func (f *Failure) Error() string { return fmt.Sprintf("auth: %d %d %s", f.Status, f.Code, f.Message) }

// The failures Verify and the filters return.
var (
	FailMissing     = &Failure{401, 40101, "missing credentials"}
	FailInvalid     = &Failure{401, 40102, "invalid credentials"}
	FailExpired     = &Failure{401, 40102, "token expired"}
	FailNotYetValid = &Failure{401, 40102, "token not yet valid"}
	FailRevoked     = &Failure{401, 40102, "credentials revoked"}
	FailForbidden   = &Failure{403, 40301, "forbidden role"}
)

// Verifier checks credentials against the configured keys and API keys.
// Its keys and settings are immutable after NewVerifier; its caches are
// per loop and its revocation set is swapped atomically, so Verify is safe
// for concurrent use by every loop and Revoke by any goroutine.
type Verifier struct {
	header      string // request header holding the credential
	keys        *keySet
	apiKeys     map[[32]byte]*apiKey // by SHA-256 of the key
	issuer      string
	audience    string
	rolesClaim  string
	tenantClaim string
	leeway      time.Duration
	cacheTTL    int64 // ns; 0 = no cache

	caches []*cache // one per loop, each touched only by its loop

	revoked revocations

	// now is the clock; tests replace it before the Verifier is used.
	now func() time.Time
}

// apiKey is one configured key and the identity it stands for.
type apiKey struct {
	key []byte
	id  filters.Identity // shared by every request: read-only
}

// NewVerifier loads and checks cfg's keys and sizes one verification cache
// per event loop. cfg must already be defaulted by config.Parse. Errors
// name the config field at fault.
func NewVerifier(cfg *config.Auth, loops int) (*Verifier, error) {
	if loops < 1 {
		return nil, fmt.Errorf("auth: %d loops, at least 1 required", loops)
	}
	keys, err := loadKeys(&cfg.JWT)
	if err != nil {
		return nil, err
	}
	v := &Verifier{
		header:      cfg.Header,
		keys:        keys,
		apiKeys:     make(map[[32]byte]*apiKey, len(cfg.APIKeys)),
		issuer:      cfg.JWT.Issuer,
		audience:    cfg.JWT.Audience,
		rolesClaim:  cfg.JWT.RolesClaim,
		tenantClaim: cfg.JWT.TenantClaim,
		leeway:      time.Duration(cfg.JWT.Leeway),
		now:         time.Now,
	}
	if v.header == "" {
		return nil, fmt.Errorf("auth.header: empty")
	}
	for i, k := range cfg.APIKeys {
		if k.Key == "" {
			return nil, fmt.Errorf("auth.api_keys[%d].key: empty", i)
		}
		sum := sha256.Sum256([]byte(k.Key))
		if _, dup := v.apiKeys[sum]; dup {
			return nil, fmt.Errorf("auth.api_keys[%d].key: same key as an earlier entry", i)
		}
		a := &apiKey{key: []byte(k.Key), id: filters.Identity{Authenticated: true, Roles: slices.Clone(k.Roles)}}
		if k.Consumer != "" {
			a.id.Subject = []byte(k.Consumer)
		}
		if k.Tenant != "" {
			a.id.Tenant = []byte(k.Tenant)
		}
		v.apiKeys[sum] = a
	}
	if ttl := time.Duration(cfg.CacheTTL); ttl > 0 && cfg.CacheSize > 0 {
		v.cacheTTL = int64(ttl)
		v.caches = make([]*cache, loops)
		for i := range v.caches {
			v.caches[i] = newCache(cfg.CacheSize)
		}
	}
	return v, nil
}

// Header is the request header credentials are read from.
func (v *Verifier) Header() string { return v.header }

// Verify checks credential, the auth header's value: "Bearer <jwt>" (the
// scheme in any case) is a JWT, anything else is an API key. It runs on
// x's loop and uses that loop's cache; a warm cache hit costs one SHA-256
// of the token and two map lookups, and does not allocate. The returned
// identity's slices are shared and must not be modified.
func (v *Verifier) Verify(x *filters.Exchange, credential []byte) (filters.Identity, *Failure) {
	token, bearer := splitBearer(credential)
	if len(token) == 0 {
		return filters.Identity{}, FailMissing
	}
	sum := sha256.Sum256(token)
	key := [16]byte(sum[:16])
	now := v.now()
	nowNs := now.UnixNano()
	if v.revoked.has(key, nowNs) {
		return filters.Identity{}, FailRevoked
	}
	if !bearer {
		return v.verifyAPIKey(&sum, token)
	}

	var c *cache
	if x.Loop >= 0 && x.Loop < len(v.caches) {
		c = v.caches[x.Loop]
		if e, ok := c.entries[key]; ok && nowNs < e.expires {
			return e.id, nil
		}
	}
	id, validUntil, fail := v.verifyJWT(token, now)
	if fail != nil {
		return filters.Identity{}, fail
	}
	if c != nil {
		c.put(key, cacheEntry{id: id, expires: min(validUntil, nowNs+v.cacheTTL)})
	}
	return id, nil
}

// verifyAPIKey finds a configured key by its SHA-256, then compares the
// key itself in constant time.
func (v *Verifier) verifyAPIKey(sum *[32]byte, token []byte) (filters.Identity, *Failure) {
	a, ok := v.apiKeys[*sum]
	if !ok || subtle.ConstantTimeCompare(a.key, token) != 1 {
		return filters.Identity{}, FailInvalid
	}
	return a.id, nil
}

// splitBearer returns the token of a "Bearer <token>" value and true, or
// the whole value and false.
func splitBearer(cred []byte) ([]byte, bool) {
	const scheme = "bearer"
	if len(cred) < len(scheme) || !codec.EqualFold(cred[:len(scheme)], scheme) {
		return cred, false
	}
	rest := cred[len(scheme):]
	if len(rest) == 0 {
		return nil, true // "Bearer" alone: no token
	}
	if rest[0] != ' ' {
		return cred, false // a key that merely starts with "bearer"
	}
	return bytes.TrimLeft(rest, " "), true
}
