// Tests of Verifier: algorithms, keys, claims, API keys.

package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/pool/units"
)

func TestHS256Valid(t *testing.T) {
	v, _ := newVerifier(t, baseConfig(), 1)
	tok := hsToken(t, m{"sub": "alice", "tenant": "acme", "roles": []string{"admin", "ops"}, "exp": t0.Unix() + 60})
	id, fail := verify(t, v, "Bearer "+tok)
	if fail != nil {
		t.Fatalf("valid token refused: %v", fail)
	}
	if !id.Authenticated || string(id.Subject) != "alice" || string(id.Tenant) != "acme" || !slices.Equal(id.Roles, []string{"admin", "ops"}) {
		t.Fatalf("identity = %+v", id)
	}
	// The scheme is case-insensitive.
	if _, fail := verify(t, v, "bEaReR "+tok); fail != nil {
		t.Fatalf("lower-case scheme refused: %v", fail)
	}
}

func TestRS256Valid(t *testing.T) {
	k := rsaKeys()[0]
	pkcs1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.PublicKey)}))
	cases := map[string]func(*JWT){
		"pkix inline":  func(j *JWT) { j.RS256PublicKey = pkixPEM(t, &k.PublicKey) },
		"pkcs1 inline": func(j *JWT) { j.RS256PublicKey = pkcs1 },
		"pkix file":    func(j *JWT) { j.RS256PublicKeyFile = writeFile(t, "rsa.pem", pkixPEM(t, &k.PublicKey)) },
	}
	tok := makeToken(t, m{"alg": "RS256"}, m{"sub": "bob", "exp": t0.Unix() + 60}, rs256(k))
	for name, set := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := baseConfig()
			cfg.JWT.HS256Secret = ""
			set(&cfg.JWT)
			v, _ := newVerifier(t, cfg, 1)
			id, fail := verify(t, v, "Bearer "+tok)
			if fail != nil || string(id.Subject) != "bob" {
				t.Fatalf("got %+v, %v", id, fail)
			}
		})
	}
}

func TestES256Valid(t *testing.T) {
	k := ecKey(t)
	cfg := baseConfig()
	cfg.JWT.ES256PublicKeyFile = writeFile(t, "ec.pem", pkixPEM(t, &k.PublicKey))
	v, _ := newVerifier(t, cfg, 1)
	tok := makeToken(t, m{"alg": "ES256"}, m{"sub": "carol"}, es256(k))
	if id, fail := verify(t, v, "Bearer "+tok); fail != nil || string(id.Subject) != "carol" {
		t.Fatalf("got %+v, %v", id, fail)
	}

	// An ASN.1 DER signature is not JWS ES256, even though it is valid.
	asn1 := makeToken(t, m{"alg": "ES256"}, m{"sub": "carol"}, func(signed []byte) []byte {
		d := sha256.Sum256(signed)
		sig, err := ecdsa.SignASN1(rand.Reader, k, d[:])
		if err != nil {
			t.Fatal(err)
		}
		return sig
	})
	if _, fail := verify(t, v, "Bearer "+asn1); fail != FailInvalid {
		t.Fatalf("ASN.1 signature: %v, want invalid", fail)
	}
}

