// Key loading: the HS256 secret, PEM public keys and JWKS files, checked
// once when the Verifier is built.

package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"log"
	"math/big"
	"os"
)

// minHS256Secret is the shortest HS256 secret RFC 7518 3.2 allows (the hash
// output, 256 bits). Shorter secrets are accepted, as other gateways do, but
// logged: they are guessable offline from any token.
const minHS256Secret = 32

// keySet holds every key a token may be verified with. Each algorithm has
// its own kind of key and never borrows another's, so an HS256 token can
// never be checked against public key bytes used as an HMAC secret.
type keySet struct {
	hmac []byte           // HS256 only
	rsa  *rsa.PublicKey   // RS256 tokens without a matching kid
	ec   *ecdsa.PublicKey // ES256 tokens without a matching kid (P-256)
	jwks map[string]jwk   // by kid ("" for the one key without a kid)
}

// jwk is one usable key from a JWKS file: exactly one of rsa and ec is set.
type jwk struct {
	alg string // the key's "alg" member; "" = any alg its type allows
	rsa *rsa.PublicKey
	ec  *ecdsa.PublicKey
}

// loadKeys reads and checks every configured key. Errors name the config
// field at fault.
func loadKeys(c *JWT) (*keySet, error) {
	ks := &keySet{}
	if c.HS256Secret != "" {
		if len(c.HS256Secret) < minHS256Secret {
			log.Printf("loopgate: warning: auth.jwt.hs256_secret is %d bytes; RFC 7518 asks for at least %d", len(c.HS256Secret), minHS256Secret)
		}
		ks.hmac = []byte(c.HS256Secret)
	}

	rsaPEM, field, err := inlineOrFile(c.RS256PublicKey, c.RS256PublicKeyFile, "auth.jwt.rs256_public_key")
	if err != nil {
		return nil, err
	}
	if rsaPEM != nil {
		if ks.rsa, err = parseRSAPEM(rsaPEM); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
	}

	ecPEM, field, err := inlineOrFile(c.ES256PublicKey, c.ES256PublicKeyFile, "auth.jwt.es256_public_key")
	if err != nil {
		return nil, err
	}
	if ecPEM != nil {
		if ks.ec, err = parseECPEM(ecPEM); err != nil {
			return nil, fmt.Errorf("%s: %w", field, err)
		}
	}

	if c.JWKSFile != "" {
		data, err := os.ReadFile(c.JWKSFile)
		if err != nil {
			return nil, fmt.Errorf("auth.jwt.jwks_file: %w", err)
		}
		if ks.jwks, err = parseJWKS(data); err != nil {
			return nil, fmt.Errorf("auth.jwt.jwks_file %s: %w", c.JWKSFile, err)
		}
	}
	return ks, nil
}

// inlineOrFile returns the PEM text of a key given inline or as a file (not
// both), and the name of the field it came from.
func inlineOrFile(inline, file, field string) ([]byte, string, error) {
	switch {
	case inline != "" && file != "":
		return nil, "", fmt.Errorf("%s and %s_file: set one, not both", field, field)
	case inline != "":
		return []byte(inline), field, nil
	case file != "":
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, "", fmt.Errorf("%s_file: %w", field, err)
		}
		return data, field + "_file", nil
	}
	return nil, "", nil
}

// parseRSAPEM reads a "PUBLIC KEY" (PKIX) or "RSA PUBLIC KEY" (PKCS #1) block.
func parseRSAPEM(data []byte) (*rsa.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block found")
	}
	switch block.Type {
	case "RSA PUBLIC KEY":
		return x509.ParsePKCS1PublicKey(block.Bytes)
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, err
		}
		pub, ok := k.(*rsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("PEM holds a %T, not an RSA public key", k)
		}
		return pub, nil
	}
	return nil, fmt.Errorf("PEM block %q, want \"PUBLIC KEY\" or \"RSA PUBLIC KEY\"", block.Type)
}

// parseECPEM reads a "PUBLIC KEY" (PKIX) block holding a P-256 key.
func parseECPEM(data []byte) (*ecdsa.PublicKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block found")
	}
	if block.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("PEM block %q, want \"PUBLIC KEY\"", block.Type)
	}
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	pub, ok := k.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("PEM holds a %T, not an ECDSA public key", k)
	}
	if pub.Curve != elliptic.P256() {
		return nil, fmt.Errorf("curve %s, ES256 needs P-256", pub.Curve.Params().Name)
	}
	return pub, nil
}

// jwkJSON is a JSON Web Key (RFC 7517) as far as RS256 and ES256 need it.
type jwkJSON struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	Alg string `json:"alg"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS reads a key set. Keys Loopgate cannot use for RS256/ES256
// signatures (encryption keys, other types and curves) are skipped; a
// usable key that is malformed, or a kid used twice, is an error.
func parseJWKS(data []byte) (map[string]jwk, error) {
	var set struct {
		Keys []jwkJSON `json:"keys"`
	}
	if err := json.Unmarshal(data, &set); err != nil {
		return nil, err
	}
	keys := make(map[string]jwk, len(set.Keys))
	for i, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		var key jwk
		var err error
		switch {
		case k.Kty == "RSA" && (k.Alg == "" || k.Alg == "RS256"):
			key.rsa, err = rsaFromJWK(k.N, k.E)
		case k.Kty == "EC" && k.Crv == "P-256" && (k.Alg == "" || k.Alg == "ES256"):
			key.ec, err = ecFromJWK(k.X, k.Y)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("keys[%d] (kid %q): %w", i, k.Kid, err)
		}
		if _, dup := keys[k.Kid]; dup {
			return nil, fmt.Errorf("keys[%d]: kid %q appears twice", i, k.Kid)
		}
		key.alg = k.Alg
		keys[k.Kid] = key
	}
	return keys, nil
}

var b64 = base64.RawURLEncoding.Strict()

func rsaFromJWK(n, e string) (*rsa.PublicKey, error) {
	nb, err := b64.DecodeString(n)
	if err != nil || len(nb) == 0 {
		return nil, errors.New("bad modulus n")
	}
	eb, err := b64.DecodeString(e)
	if err != nil || len(eb) == 0 || len(eb) > 4 {
		return nil, errors.New("bad exponent e")
	}
	exp := 0
	for _, b := range eb {
		exp = exp<<8 | int(b)
	}
	if exp < 3 || exp&1 == 0 {
		return nil, errors.New("bad exponent e")
	}
	return &rsa.PublicKey{N: new(big.Int).SetBytes(nb), E: exp}, nil
}

func ecFromJWK(x, y string) (*ecdsa.PublicKey, error) {
	xb, err1 := b64.DecodeString(x)
	yb, err2 := b64.DecodeString(y)
	if err1 != nil || err2 != nil || len(xb) != 32 || len(yb) != 32 {
		return nil, errors.New("bad coordinates x, y (want 32 bytes each)")
	}
	point := append(append([]byte{4}, xb...), yb...)
	return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
}
