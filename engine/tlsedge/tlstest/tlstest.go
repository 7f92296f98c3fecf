// Package tlstest makes certificates for tests: a CA, and leaves it signs,
// written as PEM files in a test's temporary directory.
package tlstest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority for tests.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
	PEM  []byte
	File string // its certificate, PEM
	t    testing.TB
	n    int
}

// NewCA makes a self-signed ECDSA P-256 CA named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &CA{Cert: cert, Key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), t: t}
	ca.File = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca.File, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Pool is a pool holding the CA.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// LeafOptions shape a leaf certificate.
type LeafOptions struct {
	Names    []string // DNS SANs; "127.0.0.1"-like names become IP SANs
	RSA      bool     // an RSA 2048 key instead of ECDSA P-256
	Expired  bool     // valid until an hour ago
	Client   bool     // client authentication usage instead of server
	NotAfter time.Time
}

// Leaf is a signed certificate and its files.
type Leaf struct {
	TLS      tls.Certificate
	CertFile string // the leaf, then the CA: a chain as operators deploy it
	KeyFile  string
	NotAfter time.Time
}

// Leaf makes a certificate signed by ca and writes its chain and key.
func (ca *CA) Leaf(o LeafOptions) *Leaf {
	t := ca.t
	t.Helper()
	var key crypto.Signer
	var err error
	if o.RSA {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	ca.n++
	notAfter := time.Now().Add(12 * time.Hour)
	if !o.NotAfter.IsZero() {
		notAfter = o.NotAfter
	}
	notBefore := time.Now().Add(-time.Hour)
	if o.Expired {
		notBefore, notAfter = time.Now().Add(-3*time.Hour), time.Now().Add(-time.Hour)
	}
	cn := "client"
	if len(o.Names) > 0 {
		cn = o.Names[0]
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(int64(ca.n + 1)), Subject: pkix.Name{CommonName: cn, Organization: []string{"loopgate test"}},
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if o.RSA {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	if o.Client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	for _, n := range o.Names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), ca.PEM...)
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})
	dir := t.TempDir()
	l := &Leaf{CertFile: filepath.Join(dir, "cert.pem"), KeyFile: filepath.Join(dir, "key.pem"), NotAfter: notAfter}
	if err := os.WriteFile(l.CertFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(l.KeyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if l.TLS, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		t.Fatal(err)
	}
	return l
}
