// Certificates: loading and validating certificate files, and choosing one
// by SNI.

package tlsedge

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// CertFile names one certificate chain (leaf first, then its
// intermediates, PEM) and its private key (PEM, RSA, ECDSA or Ed25519).
type CertFile struct {
	Cert string
	Key  string
}

// Certificates is an immutable set of server certificates. Safe for
// concurrent use.
type Certificates struct {
	list  []*tls.Certificate            // in config order; list[0] is the default
	exact map[string][]*tls.Certificate // DNS SAN (lower case) -> the certificates naming it, in config order
	wild  map[string][]*tls.Certificate // "example.com" for a "*.example.com" SAN
	files []CertFile                    // parallel to list
}

// LoadCertificates reads and validates every file: the key must match the
// certificate, no certificate in a chain may be expired or not yet valid at
// now, and each certificate of a chain must be signed by the next. Errors
// name the file. At least one file is required.
func LoadCertificates(files []CertFile, now time.Time) (*Certificates, error) {
	if len(files) == 0 {
		return nil, errors.New("tls: no certificates")
	}
	c := &Certificates{exact: map[string][]*tls.Certificate{}, wild: map[string][]*tls.Certificate{}, files: files}
	var errs []error
	for _, f := range files {
		cert, err := loadOne(f, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.list = append(c.list, cert)
		for _, name := range cert.Leaf.DNSNames {
			name = strings.ToLower(strings.TrimSuffix(name, "."))
			m := c.exact
			if rest, ok := strings.CutPrefix(name, "*."); ok {
				m, name = c.wild, rest
			}
			m[name] = append(m[name], cert)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

func loadOne(f CertFile, now time.Time) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(f.Cert)
	if err != nil {
		return nil, fmt.Errorf("tls: certificate %s: %w", f.Cert, err)
	}
	keyPEM, err := os.ReadFile(f.Key)
	if err != nil {
		return nil, fmt.Errorf("tls: key %s: %w", f.Key, err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		// X509KeyPair says "private key does not match public key" and the
		// like; name both files.
		return nil, fmt.Errorf("tls: certificate %s with key %s: %w", f.Cert, f.Key, err)
	}
	chain := make([]*x509.Certificate, len(cert.Certificate))
	for i, der := range cert.Certificate {
		if chain[i], err = x509.ParseCertificate(der); err != nil {
			return nil, fmt.Errorf("tls: certificate %s: certificate %d of the chain: %w", f.Cert, i+1, err)
		}
	}
	cert.Leaf = chain[0]
	for i, x := range chain {
		what := "the certificate"
		if i > 0 {
			what = fmt.Sprintf("certificate %d of the chain (%s)", i+1, x.Subject.CommonName)
		}
		if now.After(x.NotAfter) {
			return nil, fmt.Errorf("tls: certificate %s: %s expired on %s", f.Cert, what, x.NotAfter.UTC().Format(time.RFC3339))
		}
		if now.Before(x.NotBefore) {
			return nil, fmt.Errorf("tls: certificate %s: %s is not valid before %s", f.Cert, what, x.NotBefore.UTC().Format(time.RFC3339))
		}
		if i+1 < len(chain) {
			if err := x.CheckSignatureFrom(chain[i+1]); err != nil {
				return nil, fmt.Errorf("tls: certificate %s: the chain does not build: certificate %d (%s) is not signed by certificate %d (%s): %w",
					f.Cert, i+1, x.Subject.CommonName, i+2, chain[i+1].Subject.CommonName, err)
			}
		}
	}
	return &cert, nil
}

// Choose picks the certificate for a ClientHello: among those whose SANs
// name its server name exactly, else those with a wildcard covering its
// first label, else all of them, the first the client can use (an ECDSA
// and an RSA certificate for one name serve old and new clients), else the
// first of that group. A client that sends no SNI (one connecting by IP
// address) gets the first certificate it can use.
func (c *Certificates) Choose(hello *tls.ClientHelloInfo) *tls.Certificate {
	group := c.list
	if hello.ServerName != "" {
		name := strings.ToLower(strings.TrimSuffix(hello.ServerName, "."))
		if certs, ok := c.exact[name]; ok {
			group = certs
		} else if _, parent, ok := strings.Cut(name, "."); ok {
			if certs, ok := c.wild[parent]; ok {
				group = certs
			}
		}
	}
	if len(group) > 1 {
		for _, cert := range group {
			if hello.SupportsCertificate(cert) == nil {
				return cert
			}
		}
	}
	return group[0]
}

// Expiry calls f for every certificate with its file and the end of its
// leaf's validity.
func (c *Certificates) Expiry(f func(file string, notAfter time.Time)) {
	for i, cert := range c.list {
		f(c.files[i].Cert, cert.Leaf.NotAfter)
	}
}

// LoadPool reads a PEM file of CA certificates.
func LoadPool(file string) (*x509.CertPool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: ca %s: %w", file, err)
	}
	pool := x509.NewCertPool()
	n := 0
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		x, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("tls: ca %s: certificate %d: %w", file, n+1, err)
		}
		pool.AddCert(x)
		n++
	}
	if n == 0 {
		return nil, fmt.Errorf("tls: ca %s: no PEM certificates", file)
	}
	return pool, nil
}