func TestSignatureMismatch(t *testing.T) {
	rk := rsaKeys()
	ek := ecKey(t)
	cfg := baseConfig()
	cfg.JWT.RS256PublicKey = pkixPEM(t, &rk[0].PublicKey)
	cfg.JWT.ES256PublicKey = pkixPEM(t, &ek.PublicKey)
	v, _ := newVerifier(t, cfg, 1)

	good := hsToken(t, m{"sub": "alice"})
	parts := strings.Split(good, ".")
	tampered := parts[0] + "." + encodePart(t, m{"sub": "mallory"}) + "." + parts[2]

	bad := map[string]string{
		"hs256 other secret": makeToken(t, m{"alg": "HS256"}, m{"sub": "x"}, hs256([]byte(strings.Repeat("z", 32)))),
		"rs256 other key":    makeToken(t, m{"alg": "RS256"}, m{"sub": "x"}, rs256(rk[1])),
		"es256 other key":    makeToken(t, m{"alg": "ES256"}, m{"sub": "x"}, es256(ecKey(t))),
		"tampered payload":   tampered,
		"empty signature":    parts[0] + "." + parts[1] + ".",
		"two parts":          parts[0] + "." + parts[1],
		"four parts":         good + ".x",
		"padded base64":      parts[0] + "=." + parts[1] + "." + parts[2],
		"not json":           base64.RawURLEncoding.EncodeToString([]byte("{alg")) + "." + parts[1] + "." + parts[2],
		"not a jwt":          "hello",
	}
	for name, tok := range bad {
		if _, fail := verify(t, v, "Bearer "+tok); fail != FailInvalid {
			t.Errorf("%s: %v, want invalid", name, fail)
		}
	}
	if _, fail := verify(t, v, "Bearer "+good); fail != nil {
		t.Fatalf("control token refused: %v", fail)
	}
}

func TestAlgRefused(t *testing.T) {
	v, _ := newVerifier(t, baseConfig(), 1)
	sign := hs256([]byte(testSecret))
	headers := map[string]m{
		"none":          {"alg": "none"},
		"None":          {"alg": "None"},
		"missing":       {"typ": "JWT"},
		"HS512":         {"alg": "HS512"},
		"not a string":  {"alg": 256},
		"crit":          {"alg": "HS256", "crit": []string{"exp"}},
		"upper-case":    {"ALG": "HS256"},
		"alg, then ALG": {"alg": "HS256x", "ALG": "HS256"},
	}
	for name, h := range headers {
		tok := makeToken(t, h, m{"sub": "x"}, sign)
		if _, fail := verify(t, v, "Bearer "+tok); fail != FailInvalid {
			t.Errorf("%s: %v, want invalid", name, fail)
		}
	}
	// alg none with an empty signature, the classic form.
	tok := encodePart(t, m{"alg": "none"}) + "." + encodePart(t, m{"sub": "x"}) + "."
	if _, fail := verify(t, v, "Bearer "+tok); fail != FailInvalid {
		t.Errorf("unsigned token: %v, want invalid", fail)
	}
}

// An HS256 token whose HMAC key is the RSA public key's PEM text must not
// verify: HS256 uses only the HS256 secret.
func TestAlgConfusion(t *testing.T) {
	k := rsaKeys()[0]
	pemText := pkixPEM(t, &k.PublicKey)
	forged := makeToken(t, m{"alg": "HS256"}, m{"sub": "admin"}, hs256([]byte(pemText)))

	for _, secret := range []string{"", testSecret} {
		cfg := baseConfig()
		cfg.JWT.HS256Secret = secret
		cfg.JWT.RS256PublicKey = pemText
		v, _ := newVerifier(t, cfg, 1)
		if _, fail := verify(t, v, "Bearer "+forged); fail != FailInvalid {
			t.Errorf("secret %q: forged token %v, want invalid", secret, fail)
		}
	}

	// Nor may an RS256 token be checked with an EC key from the JWKS.
	ek := ecKey(t)
	cfg := baseConfig()
	cfg.JWT.JWKSFile = writeFile(t, "jwks.json", jwksJSON(t, map[string]any{"ec1": &ek.PublicKey}))
	cfg.JWT.RS256PublicKey = pemText
	v, _ := newVerifier(t, cfg, 1)
	tok := makeToken(t, m{"alg": "RS256", "kid": "ec1"}, m{"sub": "x"}, rs256(k))
	if _, fail := verify(t, v, "Bearer "+tok); fail != FailInvalid {
		t.Errorf("RS256 token with an EC kid: %v, want invalid", fail)
	}
}

