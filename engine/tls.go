// TLS at the edge: which listener a connection arrived on, the HTTPS
// listeners' tls.Configs and certificates (loaded with each config
// version), the handshake Runner, and the TLS series.

package engine

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/loopgate/loopgate/upstream"
	"github.com/panjf2000/gnet/v2"
)

// edge is the Server's listeners. Immutable after New.
type edge struct {
	addrs    []string         // resolved "host:port", in config order
	bound    []netip.AddrPort // the same, parsed; an unspecified address matches any
	configs  []*tls.Config    // per listener; nil for a plain one
	runner   *tlsedge.Runner  // the HTTPS listeners' handshakes
	upRunner *tlsedge.Runner  // the handshakes with upstream nodes: runner's twin
	anyTLS   bool

	// Per listener: redirect_https's port (0: none), the rendered
	// Strict-Transport-Security line (nil: none), and the names of the
	// client certificate headers ("": not sent).
	redirect            []int
	hsts                [][]byte
	subjectHdr, sansHdr []string
	httpsPort           int // the first HTTPS listener's port, for routes with tls: https_only
}

// newEdge resolves the listeners' addresses (port 0 to a free port) and
// makes each HTTPS listener's one tls.Config, whose certificates come
// from the running config version.
func newEdge(s *Server, cfg *config.Config) (*edge, error) {
	ls := cfg.ClientListeners()
	n := len(ls)
	e := &edge{configs: make([]*tls.Config, n), redirect: make([]int, n), hsts: make([][]byte, n),
		subjectHdr: make([]string, n), sansHdr: make([]string, n)}
	for i, l := range ls {
		addr, err := resolveListen(l.Address)
		if err != nil {
			return nil, err
		}
		ap, err := netip.ParseAddrPort(addr)
		if err != nil {
			// A host name: resolved by gnet when it binds; matched by port.
			_, port, _ := net.SplitHostPort(addr)
			p, _ := strconv.ParseUint(port, 10, 16)
			ap = netip.AddrPortFrom(netip.IPv6Unspecified(), uint16(p))
		}
		e.addrs = append(e.addrs, addr)
		e.bound = append(e.bound, netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()))
		e.redirect[i] = l.RedirectHTTPS
		if l.TLS == nil {
			continue
		}
		if !e.anyTLS {
			e.httpsPort = int(ap.Port())
		}
		e.anyTLS = true
		if l.TLS.HSTS != "" {
			e.hsts[i] = []byte("Strict-Transport-Security: " + l.TLS.HSTS + "\r\n")
		}
		if a := l.TLS.ClientAuth; a != nil {
			e.subjectHdr[i], e.sansHdr[i] = a.SubjectHeader, a.SANsHeader
		}
		index := i
		e.configs[i] = tlsedge.NewServerConfig(serverOptions(l.TLS), func() *tlsedge.ServerState {
			return s.state.Load().snap.tls[index]
		})
	}
	// Always made: a reload may add an upstream that speaks TLS.
	e.runner = tlsedge.NewRunner(tlsedge.RunnerOptions{Workers: cfg.TLS.Workers(), MaxPending: cfg.TLS.MaxHandshakes,
		Priority: HandshakePriority(cfg.TLS.HandshakePriority)})
	e.upRunner = e.runner.Twin()
	return e, nil
}

// HandshakePriority is tls.handshake_priority as the Runner takes it:
// auto is nice where this process may lower a thread's priority and
// raise it again (the first call probes), else normal.
func HandshakePriority(v string) tlsedge.Priority {
	switch v {
	case config.PriorityNice:
		return tlsedge.PriorityNice
	case config.PriorityLow:
		return tlsedge.PriorityIdle
	case config.PriorityAuto:
		if tlsedge.PriorityAvailable(tlsedge.PriorityNice) {
			return tlsedge.PriorityNice
		}
	}
	return tlsedge.PriorityNormal
}

func serverOptions(t *config.ListenerTLS) tlsedge.ServerOptions {
	o := tlsedge.ServerOptions{MinVersion: tls.VersionTLS12}
	if t.MinVersion == config.TLS13 {
		o.MinVersion = tls.VersionTLS13
	}
	if a := t.ClientAuth; a != nil {
		o.ClientAuth = tlsedge.ClientAuthRequire
		if a.Mode == config.ClientAuthOptional {
			o.ClientAuth = tlsedge.ClientAuthOptional
		}
	}
	return o
}

