// HTTPS listeners through the whole gateway: real TLS clients, a real
// upstream, certificates made in the test.

package engine_test

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/loopgate/loopgate/engine/tlsedge/tlstest"
	"github.com/loopgate/loopgate/pool"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// tlsGateway is a gateway with a plain listener (addrs[0]) and an HTTPS
// one (addrs[1]) whose certificate is leaf.
type tlsGateway struct {
	srv   *engine.Server
	plain string
	https string
	ca    *tlstest.CA
	leaf  *tlstest.Leaf
	yaml  string
}

// echoUpstream answers every request with its method, path and body.
func echoUpstream(t *testing.T) string {
	return startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Path", r.URL.Path)
		w.Header().Set("X-Got-Subject", r.Header.Get("X-Client-Subject"))
		w.Header().Set("X-Got-Sans", r.Header.Get("X-Client-Sans"))
		w.Header().Set("X-Got-Proto", r.Header.Get("X-Forwarded-Proto"))
		if r.URL.Path == "/big" {
			_, _ = w.Write(bytes.Repeat([]byte("0123456789abcdef"), 1<<18)) // 4 MiB
			return
		}
		fmt.Fprintf(w, "%s %s %d:", r.Method, r.URL.Path, len(body))
		_, _ = w.Write(body)
	}))
}

// startTLSGateway runs a gateway; extraTLS is added to the HTTPS
// listener's tls section, extra at the top level.
func startTLSGateway(t *testing.T, extraTLS, extra string) *tlsGateway {
	t.Helper()
	return startTLSGatewayWith(t, tlsGatewayOptions{tls: extraTLS, top: extra})
}

// tlsGatewayOptions add YAML to startTLSGatewayWith's config: plain to
// the plain listener, tls to the HTTPS listener's tls section, top at the
// top level, routes before the catch-all route.
// upstreams are added beside the catch-all's upstream u.
type tlsGatewayOptions struct{ plain, tls, top, upstreams, routes string }

func startTLSGatewayWith(t *testing.T, o tlsGatewayOptions) *tlsGateway {
	t.Helper()
	g := &tlsGateway{ca: tlstest.NewCA(t, "gateway test CA")}
	g.leaf = g.ca.Leaf(tlstest.LeafOptions{Names: []string{"example.test", "127.0.0.1"}})
	up := echoUpstream(t)
	g.yaml = fmt.Sprintf(`admin: "off"
loops: 2
listeners:
  - address: 127.0.0.1:0
%s
  - address: 127.0.0.1:0
    tls:
      certificates:
        - {cert: %s, key: %s}
%s
%s
upstreams:
  - name: u
    nodes: [%s]
%s
routes:
%s
  - prefix: /
    upstream: u
`, o.plain, g.leaf.CertFile, g.leaf.KeyFile, o.tls, o.top, up, o.upstreams, o.routes)
	cfg, err := config.Parse([]byte(g.yaml))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, g.yaml)
	}
	if g.srv, err = engine.New(cfg); err != nil {
		t.Fatal(err)
	}
	engine.ServeForTest(t, g.srv)
	addrs := g.srv.Addrs()
	g.plain, g.https = addrs[0], addrs[1]
	return g
}

func (g *tlsGateway) clientConfig() *tls.Config {
	return &tls.Config{RootCAs: g.ca.Pool(), ServerName: "example.test"}
}

func (g *tlsGateway) httpClient(cfg *tls.Config) *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
}

