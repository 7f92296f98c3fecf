// Verifier: credential checks (JWT or API key) with a per-loop cache, and
// the Failure answers they produce.

package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/loopgate/loopgate/codec"
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
	header      string   // request header holding the credential
	duplicate   *Failure // 400/40001: more than one field of header
	identity    identityHeaders
	keys        *keySet
	apiKeys     map[[32]byte]*apiKey // by SHA-256 of the key
	issuer      string
	audience    string
	rolesClaim  string
	tenantClaim string
	leeway      time.Duration
	cacheTTL    int64 // ns; 0 = no cache

	caches []*cache // one per loop, each touched only by its loop

	revoked *Revocations // shared with the Verifiers of other config versions

	// now is the wall clock (token times, revocations), mono the
	// monotonic one the cache's entries expire on (Exchange.Now); tests
	// replace both before the Verifier is used.
	now  func() time.Time
	mono func(*filters.Exchange) int64
}

// apiKey is one configured key and the identity it stands for.
type apiKey struct {
	key []byte
	v   *verified // shared by every request: read-only
}

// verified is what a credential proved: the identity, and the identity
// header values the auth filter sends upstream for it, built once so a
// request does not allocate them. One is shared by every request that
// presents the same API key or hits the same cache entry: read-only.
type verified struct {
	id    filters.Identity
	roles []byte // id.Roles joined with ","; nil when there are none
	kind  []byte // id.Kind
	// user is the subject's revocation key (subjectKey), hasUser whether
	// there is a subject: a revoked user's every credential is refused.
	user    [16]byte
	hasUser bool
	// edits are the identity header edits for this credential
	// (identityHeaders.edits), queued whole on every request it admits.
	edits filters.EditSet
}

// The kinds as header values. Read-only.
var (
	kindJWT    = []byte(filters.KindJWT)
	kindAPIKey = []byte(filters.KindAPIKey)
)

// newVerified builds the identity of a credential of kind (KindJWT or
// KindAPIKey), with the identity header edits v's requests get for it.
// Values that could not travel faithfully in a header are refused: a
// control character could end the field or split the head, and a comma
// inside a role would read as two roles in the comma-separated roles
// header.
func (v *Verifier) newVerified(kind, sub, tenant string, roles []string) (*verified, error) {
	if !fieldSafe(sub) || !fieldSafe(tenant) {
		return nil, errors.New("subject or tenant holds a control character")
	}
	vd := &verified{id: filters.Identity{Authenticated: true, Roles: roles, Kind: kind}, kind: kindJWT}
	if kind == filters.KindAPIKey {
		vd.kind = kindAPIKey
	}
	if sub != "" {
		vd.id.Subject = []byte(sub)
		vd.user, vd.hasUser = subjectKey(sub), true
	}
	if tenant != "" {
		vd.id.Tenant = []byte(tenant)
	}
	for _, r := range roles {
		if !fieldSafe(r) || strings.IndexByte(r, ',') >= 0 {
			return nil, fmt.Errorf("role %q holds a comma or a control character", r)
		}
		if r == "" {
			continue
		}
		if len(vd.roles) > 0 {
			vd.roles = append(vd.roles, ',')
		}
		vd.roles = append(vd.roles, r...)
	}
	v.identity.build(&vd.edits, vd)
	return vd, nil
}

// fieldSafe reports whether s can be a header field value as it is: no
// control characters (HTAB included, since receivers trim it at the ends).
func fieldSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

// identityHeaders are the upstream request headers the auth filter sets
// for an admitted request (IdentityHeaders); "" leaves one out.
type identityHeaders struct {
	subject, tenant, roles, kind string
}

// build puts into set, once per verified credential, the edits of every
// enabled header: vd's value, replacing the client's fields, or a removal
// when vd has no value for it. The values are vd's own bytes.
func (h *identityHeaders) build(set *filters.EditSet, vd *verified) {
	setOrRemove(set, h.subject, vd.id.Subject)
	setOrRemove(set, h.tenant, vd.id.Tenant)
	setOrRemove(set, h.roles, vd.roles)
	setOrRemove(set, h.kind, vd.kind)
}

func setOrRemove(set *filters.EditSet, name string, value []byte) {
	switch {
	case name == "":
	case len(value) == 0:
		set.Remove(name) // an empty claim: no client value may stand in for it
	default:
		set.Set(name, value)
	}
}