// listenerOf returns the index of the listener c arrived on: the one
// bound to c's local address exactly, else one bound to the unspecified
// address on its port. With one listener it is 0 without looking.
func (e *edge) listenerOf(c gnet.Conn) int {
	if len(e.bound) == 1 {
		return 0
	}
	ta, ok := c.LocalAddr().(*net.TCPAddr)
	if !ok {
		return 0
	}
	ip, _ := netip.AddrFromSlice(ta.IP)
	ip = ip.Unmap()
	wild := -1
	for i, b := range e.bound {
		if b.Port() != uint16(ta.Port) {
			continue
		}
		if b.Addr() == ip {
			return i
		}
		if b.Addr().IsUnspecified() && wild < 0 {
			wild = i
		}
	}
	return max(wild, 0)
}

// compileTLS loads every HTTPS listener's certificates and client CAs for
// a config version, validating them (see tlsedge.LoadCertificates); the
// result is indexed like cfg.ClientListeners(), nil for plain listeners.
// A reload reads the files again, so a renewed certificate is picked up
// by SIGHUP or POST /reload.
func compileTLS(cfg *config.Config) ([]*tlsedge.ServerState, error) {
	ls := cfg.ClientListeners()
	out := make([]*tlsedge.ServerState, len(ls))
	var errs compileErrors
	now := time.Now()
	for i, l := range ls {
		if l.TLS == nil {
			continue
		}
		files := make([]tlsedge.CertFile, len(l.TLS.Certificates))
		for j, c := range l.TLS.Certificates {
			files[j] = tlsedge.CertFile{Cert: c.Cert, Key: c.Key}
		}
		st := &tlsedge.ServerState{}
		var err error
		if st.Certs, err = tlsedge.LoadCertificates(files, now); err != nil {
			errs = append(errs, fmt.Errorf("engine: listeners[%d] (%s): %w", i, l.Address, err))
		}
		if a := l.TLS.ClientAuth; a != nil {
			if st.ClientCAs, err = tlsedge.LoadPool(a.CA); err != nil {
				errs = append(errs, fmt.Errorf("engine: listeners[%d] (%s).client_auth: %w", i, l.Address, err))
			}
		}
		out[i] = st
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}

// TLS is the loop's part in upstream TLS connections (upstream.Host).
func (l *loop) TLS() upstream.TLSEnv {
	return upstream.TLSEnv{Post: l.tls.post, Runner: l.srv.edge.upRunner, Scratch: &l.tls.scratch}
}

// upstreamTLS builds an upstream's client tls.Config from its files, read
// when a config version is compiled (so a reload reads them again). The
// session cache is per config version: a reload starts resumption to the
// nodes over.
func upstreamTLS(u *config.Upstream) (*tls.Config, error) {
	t := u.TLS
	o := tlsedge.ClientOptions{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify,
		Sessions: tls.NewLRUClientSessionCache(256)}
	if t.CA != "" {
		pool, err := tlsedge.LoadPool(t.CA)
		if err != nil {
			return nil, err
		}
		o.RootCAs = pool
	}
	if t.ClientCert != "" {
		certs, err := tlsedge.LoadCertificates([]tlsedge.CertFile{{Cert: t.ClientCert, Key: t.ClientKey}}, time.Now())
		if err != nil {
			return nil, err
		}
		o.Certificate = certs.Choose(&tls.ClientHelloInfo{})
	}
	return tlsedge.NewClientConfig(o), nil
}

// loopTLS is a loop's part in its TLS sessions. Owned by the loop.
type loopTLS struct {
	scratch tlsedge.Scratch // records of the Write in progress
	post    tlsedge.Post    // runs a session's function on this loop, inside enter/leave
}

func (l *loop) initTLS() {
	l.tls.post = func(f func()) error {
		el := l.eventLoop()
		if el == nil {
			return net.ErrClosed
		}
		return el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			l.enter()
			f()
			l.leave()
			return nil
		}))
	}
}

// startTLS begins the handshake of a client on an HTTPS listener. It
// reports false when the Runner refuses it (max_handshakes in progress).
// No request deadline runs until the handshake ends: timeouts.tls_handshake
// bounds it, and header_read starts after it (HandshakeDone).
func (cc *clientConn) startTLS(cfg *tls.Config) bool {
	l := cc.loop
	c := cc.gc
	cc.tls = tlsedge.NewServer(cfg, c, c.LocalAddr(), c.RemoteAddr(), l.tls.post, cc, l.srv.edge.runner, &l.tls.scratch)
	cc.tlsSink = tlsSink{s: cc.tls, gc: c}
	return cc.tls.Start(l.current().timeouts.tlsHandshake) == nil
}

