package tlsedge_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/loopgate/loopgate/engine/tlsedge/tlstest"
)

func newRunner(workers, pending int) *tlsedge.Runner {
	return tlsedge.NewRunner(tlsedge.RunnerOptions{Workers: workers, MaxPending: pending})
}

// serverFixture is an echo server with one certificate for "example.test".
// fixtureTimeout is the handshake timeout of serverFixture's servers.
var fixtureTimeout = 10 * time.Second

func serverFixture(t *testing.T, o tlsedge.ServerOptions, r *tlsedge.Runner, leaves ...*tlstest.Leaf) (*echoServer, *tlstest.CA) {
	t.Helper()
	ca := tlstest.NewCA(t, "test CA")
	if len(leaves) == 0 {
		leaves = []*tlstest.Leaf{ca.Leaf(tlstest.LeafOptions{Names: []string{"example.test"}})}
	}
	files := make([]tlsedge.CertFile, len(leaves))
	for i, l := range leaves {
		files[i] = tlsedge.CertFile{Cert: l.CertFile, Key: l.KeyFile}
	}
	certs, err := tlsedge.LoadCertificates(files, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	st := &tlsedge.ServerState{Certs: certs, ClientCAs: ca.Pool()}
	if o.MinVersion == 0 {
		o.MinVersion = tls.VersionTLS12
	}
	e := &echoServer{cfg: tlsedge.NewServerConfig(o, func() *tlsedge.ServerState { return st }), runner: r, timeout: fixtureTimeout}
	startEcho(t, e)
	return e, ca
}

func dialTLS(t *testing.T, addr string, cfg *tls.Config, wrap func(net.Conn) net.Conn) (*tls.Conn, error) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		raw = wrap(raw)
	}
	c := tls.Client(raw, cfg)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		raw.Close()
		return nil, err
	}
	t.Cleanup(func() { c.Close() })
	return c, nil
}

func roundTrip(t *testing.T, c *tls.Conn, msg []byte) {
	t.Helper()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo differs: %d bytes back, first %q", len(got), got[:min(len(got), 32)])
	}
}

func TestEchoBothVersions(t *testing.T) {
	e, ca := serverFixture(t, tlsedge.ServerOptions{}, newRunner(4, 4))
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB: many records each way
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		c, err := dialTLS(t, e.addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test", MinVersion: v, MaxVersion: v}, nil)
		if err != nil {
			t.Fatalf("version %x: %v", v, err)
		}
		st := c.ConnectionState()
		if st.Version != v || st.NegotiatedProtocol != "" {
			t.Fatalf("version %x, alpn %q", st.Version, st.NegotiatedProtocol)
		}
		roundTrip(t, c, []byte("hello"))
		roundTrip(t, c, big)
	}
	// ALPN: http/1.1 is chosen when offered.
	c, err := dialTLS(t, e.addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test", NextProtos: []string{"h2", "http/1.1"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := c.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Fatalf("alpn %q", p)
	}
	// The client may finish before the server has read its Finished.
	waitFor(t, "3 handshakes counted", func() bool { return e.runner.Stats().OK == 3 })
	// The loop counts a handshake's version just after counting it OK.
	waitForStats(t, e.runner, "TLS 1.2 once and TLS 1.3 twice", func(s tlsedge.Stats) bool {
		return s.OK == 3 && s.TLS12 == 1 && s.TLS13 == 2
	})
}

// A server's handshake wakes its loop twice, whatever the version: the
// output of its first flight with the request for the client's next one,
// and the end. Its first read, the hello, is fed without being asked.
func TestServerHandshakeWakesLoopTwice(t *testing.T) {
	e, ca := serverFixture(t, tlsedge.ServerOptions{}, newRunner(4, 4))
	for i, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		c, err := dialTLS(t, e.addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test", MinVersion: v, MaxVersion: v}, nil)
		if err != nil {
			t.Fatalf("version %x: %v", v, err)
		}
		roundTrip(t, c, []byte("hello"))
		c.Close()
		waitFor(t, "the handshake counted", func() bool { return e.runner.Stats().OK == uint64(i+1) })
		if n := e.posts.Load(); n != int64(2*(i+1)) {
			t.Fatalf("version %x: %d posts after %d handshakes, want 2 each", v, n, i+1)
		}
	}
}

