// Configs: the tls.Config of a listener and of an upstream, with the
// gateway's defaults.

package tlsedge

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"time"
)

// ClientAuth is a listener's demand for client certificates.
type ClientAuth uint8

const (
	ClientAuthNone     ClientAuth = iota // no certificate is asked for
	ClientAuthOptional                   // asked for; one sent must verify against the client CAs
	ClientAuthRequire                    // a certificate that verifies is required
)

// ServerState is what a listener's handshakes read from the running config
// version: swapped whole on reload, so a handshake sees one version.
type ServerState struct {
	Certs     *Certificates
	ClientCAs *x509.CertPool // nil unless the listener asks for client certificates

	// forClient is the listener's tls.Config with ClientCAs set, so the
	// certificate request names the CAs; made at this version's first
	// handshake (see NewServerConfig).
	forClient     *tls.Config
	forClientOnce sync.Once
}

// ServerOptions are a listener's fixed settings.
type ServerOptions struct {
	MinVersion uint16     // tls.VersionTLS12 or tls.VersionTLS13
	ClientAuth ClientAuth // ClientAuthNone by default
}

// Secure TLS 1.2 suites, Mozilla's "intermediate" list: forward-secret
// key exchange and AEAD only (no RSA key exchange, CBC, RC4 or 3DES). TLS
// 1.3's suites are all of this kind and are not configurable in Go.
var intermediateSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// NewServerConfig returns a listener's one tls.Config. Every loop's
// handshakes use it, so the session ticket keys crypto/tls keeps in it
// (created at the first handshake, rotated daily, accepted for a week) are
// shared by all loops, and TLS 1.3 resumption by PSK works wherever the
// client lands. current is read at every handshake: the certificate and
// the client CAs of a reload serve the next handshake, while open
// connections keep what they negotiated. crypto/tls as a server never
// renegotiates and refuses a client's attempt with a no_renegotiation alert.
func NewServerConfig(o ServerOptions, current func() *ServerState) *tls.Config {
	cfg := &tls.Config{
		MinVersion:   o.MinVersion,
		CipherSuites: intermediateSuites,
		NextProtos:   []string{"http/1.1"},
		GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			return current().Certs.Choose(hello), nil
		},
		// Full 16 KiB records from the first byte, as nginx's default
		// ssl_buffer_size: fewer records and gnet writes per response.
		DynamicRecordSizingDisabled: true,
	}
	if o.ClientAuth == ClientAuthNone {
		return cfg
	}
	// The pool is verified here rather than by crypto/tls with ClientCAs,
	// which only another tls.Config could change. The names of its CAs go
	// in the certificate request all the same, so that a client holding
	// several certificates picks one they issued: each config version
	// hands its handshakes a clone with ClientCAs set. A clone without
	// keys of its own resumes with the listener config's automatic ticket
	// keys (crypto/tls Config.ticketKeys), so sessions survive a reload.
	cfg.ClientAuth = tls.RequestClientCert
	if o.ClientAuth == ClientAuthRequire {
		cfg.ClientAuth = tls.RequireAnyClientCert
	}
	cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return nil // optional, and none sent (require is enforced before)
		}
		return verifyClient(raw, current().ClientCAs, time.Now())
	}
	cfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		st := current()
		if st.ClientCAs == nil {
			return nil, nil // the listener's config, naming no CA
		}
		st.forClientOnce.Do(func() {
			c := cfg.Clone()
			c.GetConfigForClient = nil
			c.ClientCAs = st.ClientCAs
			st.forClient = c
		})
		return st.forClient, nil
	}
	return cfg
}

// errNoClientCAs is the refusal when no pool is loaded.
var errNoClientCAs = errors.New("tls: no client CA is configured")

func verifyClient(raw [][]byte, roots *x509.CertPool, now time.Time) error {
	if roots == nil {
		return errNoClientCAs
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, der := range raw {
		c, err := x509.ParseCertificate(der)
		if err != nil {
			return fmt.Errorf("tls: client certificate %d: %w", i+1, err)
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: inter, CurrentTime: now,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	return err
}

// ClientOptions are the TLS settings of connections to one upstream.
type ClientOptions struct {
	ServerName         string                 // verified name and SNI; default the node's host
	RootCAs            *x509.CertPool         // nil: the system roots
	Certificate        *tls.Certificate       // client certificate for upstream mTLS, or nil
	InsecureSkipVerify bool                   // no verification at all
	Sessions           tls.ClientSessionCache // shared by all loops, for resumption to the upstream
}

// NewClientConfig returns the tls.Config of connections to one upstream.
func NewClientConfig(o ClientOptions) *tls.Config {
	cfg := &tls.Config{
		MinVersion:                  tls.VersionTLS12,
		CipherSuites:                intermediateSuites,
		ServerName:                  o.ServerName,
		RootCAs:                     o.RootCAs,
		InsecureSkipVerify:          o.InsecureSkipVerify,
		NextProtos:                  []string{"http/1.1"},
		ClientSessionCache:          o.Sessions,
		DynamicRecordSizingDisabled: true,
	}
	if o.Certificate != nil {
		cfg.Certificates = []tls.Certificate{*o.Certificate}
	}
	return cfg
}