// HandshakeDone is the end of the client's TLS handshake (tlsedge.Handler),
// on the loop: a failure closes the connection (the alert is already
// queued); success starts the header_read deadline and serves what the
// client sent along.
func (cc *clientConn) HandshakeDone(err error) {
	if cc.state == stateClosed {
		return
	}
	if err != nil {
		cc.close()
		return
	}
	st := cc.tls.State()
	cc.tlsLog = tlsLog{version: tls.VersionName(st.Version), cipher: tls.CipherSuiteName(st.CipherSuite), sni: st.ServerName}
	if len(st.PeerCertificates) > 0 { // verified: the handshake checked it against client_auth.ca
		e := cc.loop.srv.edge
		cc.certHeaders = appendCertHeaders(nil, e.subjectHdr[cc.listener], e.sansHdr[cc.listener], st.PeerCertificates[0])
	}
	cc.idle(cc.loop.current().timeouts.headerRead)
	cc.headClock = true
	cc.traffic()
}

// appendCertHeaders renders the header lines that carry cert's subject and
// SANs upstream, once per connection; a name "" leaves its line out.
// Control characters in a certificate's names are left out, so a line
// stays one line.
func appendCertHeaders(dst []byte, subjectHdr, sansHdr string, cert *x509.Certificate) []byte {
	line := func(name, value string) {
		if name == "" {
			return
		}
		dst = append(dst, name...)
		dst = append(dst, ": "...)
		for i := 0; i < len(value); i++ {
			if c := value[i]; c >= 0x20 && c != 0x7f {
				dst = append(dst, c)
			}
		}
		dst = append(dst, "\r\n"...)
	}
	line(subjectHdr, cert.Subject.String())
	var sans []string
	sans = append(sans, cert.DNSNames...)
	sans = append(sans, cert.EmailAddresses...)
	for _, u := range cert.URIs {
		sans = append(sans, u.String())
	}
	for _, ip := range cert.IPAddresses {
		sans = append(sans, ip.String())
	}
	line(sansHdr, strings.Join(sans, ","))
	return dst
}

// Route.tls: what a route demands of the client's connection.
const (
	routeTLSAny     uint8 = iota
	routeHTTPSOnly        // tls: https_only
	routeClientCert       // tls: client_cert
)

func routeTLS(v string) uint8 {
	switch v {
	case config.RouteHTTPSOnly:
		return routeHTTPSOnly
	case config.RouteClientCert:
		return routeClientCert
	}
	return routeTLSAny
}

// refusedByRouteTLS answers a request whose connection does not meet its
// route's tls demand, and reports whether it did: a plain request is
// redirected to the first HTTPS listener, an HTTPS one without a verified
// client certificate on a client_cert route is refused.
func (ex *exchange) refusedByRouteTLS(req *codec.Request) bool {
	cc := ex.cc
	switch {
	case cc.tls == nil:
		ex.redirectHTTPS(req, cc.loop.srv.edge.httpsPort)
		return true
	case ex.route.tls == routeClientCert && len(cc.tls.State().PeerCertificates) == 0:
		ex.localReply(errClientCertRequired)
		return true
	}
	return false
}

var errClientCertRequired = &codec.Error{Status: 403, Code: 40306, Message: "this route needs a client certificate"}

// redirectHTTPS answers a plain request with 308 to the same host and
// target over HTTPS on port (443 is left out of the URL), code 30801. The
// Location is built per redirect: this is not a hot path.
func (ex *exchange) redirectHTTPS(req *codec.Request, port int) {
	if len(req.Host) == 0 {
		ex.localReply(errRedirectNoHost)
		return
	}
	loc := make([]byte, 0, 16+len(req.Host)+len(req.Path)+len(req.Query))
	loc = append(loc, "https://"...)
	loc = append(loc, req.Host...)
	if port != 443 {
		loc = append(loc, ':')
		loc = strconv.AppendInt(loc, int64(port), 10)
	}
	loc = append(loc, req.Path...)
	if len(req.Query) > 0 {
		loc = append(loc, '?')
		loc = append(loc, req.Query...)
	}
	ex.fx.Rejection.AddHeader("Location", loc)
	ex.localReply(errUseHTTPS)
}