// The client sends every byte in its own segment, its hello included, and
// records arrive split at every byte.
func TestHandshakeAndRecordsByteByByte(t *testing.T) {
	e, ca := serverFixture(t, tlsedge.ServerOptions{}, newRunner(4, 4))
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		c, err := dialTLS(t, e.addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test", MaxVersion: v},
			func(c net.Conn) net.Conn { return byteConn{c} })
		if err != nil {
			t.Fatalf("version %x: %v", v, err)
		}
		roundTrip(t, c, []byte("split at every byte"))
		roundTrip(t, c, bytes.Repeat([]byte{'x'}, 3000))
	}
}

// Records merged: many writes land in one gnet read, and each comes back.
func TestRecordsMerged(t *testing.T) {
	e, ca := serverFixture(t, tlsedge.ServerOptions{}, newRunner(4, 4))
	c, err := dialTLS(t, e.addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	for i := range 200 {
		msg := []byte(strings.Repeat(string(rune('a'+i%26)), i+1))
		want.Write(msg)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, want.Len())
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatal("merged records came back different")
	}
}

func TestHandshakeTimeout(t *testing.T) {
	fixtureTimeout = 200 * time.Millisecond
	defer func() { fixtureTimeout = 10 * time.Second }()
	e, _ := serverFixture(t, tlsedge.ServerOptions{}, newRunner(4, 4))
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Half a record header: the handshake waits for the rest, which never comes.
	if _, err := c.Write([]byte{0x16, 0x03}); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("want the server to close, got %v", err)
	}
	waitFor(t, "the timeout counted", func() bool { return e.runner.Stats().TimedOut == 1 })
	if res := e.handshakeResults(); len(res) != 1 || !errors.Is(res[0], tlsedge.ErrHandshakeTimeout) {
		t.Fatalf("results %v", res)
	}
}

func TestBadClientHello(t *testing.T) {
	e, _ := serverFixture(t, tlsedge.ServerOptions{}, newRunner(4, 4))
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(c); err != nil {
		t.Fatalf("want the server to close, got %v", err)
	}
	waitFor(t, "the failure counted", func() bool { return e.runner.Stats().Failed == 1 })
}