func TestHTTPSAndPlainListeners(t *testing.T) {
	g := startTLSGateway(t, "", "")
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cfg := g.clientConfig()
		cfg.MaxVersion = v
		client := g.httpClient(cfg)
		for i := range 3 { // one keep-alive connection
			resp, err := client.Post("https://"+g.https+"/echo", "text/plain", strings.NewReader(fmt.Sprint("body ", i)))
			if err != nil {
				t.Fatalf("version %x: %v", v, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := fmt.Sprintf("POST /echo 6:body %d", i); string(body) != want || resp.TLS.Version != v {
				t.Fatalf("got %q over %x, want %q over %x", body, resp.TLS.Version, want, v)
			}
		}
		// A body of many records each way, and a response that outgrows
		// max_conn_buffer's share in memory.
		big := bytes.Repeat([]byte("x"), 1<<20)
		resp, err := client.Post("https://"+g.https+"/up", "text/plain", bytes.NewReader(big))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.HasSuffix(body, big) || !bytes.HasPrefix(body, []byte("POST /up 1048576:")) {
			t.Fatalf("1 MiB body: got %d bytes", len(body))
		}
		resp, err = client.Get("https://" + g.https + "/big")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if len(body) != 4<<20 {
			t.Fatalf("4 MiB response: got %d bytes", len(body))
		}
		client.CloseIdleConnections()
	}
	if f := fetch("http://" + g.plain + "/plain"); f.err != nil || string(f.body) != "GET /plain 0:" {
		t.Fatalf("plain listener: %v %q", f.err, f.body)
	}
	// Plain HTTP on the HTTPS port is not served.
	c, err := net.DialTimeout("tcp", g.https, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprint(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	if b, _ := io.ReadAll(c); bytes.Contains(b, []byte("HTTP/1.1")) {
		t.Fatalf("plain HTTP answered on the HTTPS port: %q", b)
	}
}

// The forwarded filter (on by default) tells the upstream the scheme the
// request came in on: https through the HTTPS listener, http through the
// plain one, whatever a client that is no trusted proxy claims. From a
// trusted proxy, its own X-Forwarded-Proto is kept, and without one the
// listener's scheme is sent.
func TestForwardedProtoByListener(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		top := ""
		if trusted {
			top = `trusted_proxies: ["127.0.0.1/32"]`
		}
		g := startTLSGateway(t, "", top)
		client := g.httpClient(g.clientConfig())
		get := func(url, claim string) string {
			t.Helper()
			req, err := http.NewRequest("GET", url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if claim != "" {
				req.Header.Set("X-Forwarded-Proto", claim)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.Header.Get("X-Got-Proto")
		}
		for _, tc := range []struct{ url, claim, want string }{
			{"https://" + g.https + "/p", "", "https"},
			{"https://" + g.https + "/p", "http", map[bool]string{false: "https", true: "http"}[trusted]},
			{"http://" + g.plain + "/p", "", "http"},
			{"http://" + g.plain + "/p", "https", map[bool]string{false: "http", true: "https"}[trusted]},
		} {
			if got := get(tc.url, tc.claim); got != tc.want {
				t.Errorf("trusted %v: %s claiming %q: upstream got X-Forwarded-Proto %q, want %q", trusted, tc.url, tc.claim, got, tc.want)
			}
		}
		client.CloseIdleConnections()
	}
}

// byteConn writes one byte per write, so every byte is its own segment.
type byteConn struct{ net.Conn }

func (c byteConn) Write(p []byte) (int, error) {
	for i := range p {
		if _, err := c.Conn.Write(p[i : i+1]); err != nil {
			return i, err
		}
	}
	return len(p), nil
}

func (g *tlsGateway) dialTLS(t *testing.T, cfg *tls.Config, wrap func(net.Conn) net.Conn) *tls.Conn {
	t.Helper()
	raw, err := net.DialTimeout("tcp", g.https, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		raw = wrap(raw)
	}
	c := tls.Client(raw, cfg)
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	return c
}

func readTLSResponse(t *testing.T, br *bufio.Reader) (*http.Response, string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp, string(body)
}

// The hello, the request and its body all arrive one byte per segment, so
// TLS records are split at every byte; then pipelined requests are merged
// in one write.
func TestHTTPSSplitAndMergedRecords(t *testing.T) {
	g := startTLSGateway(t, "", "")
	c := g.dialTLS(t, g.clientConfig(), func(c net.Conn) net.Conn { return byteConn{c} })
	fmt.Fprint(c, "POST /slow HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\n\r\nhello")
	br := bufio.NewReader(c)
	if _, body := readTLSResponse(t, br); body != "POST /slow 5:hello" {
		t.Fatalf("got %q", body)
	}
	c2 := g.dialTLS(t, g.clientConfig(), nil)
	var reqs strings.Builder
	for i := range 20 {
		fmt.Fprintf(&reqs, "GET /p%d HTTP/1.1\r\nHost: example.test\r\n\r\n", i)
	}
	if _, err := io.WriteString(c2, reqs.String()); err != nil {
		t.Fatal(err)
	}
	br = bufio.NewReader(c2)
	for i := range 20 {
		if _, body := readTLSResponse(t, br); body != fmt.Sprintf("GET /p%d 0:", i) {
			t.Fatalf("pipelined %d: got %q", i, body)
		}
	}
}

// A client that never finishes its handshake is cut at tls_handshake;
// one that finishes is served meanwhile.
func TestHTTPSHandshakeTimeout(t *testing.T) {
	g := startTLSGateway(t, "", "timeouts: {tls_handshake: 300ms}")
	stalled, err := net.DialTimeout("tcp", g.https, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	_, _ = stalled.Write([]byte{0x16, 0x03, 0x01})
	_ = stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadAll(stalled); err != nil {
		t.Fatalf("want the gateway to close the stalled handshake, got %v", err)
	}
	c := g.dialTLS(t, g.clientConfig(), nil)
	fmt.Fprint(c, "GET /ok HTTP/1.1\r\nHost: example.test\r\n\r\n")
	if _, body := readTLSResponse(t, bufio.NewReader(c)); body != "GET /ok 0:" {
		t.Fatalf("got %q", body)
	}
	metrics := g.metrics()
	for _, want := range []string{
		`loopgate_tls_handshakes_total{peer="client",result="timeout"} 1`,
		`loopgate_tls_handshakes_total{peer="client",result="ok"} 1`,
		`loopgate_tls_handshake_duration_seconds_count{peer="client"} 1`,
		`loopgate_tls_certificate_expiry_timestamp_seconds{listener="` + g.https + `",file="` + g.leaf.CertFile + `"} ` + fmt.Sprint(g.leaf.NotAfter.Unix()),
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
}

func (g *tlsGateway) metrics() string {
	var b strings.Builder
	g.srv.WriteMetrics(&b)
	return b.String()
}

// A reload reads the certificate files again: new handshakes get the new
// certificate, and a connection opened before keeps being served.
func TestHTTPSCertificateReload(t *testing.T) {
	g := startTLSGateway(t, "", "")
	old := g.dialTLS(t, g.clientConfig(), nil)
	oldBR := bufio.NewReader(old)
	serial := func(c *tls.Conn) string { return c.ConnectionState().PeerCertificates[0].SerialNumber.String() }
	before := serial(old)

	next := g.ca.Leaf(tlstest.LeafOptions{Names: []string{"example.test"}})
	copyFile(t, next.CertFile, g.leaf.CertFile)
	copyFile(t, next.KeyFile, g.leaf.KeyFile)
	cfg, err := config.Parse([]byte(g.yaml))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.srv.Reload(cfg); err != nil {
		t.Fatal(err)
	}
	fresh := g.dialTLS(t, g.clientConfig(), nil)
	if after := serial(fresh); after == before {
		t.Fatalf("a handshake after the reload still got certificate %s", before)
	}
	fmt.Fprint(old, "GET /still HTTP/1.1\r\nHost: example.test\r\n\r\n")
	if _, body := readTLSResponse(t, oldBR); body != "GET /still 0:" {
		t.Fatalf("the connection opened before the reload: %q", body)
	}
	// A reload with a broken certificate is refused and the running one stays.
	if err := os.WriteFile(g.leaf.KeyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := g.srv.Reload(cfg); err == nil || !strings.Contains(err.Error(), g.leaf.CertFile) {
		t.Fatalf("reload with a broken key: %v", err)
	}
	if again := g.dialTLS(t, g.clientConfig(), nil); serial(again) != serial(fresh) {
		t.Fatal("a refused reload changed the certificate")
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestHTTPSMutualTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "clients CA")
	g := startTLSGateway(t, "      client_auth: {ca: "+ca.File+"}", "")
	alice := ca.Leaf(tlstest.LeafOptions{Names: []string{"alice"}, Client: true})
	cfg := g.clientConfig()
	cfg.Certificates = []tls.Certificate{alice.TLS}
	resp, err := g.httpClient(cfg).Get("https://" + g.https + "/mtls")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if _, err := g.httpClient(g.clientConfig()).Get("https://" + g.https + "/mtls"); err == nil {
		t.Fatal("a client without a certificate was served")
	}
}

// -check and Compile name a bad certificate file.
func TestHTTPSCompileNamesTheFile(t *testing.T) {
	ca := tlstest.NewCA(t, "check CA")
	expired := ca.Leaf(tlstest.LeafOptions{Names: []string{"old.test"}, Expired: true})
	other := ca.Leaf(tlstest.LeafOptions{Names: []string{"other.test"}})
	for name, files := range map[string][2]string{
		"expired":      {expired.CertFile, expired.KeyFile},
		"key mismatch": {expired.CertFile, other.KeyFile},
		"missing":      {"/nonexistent/cert.pem", other.KeyFile},
	} {
		cfg, err := config.Parse([]byte(fmt.Sprintf("listeners:\n  - address: 127.0.0.1:0\n    tls:\n      certificates: [{cert: %s, key: %s}]\n", files[0], files[1])))
		if err != nil {
			t.Fatal(err)
		}
		_, err = engine.Compile(cfg)
		if err == nil || !strings.Contains(err.Error(), files[0]) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// The access log names the TLS version, cipher and SNI of HTTPS requests,
// and leaves them out of plain ones.
func TestHTTPSAccessLog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	g := startTLSGateway(t, "", fmt.Sprintf("access_log: {path: %q}", path))
	cfg := g.clientConfig()
	cfg.MaxVersion = tls.VersionTLS12
	cfg.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}
	resp, err := g.httpClient(cfg).Get("https://" + g.https + "/logged")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if f := fetch("http://" + g.plain + "/plain"); f.err != nil {
		t.Fatal(f.err)
	}
	lines := waitLines(t, "access", 2, func() []byte { b, _ := os.ReadFile(path); return b })
	https := byPath(t, lines, "/logged")
	if https["tls_version"] != "TLS 1.2" || https["tls_cipher"] != "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256" || https["sni"] != "example.test" {
		t.Errorf("HTTPS line: %v", https)
	}
	if plain := byPath(t, lines, "/plain"); plain["tls_version"] != nil || plain["sni"] != nil {
		t.Errorf("plain line: %v", plain)
	}
}

// A plain listener with redirect_https sends every request to HTTPS; a
// route with tls: https_only redirects plain requests to the HTTPS
// listener; tls: client_cert refuses HTTPS without a client certificate;
// hsts is on every response of the HTTPS listener, local replies too.
func TestHTTPSRedirectsAndRouteDemands(t *testing.T) {
	ca := tlstest.NewCA(t, "clients CA")
	g := startTLSGatewayWith(t, tlsGatewayOptions{
		tls: "      hsts: max-age=63072000; includeSubDomains\n      client_auth: {ca: " + ca.File + ", mode: optional, subject_header: X-Client-Subject, sans_header: X-Client-Sans}",
		routes: `  - {path: /secure, upstream: u, tls: https_only}
  - {path: /certified, upstream: u, tls: client_cert}`,
	})
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	_, httpsPort, _ := net.SplitHostPort(g.https)
	resp, err := noRedirect.Get("http://" + g.plain + "/secure?a=1")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if want := "https://127.0.0.1:" + httpsPort + "/secure?a=1"; resp.StatusCode != 308 || resp.Header.Get("Location") != want {
		t.Fatalf("plain /secure: %d %q, want 308 %q", resp.StatusCode, resp.Header.Get("Location"), want)
	}
	if f := fetch("http://" + g.plain + "/open"); f.err != nil || f.resp.StatusCode != 200 {
		t.Fatalf("plain /open: %+v", f)
	}

	anon := g.httpClient(g.clientConfig())
	resp, err = anon.Get("https://" + g.https + "/secure")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Strict-Transport-Security") != "max-age=63072000; includeSubDomains" {
		t.Fatalf("https /secure: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	resp, err = anon.Get("https://" + g.https + "/certified")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 403 || !strings.Contains(string(body), `"code":40306`) || resp.Header.Get("Strict-Transport-Security") == "" {
		t.Fatalf("https /certified without a certificate: %d %q %v", resp.StatusCode, body, resp.Header)
	}

	alice := ca.Leaf(tlstest.LeafOptions{Names: []string{"alice.example", "alice@example.test"}, Client: true})
	cfg := g.clientConfig()
	cfg.Certificates = []tls.Certificate{alice.TLS}
	req, _ := http.NewRequest("GET", "https://"+g.https+"/certified", nil)
	req.Header.Set("X-Client-Subject", "CN=forged") // a client's copy is dropped
	resp, err = g.httpClient(cfg).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Got-Subject") != "CN=alice.example,O=loopgate test" || resp.Header.Get("X-Got-Sans") != "alice.example,alice@example.test" {
		t.Fatalf("https /certified with a certificate: %d, subject %q, sans %q", resp.StatusCode, resp.Header.Get("X-Got-Subject"), resp.Header.Get("X-Got-Sans"))
	}
	// The plain listener never forwards a client's copy either.
	req, _ = http.NewRequest("GET", "http://"+g.plain+"/open", nil)
	req.Header.Set("X-Client-Subject", "CN=forged")
	resp, err = testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Got-Subject"); got != "" {
		t.Fatalf("a plain client's subject header reached the upstream: %q", got)
	}
}

func TestHTTPSRedirectListener(t *testing.T) {
	g := startTLSGatewayWith(t, tlsGatewayOptions{plain: "    redirect_https: 443"})
	c := mustDialPlain(t, g.plain)
	fmt.Fprint(c, "GET /x/y?q=1 HTTP/1.1\r\nHost: Example.Test:8080\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 308 || resp.Header.Get("Location") != "https://example.test/x/y?q=1" || !strings.Contains(string(body), `"code":30801`) {
		t.Fatalf("got %d %q %q", resp.StatusCode, resp.Header.Get("Location"), body)
	}
}

func mustDialPlain(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// Thousands of clients start a handshake and stall: past max_handshakes
// they are refused at accept, the memory held grows with the handshakes
// in progress only, and an established connection is served throughout.
func TestHTTPSHandshakeFloodBoundedMemory(t *testing.T) {
	const pending, flood = 500, 3000
	g := startTLSGateway(t, "", fmt.Sprintf("tls: {max_handshakes: %d, handshake_workers: 1}", pending))
	good := g.dialTLS(t, g.clientConfig(), nil)
	goodBR := bufio.NewReader(good)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	conns := make([]net.Conn, 0, flood)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range flood {
		c, err := net.DialTimeout("tcp", g.https, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		_, _ = c.Write([]byte{0x16, 0x03, 0x01}) // a record header, then nothing
	}
	metric := func(name string) int {
		for _, line := range strings.Split(g.metrics(), "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				n, _ := strconv.Atoi(v)
				return n
			}
		}
		return -1
	}
	waitFor(t, "the flood accepted or refused", func() bool {
		return metric(`loopgate_tls_handshakes_in_progress`) == pending &&
			metric(`loopgate_tls_handshakes_total{peer="client",result="refused"}`) == flood-pending
	})
	fmt.Fprint(good, "GET /during HTTP/1.1\r\nHost: example.test\r\n\r\n")
	if _, body := readTLSResponse(t, goodBR); body != "GET /during 0:" {
		t.Fatalf("the established connection during the flood: %q", body)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapInuse+after.StackInuse) - int64(before.HeapInuse+before.StackInuse)
	perPending := grown / pending
	t.Logf("heap+stack grew %d KiB for %d handshakes in progress and %d refused (%d KiB each in progress, the test's own client sockets included)",
		grown>>10, pending, flood-pending, perPending>>10)
	// A handshake in progress holds a goroutine, its Session and tls.Conn
	// and a client connection; nothing may scale with the refused ones.
	if perPending > 64<<10 {
		t.Errorf("%d KiB per handshake in progress", perPending>>10)
	}
}

// tlsUpstream runs an HTTPS upstream with a certificate of ca for
// 127.0.0.1; it answers with what it saw of the connection. Without
// keepAlive it closes every connection after its response.
func tlsUpstream(t *testing.T, ca *tlstest.CA, clientCAs *x509.CertPool, keepAlive bool) string {
	t.Helper()
	leaf := ca.Leaf(tlstest.LeafOptions{Names: []string{"127.0.0.1", "upstream.test"}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{leaf.TLS}}
	if clientCAs != nil {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, clientCAs
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		peer := ""
		if len(r.TLS.PeerCertificates) > 0 {
			peer = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		fmt.Fprintf(w, "%s sni=%s resumed=%v peer=%s conn=%s %d", tls.VersionName(r.TLS.Version), r.TLS.ServerName, r.TLS.DidResume, peer, r.RemoteAddr, len(body))
	}), TLSConfig: cfg}
	srv.SetKeepAlivesEnabled(keepAlive)
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func TestUpstreamTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "upstream CA")
	clients := tlstest.NewCA(t, "gateway client CA")
	gwCert := clients.Leaf(tlstest.LeafOptions{Names: []string{"gateway"}, Client: true})
	up := tlsUpstream(t, ca, nil, true)
	mtlsUp := tlsUpstream(t, ca, clients.Pool(), true)
	closing := tlsUpstream(t, ca, nil, false)
	g := startGateway(t, `
upstreams:
  - {name: verified, nodes: ["%[1]s"], tls: {ca: %[2]s}}
  - {name: named, nodes: ["%[1]s"], tls: {ca: %[2]s, server_name: upstream.test}}
  - {name: system, nodes: ["%[1]s"], tls: {}}
  - {name: insecure, nodes: ["%[1]s"], tls: {insecure_skip_verify: true}}
  - {name: plain, nodes: ["%[1]s"]}
  - {name: mtls, nodes: ["%[3]s"], tls: {ca: %[2]s, client_cert: %[4]s, client_key: %[5]s}}
  - {name: mtls-without, nodes: ["%[3]s"], tls: {ca: %[2]s}}
  - {name: resume, nodes: ["%[6]s"], tls: {ca: %[2]s}}
routes:
  - {prefix: /resume, upstream: resume}
  - {prefix: /verified, upstream: verified}
  - {prefix: /named, upstream: named}
  - {prefix: /system, upstream: system}
  - {prefix: /insecure, upstream: insecure}
  - {prefix: /plain, upstream: plain}
  - {prefix: /mtls, upstream: mtls}
  - {prefix: /nocert, upstream: mtls-without}
`, up, ca.File, mtlsUp, gwCert.CertFile, gwCert.KeyFile, closing)

	get := func(path string) (int, string) {
		t.Helper()
		f := fetch(g.url(path))
		if f.err != nil {
			t.Fatal(f.err)
		}
		return f.resp.StatusCode, string(f.body)
	}
	code, body := get("/verified/a")
	// No SNI for an IP address (RFC 6066); the certificate's IP SAN is verified.
	if code != 200 || !strings.HasPrefix(body, "TLS 1.3 sni= resumed=false peer= ") {
		t.Fatalf("verified: %d %q", code, body)
	}
	conn := strings.Fields(body)[5]
	// Keep-alive: the next request rides the same pooled TLS connection.
	if _, again := get("/verified/b"); strings.Fields(again)[5] != conn {
		t.Errorf("a second request dialed again: %q then %q", body, again)
	}
	// The "resume" upstream closes every connection after its response:
	// each request dials again, and resumes the session of the last one.
	if code, body := get("/resume/1"); code != 200 || !strings.Contains(body, "resumed=false") {
		t.Fatalf("resume 1: %d %q", code, body)
	}
	if code, body := get("/resume/2"); code != 200 || !strings.Contains(body, "resumed=true") {
		t.Errorf("resume 2: %d %q", code, body)
	}
	var page strings.Builder
	g.srv.WriteMetrics(&page)
	for _, want := range []string{`loopgate_tls_resumed_handshakes_total{peer="upstream"} 1`, `loopgate_tls_handshake_versions_total{peer="upstream",version="1.3"} 3`} {
		if !strings.Contains(page.String(), want+"\n") {
			t.Errorf("metrics lack %s", want)
		}
	}
	if code, body := get("/named/x"); code != 200 || !strings.Contains(body, " sni=upstream.test ") {
		t.Errorf("server_name: %d %q", code, body)
	}
	if code, body := get("/insecure/x"); code != 200 {
		t.Errorf("insecure_skip_verify: %d %q", code, body)
	}
	if code, body := get("/mtls/x"); code != 200 || !strings.Contains(body, "peer=gateway") {
		t.Errorf("upstream mTLS: %d %q", code, body)
	}
	if code, _ := get("/plain/x"); code != 400 { // the node's own answer to plain HTTP
		t.Errorf("plain HTTP to a TLS node: %d", code)
	}
	for _, path := range []string{"/system/x", "/nocert/x"} {
		if code, body := get(path); code != 502 || !strings.Contains(body, `"code":50201`) && !strings.Contains(body, `"code":50202`) {
			t.Errorf("%s: %d %q, want 502", path, code, body)
		}
	}
	// A body of many records each way.
	big := bytes.Repeat([]byte("y"), 1<<20)
	resp, err := testClient.Post(g.url("/verified/big"), "text/plain", bytes.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasSuffix(string(got), " 1048576") {
		t.Fatalf("1 MiB body to the TLS upstream: %d %q", resp.StatusCode, got)
	}
}

// A keep-alive HTTPS round trip allocates two objects in the whole
// process: one in the test's Go client and one in the gateway, both the
// 16-byte atLeastReader crypto/tls's readFromUntil makes whenever a Read
// needs bytes from its connection (it escapes through io.Reader). The
// gateway calls Read once per request, only when a whole record is there
// (tlsedge's pipe); everything else on the HTTPS path allocates nothing,
// as on the plain one (TestProxyAllocs). A memory profile of this test
// shows the split.
func TestHTTPSProxyAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	pool.SetLeakDetection(false) // leak tracking records a stack per buffer
	t.Cleanup(func() { pool.SetLeakDetection(true) })
	ca := tlstest.NewCA(t, "allocs CA")
	leaf := ca.Leaf(tlstest.LeafOptions{Names: []string{"example.test"}})
	up := startRawUpstream(t, rawBenchUpstream)
	cfg, err := config.Parse([]byte(fmt.Sprintf(`admin: "off"
loops: 1
listeners:
  - address: 127.0.0.1:0
    tls: {certificates: [{cert: %s, key: %s}]}
`+oneRoute, leaf.CertFile, leaf.KeyFile, up)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	addr := engine.ServeForTest(t, srv)
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), ServerName: "example.test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, 4096)
	if _, err := c.Write(benchRequest); err != nil {
		t.Fatal(err)
	}
	want, err := io.ReadAtLeast(c, buf, 12)
	if err != nil || !bytes.HasPrefix(buf, []byte("HTTP/1.1 200")) {
		t.Fatalf("first response %q: %v", buf[:want], err)
	}
	roundTrip := func() {
		if _, err := c.Write(benchRequest); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadAtLeast(c, buf, want); err != nil {
			t.Fatal(err)
		}
	}
	for range 1000 {
		roundTrip()
	}
	if n := testing.AllocsPerRun(2000, roundTrip); n > 2 {
		t.Errorf("%v allocations per HTTPS round trip, want 2 (the client's and the gateway's crypto/tls Read)", n)
	}
}

// A WebSocket tunnel from an HTTPS client to a TLS upstream: each side's
// records are its own, the tunnel carries the plaintext both ways, bytes
// sent one at a time and bytes right behind the upgrade request included.
func TestHTTPSTunnelToTLSUpstream(t *testing.T) {
	ca := tlstest.NewCA(t, "tunnel CA")
	upLeaf := ca.Leaf(tlstest.LeafOptions{Names: []string{"127.0.0.1"}})
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{upLeaf.TLS}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"+
					"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
				io.Copy(c, br)
			}()
		}
	}()
	g := startTLSGatewayWith(t, tlsGatewayOptions{
		upstreams: fmt.Sprintf("  - {name: wss, nodes: [\"%s\"], tls: {ca: %s}}", ln.Addr(), ca.File),
		routes:    "  - {prefix: /ws, upstream: wss}",
	})
	c := g.dialTLS(t, g.clientConfig(), nil)
	fmt.Fprint(c, upgradeRequest("/ws/chat")+"early|")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil || resp.StatusCode != 101 {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	expectEcho(t, br, "early|")
	msg := "one byte at a time"
	for i := 0; i < len(msg); i++ {
		if _, err := c.Write([]byte{msg[i]}); err != nil {
			t.Fatal(err)
		}
		expectEcho(t, br, msg[i:i+1])
	}
	big := strings.Repeat("z", 300<<10)
	if _, err := io.WriteString(c, big); err != nil {
		t.Fatal(err)
	}
	expectEcho(t, br, big)
	c.Close()
	waitFor(t, "the tunnel to close", func() bool { return g.srv.Tunnels() == 0 })
}

// tls.handshake_priority defaults to auto: nice where the process may
// lower a thread's priority and raise it again (TestHandshakeComputesAtItsPriority in
// tlsedge shows each priority taking effect through real handshakes), else
// normal; the explicit values are what they say.
func TestHandshakePriorityDefaultsToAuto(t *testing.T) {
	cfg, err := config.Parse([]byte("listen: 127.0.0.1:0\n"))
	if err != nil {
		t.Fatal(err)
	}
	auto := tlsedge.PriorityNormal
	if tlsedge.PriorityAvailable(tlsedge.PriorityNice) {
		auto = tlsedge.PriorityNice
	}
	if cfg.TLS.HandshakePriority != config.PriorityAuto {
		t.Errorf("default handshake_priority %q, want auto", cfg.TLS.HandshakePriority)
	}
	for v, want := range map[string]tlsedge.Priority{
		config.PriorityAuto:   auto,
		config.PriorityNormal: tlsedge.PriorityNormal,
		config.PriorityNice:   tlsedge.PriorityNice,
		config.PriorityLow:    tlsedge.PriorityIdle,
	} {
		if got := engine.HandshakePriority(v); got != want {
			t.Errorf("handshake_priority %q: Runner priority %d, want %d", v, got, want)
		}
	}
}