func TestTimeClaims(t *testing.T) {
	cfg := baseConfig()
	v, _ := newVerifier(t, cfg, 1)
	lenient := baseConfig()
	lenient.JWT.Leeway = units.Duration(10 * time.Second)
	lv, _ := newVerifier(t, lenient, 1)

	now := t0.Unix()
	cases := []struct {
		name        string
		claims      m
		strict, lax *Failure // without and with 10s leeway
	}{
		{"no exp", m{}, nil, nil},
		{"exp ahead", m{"exp": now + 1}, nil, nil},
		{"exp now", m{"exp": now}, FailExpired, nil},
		{"exp 5s ago", m{"exp": now - 5}, FailExpired, nil},
		{"exp 11s ago", m{"exp": now - 11}, FailExpired, FailExpired},
		{"exp fractional", m{"exp": float64(now) + 0.5}, nil, nil},
		{"exp string", m{"exp": "tomorrow"}, FailInvalid, FailInvalid},
		{"nbf now", m{"nbf": now}, nil, nil},
		{"nbf 5s ahead", m{"nbf": now + 5}, FailNotYetValid, nil},
		{"nbf 11s ahead", m{"nbf": now + 11}, FailNotYetValid, FailNotYetValid},
		{"exp far future", m{"exp": 1e300}, nil, nil},
	}
	for _, c := range cases {
		tok := "Bearer " + hsToken(t, c.claims)
		if _, fail := verify(t, v, tok); fail != c.strict {
			t.Errorf("%s: %v, want %v", c.name, fail, c.strict)
		}
		if _, fail := verify(t, lv, tok); fail != c.lax {
			t.Errorf("%s with leeway: %v, want %v", c.name, fail, c.lax)
		}
	}
}

func TestIssuerAudience(t *testing.T) {
	cfg := baseConfig()
	cfg.JWT.Issuer = "https://idp.example"
	cfg.JWT.Audience = "orders"
	v, _ := newVerifier(t, cfg, 1)
	iss := "https://idp.example"
	cases := []struct {
		name   string
		claims m
		ok     bool
	}{
		{"both right", m{"iss": iss, "aud": "orders"}, true},
		{"aud array", m{"iss": iss, "aud": []string{"billing", "orders"}}, true},
		{"aud array without", m{"iss": iss, "aud": []string{"billing"}}, false},
		{"wrong aud", m{"iss": iss, "aud": "billing"}, false},
		{"no aud", m{"iss": iss}, false},
		{"aud number", m{"iss": iss, "aud": 7}, false},
		{"wrong iss", m{"iss": "https://evil.example", "aud": "orders"}, false},
		{"no iss", m{"aud": "orders"}, false},
	}
	for _, c := range cases {
		_, fail := verify(t, v, "Bearer "+hsToken(t, c.claims))
		if (fail == nil) != c.ok {
			t.Errorf("%s: %v, want ok=%v", c.name, fail, c.ok)
		}
		if fail != nil && fail != FailInvalid {
			t.Errorf("%s: %v, want invalid", c.name, fail)
		}
	}
}

func TestClaimShapes(t *testing.T) {
	cfg := baseConfig()
	cfg.JWT.RolesClaim = "scope"
	cfg.JWT.TenantClaim = "org"
	v, _ := newVerifier(t, cfg, 1)

	id, fail := verify(t, v, "Bearer "+hsToken(t, m{"sub": "a", "org": "acme", "scope": "read write,admin"}))
	if fail != nil || !slices.Equal(id.Roles, []string{"read", "write", "admin"}) || string(id.Tenant) != "acme" {
		t.Fatalf("got %+v, %v", id, fail)
	}
	for name, claims := range map[string]m{
		"sub number":    {"sub": 7},
		"tenant object": {"org": m{"id": 1}},
		"roles number":  {"scope": 5},
		"roles mixed":   {"scope": []any{"a", 1}},
	} {
		if _, fail := verify(t, v, "Bearer "+hsToken(t, claims)); fail != FailInvalid {
			t.Errorf("%s: %v, want invalid", name, fail)
		}
	}
}

