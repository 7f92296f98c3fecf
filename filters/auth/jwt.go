// JWT verification: compact JWS parsing, HS256/RS256/ES256 signatures and
// the registered claims. Runs only on a cache miss, so it may allocate.

package auth

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/json"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/loopgate/loopgate/filters"
)

// verifyJWT checks a compact JWS token and returns what it proves, the
// instant (unix ns) it stops being valid (exp plus leeway, or
// math.MaxInt64 when it has no exp), and the key it is revoked under (see
// jwtRevocationKey).
func (v *Verifier) verifyJWT(token []byte, now time.Time) (*verified, int64, [16]byte, *Failure) {
	var noKey [16]byte
	dot1, dot2, ok := splitJWS(token)
	if !ok {
		return nil, 0, noKey, FailInvalid
	}
	signed, sigPart := token[:dot2], token[dot2+1:]

	head, err := decodeObject(token[:dot1])
	if err != nil {
		return nil, 0, noKey, FailInvalid
	}
	if !v.signatureOK(head, signed, sigPart) {
		return nil, 0, noKey, FailInvalid
	}
	claims, err := decodeObject(token[dot1+1 : dot2])
	if err != nil {
		return nil, 0, noKey, FailInvalid
	}
	var jti string
	if !stringMember(claims, "jti", &jti) {
		return nil, 0, noKey, FailInvalid
	}
	vd, validUntil, fail := v.checkClaims(claims, now)
	if fail != nil {
		return nil, 0, noKey, fail
	}
	return vd, validUntil, revocationKeyOf(jti, signed), nil
}

// splitJWS finds the two dots of a three-part compact JWS.
func splitJWS(token []byte) (dot1, dot2 int, ok bool) {
	dot1 = bytes.IndexByte(token, '.')
	if dot1 < 0 {
		return 0, 0, false
	}
	dot2 = bytes.IndexByte(token[dot1+1:], '.')
	if dot2 < 0 {
		return 0, 0, false
	}
	dot2 += dot1 + 1
	if bytes.IndexByte(token[dot2+1:], '.') >= 0 {
		return 0, 0, false // five parts: JWE, which Loopgate does not take
	}
	return dot1, dot2, true
}

// decodeObject decodes one base64url part holding a JSON object. Member
// names match exactly (encoding/json's struct matching would fold case).
func decodeObject(part []byte) (map[string]json.RawMessage, error) {
	raw := make([]byte, b64.DecodedLen(len(part)))
	n, err := b64.Decode(raw, part)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw[:n], &m); err != nil {
		return nil, err
	}
	return m, nil
}

// signatureOK picks the key the header's alg calls for, only among keys
// of that algorithm's kind, and checks the signature with it.
func (v *Verifier) signatureOK(head map[string]json.RawMessage, signed, sigPart []byte) bool {
	if _, ok := head["crit"]; ok {
		return false // RFC 7515 4.1.11: extensions we do not understand must fail
	}
	var alg, kid string
	if !stringMember(head, "alg", &alg) || !stringMember(head, "kid", &kid) {
		return false
	}
	sig := make([]byte, b64.DecodedLen(len(sigPart)))
	n, err := b64.Decode(sig, sigPart)
	if err != nil {
		return false
	}
	sig = sig[:n]

	switch alg {
	case "HS256":
		if v.keys.hmac == nil {
			return false
		}
		mac := hmac.New(sha256.New, v.keys.hmac)
		mac.Write(signed)
		return hmac.Equal(mac.Sum(nil), sig)
	case "RS256":
		pub := v.keys.rsa
		if k, ok := v.keys.jwks[kid]; ok {
			if k.rsa == nil || (k.alg != "" && k.alg != alg) {
				return false
			}
			pub = k.rsa
		}
		if pub == nil {
			return false
		}
		digest := sha256.Sum256(signed)
		return rsa.VerifyPKCS1v15(pub, crypto.SHA256, digest[:], sig) == nil
	case "ES256":
		pub := v.keys.ec
		if k, ok := v.keys.jwks[kid]; ok {
			if k.ec == nil || (k.alg != "" && k.alg != alg) {
				return false
			}
			pub = k.ec
		}
		if pub == nil || len(sig) != 64 {
			return false // JWS ES256 is R||S, 32 bytes each (RFC 7518 3.4), never ASN.1
		}
		// (r, s) and (r, n-s) both verify, so every ES256 token has a twin
		// with another signature. Only the low-S form is taken (Bitcoin's
		// BIP 62 rule). Issuers must emit it: signers such as Go's
		// crypto/ecdsa and OpenSSL pick either form at random, so their
		// tokens need s replaced by n-s when s > n/2.
		if bytes.Compare(sig[32:], p256HalfOrder[:]) > 0 {
			return false
		}
		digest := sha256.Sum256(signed)
		r, s := new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])
		return ecdsa.Verify(pub, digest[:], r, s)
	}
	return false // "none", a missing alg, or one Loopgate does not take
}