// A flood of handshakes that never finish fills MaxPending; past it
// connections are refused at once, and an established connection keeps
// being served. Stalled peers hold no worker: with one worker, a new
// client still completes its handshake.
func TestHandshakeFloodIsCapped(t *testing.T) {
	e, ca := serverFixture(t, tlsedge.ServerOptions{}, newRunner(1, 5))
	good, err := dialTLS(t, e.addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var stalled []net.Conn
	defer func() {
		for _, c := range stalled {
			c.Close()
		}
	}()
	for range 4 {
		c, err := net.Dial("tcp", e.addr)
		if err != nil {
			t.Fatal(err)
		}
		stalled = append(stalled, c)
		_, _ = c.Write([]byte{0x16})
	}
	waitFor(t, "4 handshakes pending, none computing", func() bool {
		s := e.runner.Stats()
		return s.Pending == 4 && s.Active == 0
	})
	// The fifth pending handshake: it completes on the one worker.
	other, err := dialTLS(t, e.addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test"}, nil)
	if err != nil {
		t.Fatalf("a handshake behind 4 stalled ones: %v", err)
	}
	roundTrip(t, other, []byte("through"))
	other.Close()
	// The handshake's goroutine counts itself out after posting its end,
	// so the peer can be served before it has.
	waitFor(t, "the fifth handshake counted out", func() bool { return e.runner.Stats().Pending == 4 })
	stalled = append(stalled, mustDial(t, e.addr))
	_, _ = stalled[len(stalled)-1].Write([]byte{0x16})
	waitFor(t, "5 pending", func() bool { return e.runner.Stats().Pending == 5 })

	extra := mustDial(t, e.addr)
	defer extra.Close()
	_ = extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(extra); err != nil {
		t.Fatalf("want the sixth to be closed, got %v", err)
	}
	if s := e.runner.Stats(); s.Refused != 1 {
		t.Fatalf("refused %d", s.Refused)
	}
	roundTrip(t, good, []byte("still served"))
	// Closing a stalled connection ends its handshake.
	stalled[0].Close()
	waitFor(t, "a handshake ended", func() bool { return e.runner.Stats().Pending == 4 })
}

func mustDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestSNIChoosesCertificate(t *testing.T) {
	ca := tlstest.NewCA(t, "sni CA")
	def := ca.Leaf(tlstest.LeafOptions{Names: []string{"default.test"}})
	wild := ca.Leaf(tlstest.LeafOptions{Names: []string{"*.example.test"}})
	exact := ca.Leaf(tlstest.LeafOptions{Names: []string{"api.example.test"}})
	files := []tlsedge.CertFile{{def.CertFile, def.KeyFile}, {wild.CertFile, wild.KeyFile}, {exact.CertFile, exact.KeyFile}}
	certs, err := tlsedge.LoadCertificates(files, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	st := &tlsedge.ServerState{Certs: certs}
	e := &echoServer{cfg: tlsedge.NewServerConfig(tlsedge.ServerOptions{MinVersion: tls.VersionTLS12}, func() *tlsedge.ServerState { return st }),
		runner: newRunner(4, 4)}
	startEcho(t, e)
	for sni, want := range map[string]string{
		"api.example.test": "api.example.test", "API.Example.Test.": "api.example.test",
		"www.example.test": "*.example.test", "a.b.example.test": "default.test", "other.test": "default.test", "": "default.test",
	} {
		c, err := dialTLS(t, e.addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true}, nil)
		if err != nil {
			t.Fatalf("%q: %v", sni, err)
		}
		if got := c.ConnectionState().PeerCertificates[0].DNSNames[0]; got != want {
			t.Errorf("SNI %q got %q, want %q", sni, got, want)
		}
		c.Close()
	}
}

// An ECDSA and an RSA certificate for one name: each client gets one it
// can use.
func TestECDSAAndRSAForOneName(t *testing.T) {
	ca := tlstest.NewCA(t, "kinds CA")
	ec := ca.Leaf(tlstest.LeafOptions{Names: []string{"example.test"}})
	rsa := ca.Leaf(tlstest.LeafOptions{Names: []string{"example.test"}, RSA: true})
	e, _ := serverFixture(t, tlsedge.ServerOptions{}, newRunner(4, 4), ec, rsa)
	rsaOnly := &tls.Config{InsecureSkipVerify: true, ServerName: "example.test", MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}
	c, err := dialTLS(t, e.addr, rsaOnly, nil)
	if err != nil {
		t.Fatal(err)
	}
	if alg := c.ConnectionState().PeerCertificates[0].PublicKeyAlgorithm.String(); alg != "RSA" {
		t.Fatalf("RSA-only client got %s", alg)
	}
	c, err = dialTLS(t, e.addr, &tls.Config{InsecureSkipVerify: true, ServerName: "example.test"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if alg := c.ConnectionState().PeerCertificates[0].PublicKeyAlgorithm.String(); alg != "ECDSA" {
		t.Fatalf("modern client got %s", alg)
	}
}

func TestResumption(t *testing.T) {
	e, ca := serverFixture(t, tlsedge.ServerOptions{}, newRunner(4, 4))
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test", MaxVersion: v, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
		for i := range 2 {
			c, err := dialTLS(t, e.addr, cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			// A TLS 1.3 ticket arrives after the handshake: read once.
			roundTrip(t, c, []byte("ping"))
			if resumed := c.ConnectionState().DidResume; resumed != (i == 1) {
				t.Fatalf("version %x connection %d: resumed %v", v, i, resumed)
			}
			c.Close()
		}
	}
	waitFor(t, "4 handshakes counted", func() bool { return e.runner.Stats().OK == 4 })
	// The loop counts a resumption just after counting the handshake OK.
	waitForStats(t, e.runner, "2 of them resumed", func(s tlsedge.Stats) bool { return s.OK == 4 && s.Resumed == 2 })
}

// TLS 1.0 and 1.1 and weak suites are refused.
func TestOldVersionsRefused(t *testing.T) {
	e, ca := serverFixture(t, tlsedge.ServerOptions{}, newRunner(4, 4))
	if _, err := dialTLS(t, e.addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test", MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}, nil); err == nil {
		t.Fatal("TLS 1.1 was accepted")
	}
	cbc := &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test", MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}
	if _, err := dialTLS(t, e.addr, cbc, nil); err == nil {
		t.Fatal("a CBC-SHA1 suite was accepted")
	}
	e13, ca13 := serverFixture(t, tlsedge.ServerOptions{MinVersion: tls.VersionTLS13}, newRunner(4, 4))
	if _, err := dialTLS(t, e13.addr, &tls.Config{RootCAs: ca13.Pool(), ServerName: "example.test", MaxVersion: tls.VersionTLS12}, nil); err == nil {
		t.Fatal("min_version 1.3 accepted TLS 1.2")
	}
}

func TestMutualTLS(t *testing.T) {
	for _, mode := range []tlsedge.ClientAuth{tlsedge.ClientAuthRequire, tlsedge.ClientAuthOptional} {
		e, ca := serverFixture(t, tlsedge.ServerOptions{ClientAuth: mode}, newRunner(4, 4))
		good := ca.Leaf(tlstest.LeafOptions{Names: []string{"alice"}, Client: true})
		stranger := tlstest.NewCA(t, "other CA").Leaf(tlstest.LeafOptions{Names: []string{"mallory"}, Client: true})
		base := func() *tls.Config { return &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test"} }

		// The certificate request names the client CA, so a client with
		// several certificates can choose.
		cfg := base()
		var named [][]byte
		cfg.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			named = cri.AcceptableCAs
			return &good.TLS, nil
		}
		c, err := dialTLS(t, e.addr, cfg, nil)
		if err != nil {
			t.Fatalf("mode %d, good cert: %v", mode, err)
		}
		if len(named) != 1 || !bytes.Equal(named[0], ca.Cert.RawSubject) {
			t.Fatalf("mode %d: the certificate request names %d CAs, want the client CA", mode, len(named))
		}
		roundTrip(t, c, []byte("hi"))
		e.mu.Lock()
		subject := e.states[len(e.states)-1].PeerCertificates[0].Subject.CommonName
		e.mu.Unlock()
		if subject != "alice" {
			t.Fatalf("subject %q", subject)
		}

		// Sessions resume (the per-version config shares the listener's
		// ticket keys), the client certificate with them.
		for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			cfg = base()
			cfg.Certificates = []tls.Certificate{good.TLS}
			cfg.MaxVersion = v
			cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1)
			for i := range 2 {
				c, err := dialTLS(t, e.addr, cfg, nil)
				if err != nil {
					t.Fatalf("mode %d, version %x, connection %d: %v", mode, v, i, err)
				}
				roundTrip(t, c, []byte("again")) // TLS 1.3: the ticket comes after the handshake
				if got := c.ConnectionState().DidResume; got != (i == 1) {
					t.Fatalf("mode %d, version %x, connection %d: resumed %v", mode, v, i, got)
				}
				c.Close()
			}
		}

		// Sent whatever the request names, as a client bent on it would.
		cfg = base()
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &stranger.TLS, nil }
		if c, err := dialTLS(t, e.addr, cfg, nil); err == nil {
			// TLS 1.3: the client learns of the refusal on its first read.
			_, _ = c.Write([]byte("x"))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatalf("mode %d: a certificate of another CA was accepted", mode)
			}
		}

		c, err = dialTLS(t, e.addr, base(), nil)
		if mode == tlsedge.ClientAuthOptional {
			if err != nil {
				t.Fatalf("optional, no cert: %v", err)
			}
			roundTrip(t, c, []byte("anonymous"))
		} else if err == nil {
			_, _ = c.Write([]byte("x"))
			if _, err := c.Read(make([]byte, 1)); err == nil {
				t.Fatal("require: a client without a certificate was served")
			}
		}
	}
}