// jwksJSON writes a key set; keys map kid to *rsa.PublicKey or
// *ecdsa.PublicKey.
func jwksJSON(t testing.TB, keys map[string]any) string {
	enc := base64.RawURLEncoding.EncodeToString
	var parts []string
	for kid, k := range keys {
		switch k := k.(type) {
		case *ecdsa.PublicKey:
			b, err := k.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			parts = append(parts, fmt.Sprintf(`{"kty":"EC","crv":"P-256","kid":%q,"x":%q,"y":%q}`, kid, enc(b[1:33]), enc(b[33:])))
		case *rsa.PublicKey:
			parts = append(parts, fmt.Sprintf(`{"kty":"RSA","kid":%q,"alg":"RS256","use":"sig","n":%q,"e":"AQAB"}`, kid, enc(k.N.Bytes())))
		default:
			t.Fatalf("jwksJSON: %T", k)
		}
	}
	return `{"keys":[` + strings.Join(parts, ",") + `]}`
}

func TestJWKS(t *testing.T) {
	rk := rsaKeys()
	ek := ecKey(t)
	cfg := baseConfig()
	cfg.JWT.JWKSFile = writeFile(t, "jwks.json", jwksJSON(t, map[string]any{
		"r1": &rk[0].PublicKey, "r2": &rk[1].PublicKey, "e1": &ek.PublicKey,
	}))
	v, _ := newVerifier(t, cfg, 1)

	ok := map[string]string{
		"r1": makeToken(t, m{"alg": "RS256", "kid": "r1"}, m{"sub": "1"}, rs256(rk[0])),
		"r2": makeToken(t, m{"alg": "RS256", "kid": "r2"}, m{"sub": "2"}, rs256(rk[1])),
		"e1": makeToken(t, m{"alg": "ES256", "kid": "e1"}, m{"sub": "3"}, es256(ek)),
	}
	for kid, tok := range ok {
		if _, fail := verify(t, v, "Bearer "+tok); fail != nil {
			t.Errorf("kid %s: %v", kid, fail)
		}
	}
	bad := map[string]string{
		"wrong kid":   makeToken(t, m{"alg": "RS256", "kid": "r2"}, m{"sub": "1"}, rs256(rk[0])),
		"unknown kid": makeToken(t, m{"alg": "RS256", "kid": "r9"}, m{"sub": "1"}, rs256(rk[0])),
		"no kid":      makeToken(t, m{"alg": "RS256"}, m{"sub": "1"}, rs256(rk[0])),
		"ES256 on r1": makeToken(t, m{"alg": "ES256", "kid": "r1"}, m{"sub": "1"}, es256(ek)),
	}
	for name, tok := range bad {
		if _, fail := verify(t, v, "Bearer "+tok); fail != FailInvalid {
			t.Errorf("%s: %v, want invalid", name, fail)
		}
	}
}