var (
	errUseHTTPS       = &codec.Error{Status: 308, Code: 30801, Message: "use HTTPS"}
	errRedirectNoHost = &codec.Error{Status: 400, Code: 40001, Message: "a request without Host cannot be redirected to HTTPS"}
)

// tlsLog is a TLS connection's access-log fields, made once per
// connection so a request copies three strings.
type tlsLog struct{ version, cipher, sni string }

// writeTLSSeries writes the TLS series: handshakes by peer (client, or
// upstream node) and result, by version, resumptions, handshakes in
// progress and computing, handshake durations, and each certificate's
// expiry. Written once a listener serves HTTPS or an upstream handshake
// was made.
func (s *Server) writeTLSSeries(w io.Writer) {
	cl, up := s.edge.runner.Stats(), s.edge.upRunner.Stats()
	if !s.edge.anyTLS && up.OK+up.Failed+up.TimedOut+up.Refused+uint64(up.Pending) == 0 {
		return
	}
	peers := []struct {
		name string
		st   *tlsedge.Stats
	}{{"client", &cl}, {"upstream", &up}}
	p := newPromWriter(w)
	p.family("loopgate_tls_handshakes_total", "counter", "TLS handshakes, by peer (client, or upstream node) and result: ok, failed (a bad or plain-HTTP hello, no common version or suite, a certificate refused, the peer gone), timeout (timeouts.tls_handshake, or connect_timeout to a node), refused (tls.max_handshakes in progress).")
	for _, pe := range peers {
		for _, r := range []struct {
			name string
			n    uint64
		}{{"ok", pe.st.OK}, {"failed", pe.st.Failed}, {"timeout", pe.st.TimedOut}, {"refused", pe.st.Refused}} {
			p.sample("loopgate_tls_handshakes_total", p.labels("peer", pe.name, "result", r.name), r.n)
		}
	}
	p.family("loopgate_tls_handshake_versions_total", "counter", "Successful TLS handshakes, by peer and version.")
	for _, pe := range peers {
		p.sample("loopgate_tls_handshake_versions_total", p.labels("peer", pe.name, "version", "1.2"), pe.st.TLS12)
		p.sample("loopgate_tls_handshake_versions_total", p.labels("peer", pe.name, "version", "1.3"), pe.st.TLS13)
	}
	p.family("loopgate_tls_resumed_handshakes_total", "counter", "Successful TLS handshakes that resumed a session (ticket or TLS 1.3 PSK), by peer; divided by the ok handshakes, the resumption ratio.")
	for _, pe := range peers {
		p.sample("loopgate_tls_resumed_handshakes_total", p.labels("peer", pe.name), pe.st.Resumed)
	}
	p.family("loopgate_tls_handshakes_in_progress", "gauge", "TLS handshakes begun and not ended, computing or waiting for their peer, clients and upstreams together.")
	p.gauge("loopgate_tls_handshakes_in_progress", "", cl.Pending)
	p.family("loopgate_tls_handshakes_computing", "gauge", "TLS handshakes holding one of the tls.handshake_workers.")
	p.gauge("loopgate_tls_handshakes_computing", "", cl.Active)

	const hist = "loopgate_tls_handshake_duration_seconds"
	p.family(hist, "histogram", "Time from the accept (or, to a node, the connect) to the end of a successful TLS handshake, by peer.")
	for _, pe := range peers {
		cum := uint64(0)
		for i, c := range pe.st.Durations.Counts {
			cum += c
			le := "+Inf"
			if i < len(tlsedge.HistogramBounds) {
				le = strconv.FormatFloat(tlsedge.HistogramBounds[i], 'g', -1, 64)
			}
			p.sample(hist+"_bucket", p.labels("peer", pe.name, "le", le), cum)
		}
		p.gaugeFloat(hist+"_sum", p.labels("peer", pe.name), pe.st.Durations.Sum.Seconds())
		p.sample(hist+"_count", p.labels("peer", pe.name), cum)
	}

	p.family("loopgate_tls_certificate_expiry_timestamp_seconds", "gauge", "When each listener certificate's leaf expires (Unix time); subtract time() for the seconds left.")
	snap := s.state.Load().snap
	for i, ts := range snap.tls {
		if ts == nil || ts.Certs == nil {
			continue
		}
		ts.Certs.Expiry(func(file string, notAfter time.Time) {
			p.gauge("loopgate_tls_certificate_expiry_timestamp_seconds", p.labels("listener", s.edge.addrs[i], "file", file), notAfter.Unix())
		})
	}
}