// The gnet side as the TLS client (an upstream connection): the peer is a
// Go TLS server; verification is on, and a server whose certificate does
// not verify is refused.
func TestClientSide(t *testing.T) {
	ca := tlstest.NewCA(t, "upstream CA")
	leaf := ca.Leaf(tlstest.LeafOptions{Names: []string{"upstream.test"}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			raw, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c := tls.Server(raw, &tls.Config{Certificates: []tls.Certificate{leaf.TLS}})
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	for _, tc := range []struct {
		name string
		cfg  *tls.Config
		ok   bool
	}{
		{"verified", tlsedge.NewClientConfig(tlsedge.ClientOptions{ServerName: "upstream.test", RootCAs: ca.Pool()}), true},
		{"system roots refuse a private CA", tlsedge.NewClientConfig(tlsedge.ClientOptions{ServerName: "upstream.test"}), false},
		{"wrong name", tlsedge.NewClientConfig(tlsedge.ClientOptions{ServerName: "other.test", RootCAs: ca.Pool()}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &echoServer{client: tc.cfg, runner: newRunner(4, 4)}
			startEcho(t, e)
			// The gnet server accepts our dial and runs the client side; we
			// splice that connection to the Go TLS server.
			raw, err := net.Dial("tcp", e.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			up, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer up.Close()
			go func() { _, _ = io.Copy(up, raw) }()
			go func() { _, _ = io.Copy(raw, up) }()
			waitFor(t, "the handshake's end", func() bool { return len(e.handshakeResults()) == 1 })
			if err := e.handshakeResults()[0]; (err == nil) != tc.ok {
				t.Fatalf("handshake: %v", err)
			}
		})
	}
}