func TestNewVerifierErrors(t *testing.T) {
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rsaPEM := pkixPEM(t, &rsaKeys()[0].PublicKey)
	cases := []struct {
		field string
		set   func(*Config)
	}{
		{"auth.jwt.rs256_public_key_file", func(c *Config) { c.JWT.RS256PublicKeyFile = "/nonexistent/key.pem" }},
		{"auth.jwt.rs256_public_key", func(c *Config) { c.JWT.RS256PublicKey = "not pem" }},
		{"auth.jwt.rs256_public_key", func(c *Config) { c.JWT.RS256PublicKey = pkixPEM(t, &p384.PublicKey) }},
		{"set one, not both", func(c *Config) { c.JWT.RS256PublicKey, c.JWT.RS256PublicKeyFile = rsaPEM, "/x" }},
		{"auth.jwt.es256_public_key", func(c *Config) { c.JWT.ES256PublicKey = pkixPEM(t, &p384.PublicKey) }},
		{"auth.jwt.es256_public_key", func(c *Config) { c.JWT.ES256PublicKey = rsaPEM }},
		{"auth.jwt.jwks_file", func(c *Config) { c.JWT.JWKSFile = writeFile(t, "j.json", `{"keys":[`) }},
		{"appears twice", func(c *Config) {
			c.JWT.JWKSFile = writeFile(t, "j.json", `{"keys":[{"kty":"RSA","kid":"a","n":"AQAB","e":"AQAB"},{"kty":"RSA","kid":"a","n":"AQAB","e":"AQAB"}]}`)
		}},
		{"bad coordinates", func(c *Config) {
			c.JWT.JWKSFile = writeFile(t, "j.json", `{"keys":[{"kty":"EC","crv":"P-256","kid":"a","x":"AQAB","y":"AQAB"}]}`)
		}},
		{"auth.api_keys[1].key", func(c *Config) { c.APIKeys = []APIKey{{Key: "k"}, {Key: ""}} }},
		{"auth.api_keys[1].key", func(c *Config) { c.APIKeys = []APIKey{{Key: "k"}, {Key: "k"}} }},
	}
	for _, c := range cases {
		cfg := baseConfig()
		c.set(cfg)
		_, err := NewVerifier(cfg, 1, nil)
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Errorf("want an error naming %q, got %v", c.field, err)
		}
	}
	// Unusable JWKS keys (encryption, other types) are skipped, not errors.
	cfg := baseConfig()
	cfg.JWT.JWKSFile = writeFile(t, "j.json", `{"keys":[{"kty":"oct","k":"AAAA"},{"kty":"RSA","use":"enc","n":"AQAB","e":"AQAB"}]}`)
	if _, err := NewVerifier(cfg, 1, nil); err != nil {
		t.Errorf("unusable keys: %v", err)
	}
}

func TestAPIKeys(t *testing.T) {
	cfg := baseConfig()
	cfg.APIKeys = []APIKey{
		{Key: "k-live-123", Consumer: "billing", Tenant: "acme", Roles: []string{"svc"}},
		{Key: "k-live-456", Consumer: "search"},
	}
	v, _ := newVerifier(t, cfg, 1)

	id, fail := verify(t, v, "k-live-123")
	if fail != nil || string(id.Subject) != "billing" || string(id.Tenant) != "acme" || !id.HasRole("svc") {
		t.Fatalf("got %+v, %v", id, fail)
	}
	for _, cred := range []string{"k-live-124", "k-live-12", "K-LIVE-123", "Bearer k-live-123"} {
		if _, fail := verify(t, v, cred); fail != FailInvalid {
			t.Errorf("%q: %v, want invalid", cred, fail)
		}
	}
	for _, cred := range []string{"", "Bearer", "Bearer    "} {
		if _, fail := verify(t, v, cred); fail != FailMissing {
			t.Errorf("%q: %v, want missing", cred, fail)
		}
	}

	v.RevokeKey("k-live-123")
	if _, fail := verify(t, v, "k-live-123"); fail != FailRevoked {
		t.Fatalf("revoked key: %v", fail)
	}
	if _, fail := verify(t, v, "k-live-456"); fail != nil {
		t.Fatalf("other key after revocation: %v", fail)
	}
	v.Unrevoke("k-live-123")
	if _, fail := verify(t, v, "k-live-123"); fail != nil {
		t.Fatalf("unrevoked key: %v", fail)
	}
}