// NewVerifier loads and checks cfg's keys and sizes one verification cache
// per event loop. cfg must be provisioned and validated (Global), as
// engine/config does. Errors name the config field at fault. Revocations
// go to revoked, which outlives the Verifier (the engine keeps one set
// across reloads); nil gives the Verifier a set of its own.
func NewVerifier(cfg *Config, loops int, revoked *Revocations) (*Verifier, error) {
	if loops < 1 {
		return nil, fmt.Errorf("auth: %d loops, at least 1 required", loops)
	}
	keys, err := loadKeys(&cfg.JWT)
	if err != nil {
		return nil, err
	}
	ih := &cfg.IdentityHeaders
	v := &Verifier{
		header:      cfg.Header,
		duplicate:   &Failure{400, 40001, "more than one " + cfg.Header + " header"},
		identity:    identityHeaders{deref(ih.Subject), deref(ih.Tenant), deref(ih.Roles), deref(ih.Kind)},
		keys:        keys,
		apiKeys:     make(map[[32]byte]*apiKey, len(cfg.APIKeys)),
		issuer:      cfg.JWT.Issuer,
		audience:    cfg.JWT.Audience,
		rolesClaim:  cfg.JWT.RolesClaim,
		tenantClaim: cfg.JWT.TenantClaim,
		leeway:      time.Duration(cfg.JWT.Leeway),
		revoked:     revoked,
		now:         time.Now,
		mono:        (*filters.Exchange).Now,
	}
	if v.revoked == nil {
		v.revoked = NewRevocations()
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
		vd, err := v.newVerified(filters.KindAPIKey, k.Consumer, k.Tenant, slices.Clone(k.Roles))
		if err != nil {
			return nil, fmt.Errorf("auth.api_keys[%d]: %w", i, err)
		}
		v.apiKeys[sum] = &apiKey{key: []byte(k.Key), v: vd}
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
// of the token and a map lookup, reads no clock (the entry expires on
// x.Now, the reading that began the filter's phase) and does not
// allocate; a revocation check reads the wall clock while any revocation
// is in force. The returned
// identity's slices are shared and must not be modified.
func (v *Verifier) Verify(x *filters.Exchange, credential []byte) (filters.Identity, *Failure) {
	vd, fail := v.check(x, credential)
	if fail != nil {
		return filters.Identity{}, fail
	}
	return vd.id, nil
}

// check is Verify, returning the shared verified record. A credential
// whose subject is revoked (RevokeUser) is refused like a revoked one.
//
// A JWT's cache key is SHA-256(token), but its revocation key is its jti
// or signed content (jwtRevocationKey), kept in the cache entry: every
// encoding of a revoked token is refused, from the cache or not. A token
// is cached even while revoked, so presenting it again costs a lookup, not
// a signature check; the revocation is checked on every hit.
func (v *Verifier) check(x *filters.Exchange, credential []byte) (*verified, *Failure) {
	vd, fail := v.checkCredential(x, credential)
	if fail == nil && vd.hasUser && !v.revoked.empty() && v.revokedNow(&vd.user) {
		return nil, FailRevoked // the user is revoked, whatever the credential
	}
	return vd, fail
}

// checkCredential is check but for the user's revocation.
func (v *Verifier) checkCredential(x *filters.Exchange, credential []byte) (*verified, *Failure) {
	token, bearer := splitBearer(credential)
	if len(token) == 0 {
		return nil, FailMissing
	}
	sum := sha256.Sum256(token)
	key := [16]byte(sum[:16])
	if !bearer {
		if !v.revoked.empty() && v.revokedNow(&key) {
			return nil, FailRevoked
		}
		return v.verifyAPIKey(&sum, token)
	}

	var c *cache
	var mono int64
	if x.Loop >= 0 && x.Loop < len(v.caches) {
		c = v.caches[x.Loop]
		mono = v.mono(x)
		if e, ok := c.entries[key]; ok && mono < e.expires {
			if !v.revoked.empty() && v.revokedNow(&e.revoke) {
				return nil, FailRevoked
			}
			return e.v, nil
		}
	}
	now := v.now()
	nowNs := now.UnixNano()
	vd, validUntil, revoke, fail := v.verifyJWT(token, now)
	if fail != nil {
		return nil, fail
	}
	if c != nil {
		// The token's end is on the wall clock, the entry's on the
		// monotonic one: what is left of the token's life, at most the TTL.
		c.put(key, cacheEntry{v: vd, revoke: revoke, expires: mono + min(validUntil-nowNs, v.cacheTTL)})
	}
	if v.revoked.has(revoke, nowNs) {
		return nil, FailRevoked
	}
	return vd, nil
}

// revokedNow reports whether key is revoked now, on the wall clock.
// Callers ask it only while some revocation is in force (the set is not
// empty), so a request reads no clock for it otherwise.
func (v *Verifier) revokedNow(key *[16]byte) bool {
	return v.revoked.has(*key, v.now().UnixNano())
}

// verifyAPIKey finds a configured key by its SHA-256, then compares the
// key itself in constant time.
func (v *Verifier) verifyAPIKey(sum *[32]byte, token []byte) (*verified, *Failure) {
	a, ok := v.apiKeys[*sum]
	if !ok || subtle.ConstantTimeCompare(a.key, token) != 1 {
		return nil, FailInvalid
	}
	return a.v, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
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
	for len(rest) > 0 && rest[0] == ' ' { // bytes.TrimLeft would build its cutset on every call
		rest = rest[1:]
	}
	return rest, true
}
