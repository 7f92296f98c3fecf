// The config sync over TLS: redis.tls applies to it as to the rate limits,
// against a real redis-server that speaks TLS only.

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate for localhost and 127.0.0.1
// (its own CA) and its key, and returns their paths.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, "redis.crt"), filepath.Join(dir, "redis.key")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	return certFile, keyFile
}

// startTLSRedis runs redis-server with TLS only (no plain port) and
// returns its address and the CA file that verifies it.
func startTLSRedis(t *testing.T) (addr, caFile string) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Skip("redis-server not installed (make test installs it)")
	}
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	addr = freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", "0", "--tls-port", port, "--bind", "127.0.0.1",
		"--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file", cert, "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(cert)
	pool.AppendCertsFromPEM(pem)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost"})
		if err == nil {
			c.Write([]byte("PING\r\n"))
			buf := make([]byte, 7)
			n, _ := c.Read(buf)
			c.Close()
			if string(buf[:n]) == "+PONG\r\n" {
				return addr, cert
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server with TLS on %s does not answer: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestClusterConfigSyncOverTLS(t *testing.T) {
	addr, ca := startTLSRedis(t)
	up := pathUpstream(t)
	redis := fmt.Sprintf("redis: {addrs: [%q], call_timeout: 2s, tls: {ca_file: %q, server_name: localhost}}\n", addr, ca)
	a := startClusterNodeWith(t, "a", redis, up)
	b := startClusterNodeWith(t, "b", redis, up)
	if status, body, _ := call(t, a.admin, writeToken, "PUT", "/config/routes/one", `{"path": "/one", "upstream": "backend"}`); status != 201 {
		t.Fatalf("PUT on a: %d %v", status, body)
	}
	t.Logf("b serves a's write after %s", servesWithin(t, b, "/one", 200, 10*time.Second))
}