// ES256 is malleable: (r, s) and (r, n-s) both verify. Only the low-S form
// is taken, so a token has one valid signature.
func TestES256HighSRefused(t *testing.T) {
	k := ecKey(t)
	cfg := baseConfig()
	cfg.JWT.ES256PublicKey = pkixPEM(t, &k.PublicKey)
	v, _ := newVerifier(t, cfg, 1)
	low := makeToken(t, m{"alg": "ES256"}, m{"sub": "carol"}, es256(k))
	high := twinES256(t, low)
	// The twin is a genuine ECDSA signature of the same content.
	parts := strings.Split(high, ".")
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	d := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if !ecdsa.Verify(&k.PublicKey, d[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		t.Fatal("test setup: the high-S twin does not verify")
	}
	if _, fail := verify(t, v, "Bearer "+low); fail != nil {
		t.Fatalf("low S: %v", fail)
	}
	if _, fail := verify(t, v, "Bearer "+high); fail != FailInvalid {
		t.Fatalf("high S: %v, want invalid", fail)
	}
	// Signed high from the start, not only malleated.
	if _, fail := verify(t, v, "Bearer "+makeToken(t, m{"alg": "ES256"}, m{"sub": "carol"}, es256High(k))); fail != FailInvalid {
		t.Fatalf("high S: %v, want invalid", fail)
	}
}

// twinES256 returns tok with its ES256 signature's S replaced by n-S.
func twinES256(t testing.TB, tok string) string {
	parts := strings.Split(tok, ".")
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 {
		t.Fatalf("not an ES256 signature: %v", err)
	}
	s := new(big.Int).SetBytes(sig[32:])
	s.Sub(elliptic.P256().Params().N, s)
	s.FillBytes(sig[32:])
	return parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// Claims that could not travel faithfully in an identity header make the
// token invalid.
func TestClaimsMustFitHeaders(t *testing.T) {
	v, _ := newVerifier(t, baseConfig(), 1)
	for name, claims := range map[string]m{
		"CRLF in sub":          {"sub": "alice\r\nX-Admin: 1"},
		"tab in tenant":        {"sub": "a", "tenant": "ac\tme"},
		"comma in a role":      {"sub": "a", "roles": []string{"user,admin"}},
		"control in a role":    {"sub": "a", "roles": []string{"us\x00er"}},
		"DEL in a string role": {"sub": "a", "roles": "user\x7f"},
	} {
		if _, fail := verify(t, v, "Bearer "+hsToken(t, claims)); fail != FailInvalid {
			t.Errorf("%s: %v, want invalid", name, fail)
		}
	}
	if id, fail := verify(t, v, "Bearer "+hsToken(t, m{"sub": "ålice smith", "roles": "a,b c"})); fail != nil || len(id.Roles) != 3 {
		t.Errorf("spaces, commas between string roles and UTF-8: %+v %v", id, fail)
	}
	for name, k := range map[string]APIKey{
		"consumer": {Key: "k", Consumer: "a\nb"},
		"tenant":   {Key: "k", Consumer: "a", Tenant: "t\r"},
		"role":     {Key: "k", Consumer: "a", Roles: []string{"x,y"}},
	} {
		cfg := baseConfig()
		cfg.APIKeys = []APIKey{k}
		if _, err := NewVerifier(cfg, 1, nil); err == nil || !strings.Contains(err.Error(), "auth.api_keys[0]") {
			t.Errorf("API key with a bad %s: %v", name, err)
		}
	}
}

// splitBearer takes the token after the scheme (any case) and the spaces
// after it; anything else is an API key, whole.
func TestSplitBearer(t *testing.T) {
	for _, tc := range []struct {
		cred, token string
		bearer      bool
	}{
		{"Bearer abc", "abc", true}, {"bEARER   abc", "abc", true}, {"Bearer abc ", "abc ", true},
		{"Bearer", "", true}, {"Bearer    ", "", true}, {"Bearerabc", "Bearerabc", false},
		{"key-123", "key-123", false}, {"Bear", "Bear", false}, {"", "", false},
	} {
		token, bearer := splitBearer([]byte(tc.cred))
		if string(token) != tc.token || bearer != tc.bearer {
			t.Errorf("splitBearer(%q) = %q, %v; want %q, %v", tc.cred, token, bearer, tc.token, tc.bearer)
		}
	}
}