// p256HalfOrder is floor(n/2) for P-256's group order n, big-endian: the
// largest S an ES256 signature may carry.
var p256HalfOrder = func() (h [32]byte) {
	new(big.Int).Rsh(elliptic.P256().Params().N, 1).FillBytes(h[:])
	return h
}()

// checkClaims applies exp, nbf, iss and aud, then reads sub, the tenant
// and the roles. A claim of the wrong JSON type makes the token invalid.
func (v *Verifier) checkClaims(c map[string]json.RawMessage, now time.Time) (*verified, int64, *Failure) {
	var none *verified
	nowNs := now.UnixNano()
	leeway := int64(v.leeway)

	validUntil := int64(math.MaxInt64)
	if exp, ok, good := numericDate(c, "exp"); !good {
		return none, 0, FailInvalid
	} else if ok {
		validUntil = satAdd(exp, leeway)
		if nowNs >= validUntil {
			return none, 0, FailExpired
		}
	}
	if nbf, ok, good := numericDate(c, "nbf"); !good {
		return none, 0, FailInvalid
	} else if ok && nowNs < satAdd(nbf, -leeway) {
		return none, 0, FailNotYetValid
	}

	if v.issuer != "" {
		var iss string
		if !stringMember(c, "iss", &iss) || iss != v.issuer {
			return none, 0, FailInvalid
		}
	}
	if v.audience != "" && !audienceHas(c["aud"], v.audience) {
		return none, 0, FailInvalid
	}

	var sub, tenant string
	if !stringMember(c, "sub", &sub) || !stringMember(c, v.tenantClaim, &tenant) {
		return none, 0, FailInvalid
	}
	roles, ok := parseRoles(c[v.rolesClaim])
	if !ok {
		return none, 0, FailInvalid
	}
	vd, err := v.newVerified(filters.KindJWT, sub, tenant, roles)
	if err != nil {
		return none, 0, FailInvalid
	}
	return vd, validUntil, nil
}

// stringMember reads m[name] into *s when it is a JSON string. Absent or
// null leaves *s alone and is fine; any other type is not.
func stringMember(m map[string]json.RawMessage, name string, s *string) bool {
	raw, ok := m[name]
	if !ok {
		return true
	}
	return json.Unmarshal(raw, s) == nil
}

// numericDate reads a NumericDate claim (seconds since the epoch, possibly
// fractional) as unix nanoseconds, saturating far-off dates. present
// reports whether the claim is there; good is false for a non-number.
func numericDate(m map[string]json.RawMessage, name string) (ns int64, present, good bool) {
	raw, ok := m[name]
	if !ok || string(raw) == "null" {
		return 0, false, true
	}
	var secs float64
	if err := json.Unmarshal(raw, &secs); err != nil {
		return 0, true, false
	}
	const limit = math.MaxInt64 / 1e9 / 2 // about 146 years either side of 1970
	switch {
	case secs >= limit:
		return math.MaxInt64 / 2, true, true
	case secs <= -limit:
		return math.MinInt64 / 2, true, true
	}
	return int64(secs * 1e9), true, true
}

func satAdd(a, b int64) int64 {
	s := a + b
	if b > 0 && s < a {
		return math.MaxInt64
	}
	if b < 0 && s > a {
		return math.MinInt64
	}
	return s
}

// audienceHas reports whether aud, a string or an array of strings,
// contains want (RFC 7519 4.1.3).
func audienceHas(aud json.RawMessage, want string) bool {
	if aud == nil {
		return false
	}
	var one string
	if json.Unmarshal(aud, &one) == nil {
		return one == want
	}
	var many []string
	if json.Unmarshal(aud, &many) != nil {
		return false
	}
	for _, a := range many {
		if a == want {
			return true
		}
	}
	return false
}

// parseRoles reads a roles claim: an array of strings, or one string of
// roles separated by spaces or commas (the OAuth "scope" style).
func parseRoles(raw json.RawMessage) ([]string, bool) {
	if raw == nil || string(raw) == "null" {
		return nil, true
	}
	var many []string
	if json.Unmarshal(raw, &many) == nil {
		return many, true
	}
	var one string
	if json.Unmarshal(raw, &one) != nil {
		return nil, false
	}
	return strings.FieldsFunc(one, func(r rune) bool { return r == ' ' || r == ',' }), true
}
