// Package auth establishes who a request is from: it verifies JWTs and API
// keys (the "auth" filter) or asks an external auth service (the
// "external_auth" filter), and sets filters.Exchange.Identity.
//
// # Building
//
// Both filters register themselves (config.go): auth owns the top-level
// auth section (Global) and a route's auth and roles keys (Route);
// external_auth owns a route's external_auth key and reads its settings
// from auth.external. engine/config decodes those keys into these types,
// Provision applies their defaults and Validate checks them; the engine
// then builds the filters through the registry.
//
// One Verifier serves every route and every loop. The registry's Prepare
// builds it once per compiled config, from the validated auth section and
// the number of event loops and the revocation set that outlives config
// versions (a service the engine provides):
//
//	v, err := auth.NewVerifier(&g.Auth, loops, revoked)    // loads keys; errors name the field
//	f := auth.NewFilter(v, order, route.Roles)             // a route with auth: required
//	x := auth.NewExternal(&g.Auth.External, group, order) // external_auth: true
//
// # Credentials
//
// The credential is the value of the configured header (default
// Authorization). "Bearer <token>", the scheme in any case, is a JWT;
// anything else is an API key, compared in constant time. A request with
// more than one field of that header is refused (400/40001): which one
// counts would be a guess another proxy could make differently.
//
// A JWT must be a three-part compact JWS signed with HS256, RS256 or
// ES256. The header's alg chooses the key, and only among keys of that
// algorithm's kind: the HS256 secret for HS256, the RS256 PEM key or an RSA
// JWKS key for RS256, the ES256 PEM key or an EC P-256 JWKS key for ES256.
// alg "none", a missing alg and a "crit" header are refused, and an HS256
// token is never checked against a public key. With a kid that the JWKS
// holds, that key is used (and must suit the alg); otherwise the PEM key.
// ES256 signatures are raw R||S (64 bytes), as JWS requires, and must be
// low-S (s <= n/2): ECDSA's (r, n-s) twin of a valid signature also
// verifies, and taking one form makes a token's signature unique. Issuers
// whose signer picks either form must normalise it.
//
// Claims: exp and nbf are optional, but when present the token must be
// within them, give or take the configured leeway; iss must equal the
// configured issuer and aud (a string or an array) must contain the
// configured audience when those are set. The identity takes its subject
// from sub, its tenant from the tenant claim and its roles from the roles
// claim (an array of strings, or one string separated by spaces or commas).
// Since the identity goes upstream in headers, a subject, tenant or role
// holding a control character, or a role holding a comma, makes the token
// invalid.
//
// Failures map to the error codes of the design: 401/40101 missing
// credentials, 401/40102 invalid, expired or revoked, 403/40301 a role the
// route does not admit. The auth filter adds a WWW-Authenticate challenge
// to 401s (Rejection.AddHeader).
//
// # Identity headers
//
// An admitted request gets the verified identity on its upstream request,
// in the headers IdentityHeaders names (default X-User-Id,
// X-User-Tenant, X-User-Roles, X-Auth-Kind): subject, tenant, roles joined
// with "," and the credential kind ("jwt" or "api_key"). Each is set,
// replacing the client's fields, or removed when the value is empty. The
// values are built once per verified credential, so this allocates
// nothing.
//
// # Cache
//
// Verified JWTs are cached per loop, without locks, keyed by the first 16
// bytes of SHA-256(token): the token itself is never a key and never
// logged. An entry keeps the token's revocation key, checked on every hit. An entry lives until min(verification + cache_ttl, exp +
// leeway). Each loop keeps at most cache_size entries and evicts the oldest
// insertion first (FIFO). A hit costs one SHA-256 of the token, a
// revocation check and a map lookup, and allocates nothing; so does an API
// key, which needs no cache. A miss decodes JSON and allocates.
//
// # Revocation
//
// Revoke, RevokeKey and Unrevoke (for the admin API) publish a new
// immutable set of revocation keys with an atomic swap. Every Verify
// checks it, cache hits included, so a revocation takes effect on the next
// request on every loop; loops never wait on a lock. A JWT is revoked by
// its jti claim when it has one, else by a digest of its signed part
// (header and payload): never by its signature bytes, which a client could
// re-encode. An API key is revoked by its SHA-256. None of these keys
// depends on the config, so the set (Revocations) is owned outside the
// Verifier: a reload builds a new Verifier on the same set, and every
// revocation stays in force.
//
// # External auth
//
// The external_auth filter suspends the chain while it sends GET <path> to
// the auth service's upstream group through Exchange.Sub, forwarding the
// configured request headers plus X-Forwarded-Method, -Uri, -Host and -For.
// A 2xx admits the request: the service's identity headers (copy_headers)
// are set on the upstream request, and those it did not send are removed so
// a client cannot forge them. A 401 stays 401, a 5xx, no answer or a
// timeout is 503 (or a pass with fail_open, still without the client's
// copy_headers), and anything else is 403. The timeout is the whole
// sub-request's deadline. See NewExternal.
package auth
