// TLS at the edge: which listener a connection arrived on, the HTTPS
// listeners' tls.Configs and certificates (loaded with each config
// version), the handshake Runner, and the TLS series.

package engine

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/panjf2000/gnet/v2"
)

// edge is the Server's listeners. Immutable after New.
type edge struct {
	addrs   []string         // resolved "host:port", in config order
	bound   []netip.AddrPort // the same, parsed; an unspecified address matches any
	configs []*tls.Config    // per listener; nil for a plain one
	runner  *tlsedge.Runner  // every HTTPS listener's handshakes; nil without one
	anyTLS  bool
}

// newEdge resolves the listeners' addresses (port 0 to a free port) and
// makes each HTTPS listener's one tls.Config, whose certificates come
// from the running config version.
func newEdge(s *Server, cfg *config.Config) (*edge, error) {
	ls := cfg.ClientListeners()
	e := &edge{configs: make([]*tls.Config, len(ls))}
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
		if l.TLS == nil {
			continue
		}
		e.anyTLS = true
		index := i
		e.configs[i] = tlsedge.NewServerConfig(serverOptions(l.TLS), func() *tlsedge.ServerState {
			return s.state.Load().snap.tls[index]
		})
	}
	if e.anyTLS {
		e.runner = tlsedge.NewRunner(tlsedge.RunnerOptions{Workers: cfg.TLS.Workers(), MaxPending: cfg.TLS.MaxHandshakes})
	}
	return e, nil
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

// configFor returns the tls.Config of the listener c arrived on, or nil
// for a plain one: the listener bound to c's local address exactly, else
// one bound to the unspecified address on its port.
func (e *edge) configFor(c gnet.Conn) *tls.Config {
	if !e.anyTLS {
		return nil
	}
	ta, ok := c.LocalAddr().(*net.TCPAddr)
	if !ok {
		return nil
	}
	ip, _ := netip.AddrFromSlice(ta.IP)
	ip = ip.Unmap()
	wild := -1
	for i, b := range e.bound {
		if b.Port() != uint16(ta.Port) {
			continue
		}
		if b.Addr() == ip {
			return e.configs[i]
		}
		if b.Addr().IsUnspecified() && wild < 0 {
			wild = i
		}
	}
	if wild >= 0 {
		return e.configs[wild]
	}
	return nil
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
	cc.idle(cc.loop.current().timeouts.headerRead)
	cc.headClock = true
	cc.traffic()
}

// tlsLog is a TLS connection's access-log fields, made once per
// connection so a request copies three strings.
type tlsLog struct{ version, cipher, sni string }

// writeTLSSeries writes the TLS series: handshakes by result and by
// version, resumptions, handshakes in progress and computing, handshake
// durations, and each certificate's expiry.
func (s *Server) writeTLSSeries(w io.Writer) {
	if !s.edge.anyTLS {
		return
	}
	st := s.edge.runner.Stats()
	p := newPromWriter(w)
	p.family("loopgate_tls_handshakes_total", "counter", "TLS handshakes with clients, by result: ok, failed (bad hello, no shared version or suite, bad client certificate, peer gone), timeout (timeouts.tls_handshake), refused (tls.max_handshakes in progress).")
	for _, r := range []struct {
		name string
		n    uint64
	}{{"ok", st.OK}, {"failed", st.Failed}, {"timeout", st.TimedOut}, {"refused", st.Refused}} {
		p.sample("loopgate_tls_handshakes_total", p.labels("result", r.name), r.n)
	}
	p.family("loopgate_tls_handshake_versions_total", "counter", "Successful TLS handshakes with clients, by version.")
	p.sample("loopgate_tls_handshake_versions_total", p.labels("version", "1.2"), st.TLS12)
	p.sample("loopgate_tls_handshake_versions_total", p.labels("version", "1.3"), st.TLS13)
	p.family("loopgate_tls_resumed_handshakes_total", "counter", "Successful TLS handshakes that resumed a session (ticket or TLS 1.3 PSK); divided by the ok handshakes, the resumption ratio.")
	p.sample("loopgate_tls_resumed_handshakes_total", "", st.Resumed)
	p.family("loopgate_tls_handshakes_in_progress", "gauge", "TLS handshakes begun and not ended, computing or waiting for their peer.")
	p.gauge("loopgate_tls_handshakes_in_progress", "", st.Pending)
	p.family("loopgate_tls_handshakes_computing", "gauge", "TLS handshakes holding one of the tls.handshake_workers.")
	p.gauge("loopgate_tls_handshakes_computing", "", st.Active)

	const hist = "loopgate_tls_handshake_duration_seconds"
	p.family(hist, "histogram", "Time from accept to the end of a successful TLS handshake.")
	cum, total := uint64(0), uint64(0)
	for i, c := range st.Durations.Counts {
		cum += c
		le := "+Inf"
		if i < len(tlsedge.HistogramBounds) {
			le = strconv.FormatFloat(tlsedge.HistogramBounds[i], 'g', -1, 64)
		}
		p.sample(hist+"_bucket", p.labels("le", le), cum)
		total = cum
	}
	p.gaugeFloat(hist+"_sum", "", st.Durations.Sum.Seconds())
	p.sample(hist+"_count", "", total)

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
