// Listeners and TLS: the addresses clients connect to, HTTPS on them, and
// the bounds on handshakes.

package config

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// TLS versions accepted in ListenerTLS.MinVersion.
const (
	TLS12 = "1.2"
	TLS13 = "1.3"
)

// ClientAuth.Mode values.
const (
	ClientAuthRequire  = "require"  // a client without a verified certificate fails the handshake
	ClientAuthOptional = "optional" // a certificate is asked for; one sent must verify
)

// Listener is one address the gateway accepts clients on.
type Listener struct {
	// Address is "host:port"; required. As for listen, an empty host
	// binds every address and port 0 picks a free port.
	Address string `yaml:"address"`
	// TLS makes the listener HTTPS. Default absent: plain HTTP.
	TLS *ListenerTLS `yaml:"tls,omitempty"`
	// RedirectHTTPS, on a plain listener, answers every request with a
	// 308 to the same host and target over HTTPS on this port (443 leaves
	// the port out of the URL). Default 0: requests are served.
	RedirectHTTPS int `yaml:"redirect_https,omitempty"`
}

// ListenerTLS is an HTTPS listener's settings. The files are read when the
// config is loaded and again on every reload (SIGHUP, POST /reload): new
// handshakes use what was read last, open connections keep what they
// negotiated. min_version and client_auth.mode cannot change on a reload.
type ListenerTLS struct {
	// Certificates are the listener's certificates, each a PEM chain (leaf
	// first, then intermediates) and its PEM key (RSA, ECDSA or Ed25519).
	// SNI picks one: a certificate whose DNS names include the name
	// exactly, else one with a wildcard covering it, else the first; among
	// several for one name, the first the client supports (an ECDSA one
	// listed before an RSA one serves modern clients ECDSA and old ones
	// RSA). At least one is required.
	Certificates []Certificate `yaml:"certificates"`

	// MinVersion is the oldest TLS version accepted: "1.2" (default) or
	// "1.3". TLS 1.0 and 1.1 are never accepted.
	MinVersion string `yaml:"min_version"`

	// ClientAuth asks clients for certificates (mutual TLS). Default
	// absent: none are asked for.
	ClientAuth *ClientAuth `yaml:"client_auth,omitempty"`

	// HSTS is the Strict-Transport-Security value sent with every response
	// on this listener, e.g. "max-age=63072000; includeSubDomains".
	// Default "": none.
	HSTS string `yaml:"hsts,omitempty"`
}

// Certificate is one certificate chain file and its key file.
type Certificate struct {
	Cert string `yaml:"cert"` // PEM certificate chain, leaf first; required
	Key  string `yaml:"key"`  // PEM private key; required
}

// ClientAuth is mutual TLS on a listener.
type ClientAuth struct {
	CA   string `yaml:"ca"`   // PEM file of the CAs client certificates must chain to; required
	Mode string `yaml:"mode"` // "require" (default) or "optional"

	// SubjectHeader and SANsHeader name the request headers that carry a
	// verified client certificate's subject (RFC 2253, "CN=alice,O=Example")
	// and its SANs (comma-separated DNS names, e-mail addresses, URIs and
	// IP addresses) to the upstream. A client's own copies of them are
	// dropped on every listener. Default "": not sent.
	SubjectHeader string `yaml:"subject_header,omitempty"`
	SANsHeader    string `yaml:"sans_header,omitempty"`
}

// UpstreamTLS is how the gateway speaks TLS to an upstream's nodes: TLS
// 1.2 or 1.3, ALPN http/1.1, the server certificate verified against ca
// (default the system roots) for server_name, sessions resumed. The files
// are read again on every reload.
type UpstreamTLS struct {
	ServerName string `yaml:"server_name,omitempty"` // name sent as SNI and verified; default the node's host (an IP address is verified against the certificate's IP SANs)
	CA         string `yaml:"ca,omitempty"`          // PEM file of the CAs the nodes' certificates must chain to; default the system roots
	ClientCert string `yaml:"client_cert,omitempty"` // PEM certificate chain the gateway presents (mutual TLS); with client_key
	ClientKey  string `yaml:"client_key,omitempty"`  // its PEM key
	// InsecureSkipVerify accepts any certificate: no chain, name or
	// expiry check. For tests only; a warning says so at startup.
	// Default false.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify,omitempty"`
}

func validateUpstreamTLS(p *problems, path string, t *UpstreamTLS) {
	if (t.ClientCert == "") != (t.ClientKey == "") {
		p.add(path, "client_cert and client_key go together")
	}
	if t.InsecureSkipVerify && (t.CA != "" || t.ServerName != "") {
		p.add(path+".insecure_skip_verify", "set beside ca or server_name, which it makes pointless")
	}
}

// TLS bounds the handshakes of every HTTPS listener together.
type TLS struct {
	// HandshakeWorkers is how many handshakes may compute at once. A
	// handshake waiting for its peer holds no worker. The rest of the
	// CPUs stay with the event loops, so a flood of handshakes cannot
	// starve established connections. Default 0 = half the CPUs the
	// process may run on, at least 1.
	HandshakeWorkers int `yaml:"handshake_workers"`
	// HandshakePriority is the kernel priority handshakes compute at:
	// "normal" (they share the CPUs with the loops as equals), "nice"
	// (Linux nice 10 while computing: a loop runnable beside a handshake
	// gets most of the CPU, handshakes still advance), "low" (Linux
	// SCHED_IDLE while computing: a loop that wakes preempts a handshake at
	// once; while the loops keep every CPU busy, handshakes wait), or
	// "auto": nice where the process may give a thread its priority back,
	// else normal, without a warning. Each switch costs CPU, see
	// docs/configuration.md. Default "auto".
	HandshakePriority string `yaml:"handshake_priority"`
	// MaxHandshakes is how many handshakes may be in progress, computing or
	// waiting. Past it a new HTTPS connection is closed at once and counted.
	// Default 10000.
	MaxHandshakes int `yaml:"max_handshakes"`
	// GCHeapFloor keeps the garbage collector's heap goal at least this
	// far above the live heap, where the process serves or dials TLS:
	// each full handshake leaves 26 to 42 KB of crypto/tls garbage, and
	// over a live heap of a few MB a flood of them made GOGC=100 collect
	// 7 to 8 times a second, the loops waiting for the Ps the mark workers
	// held. A heap larger than the floor keeps GOGC's goal. Not applied
	// when GOGC is set in the environment. Default 64MiB; 0 turns it off.
	GCHeapFloor *ByteSize `yaml:"gc_heap_floor"`
}

// defaultGCHeapFloor: at 1,000 full handshakes a second, one collection a
// second or less.
const defaultGCHeapFloor ByteSize = 64 << 20

// HeapFloor returns gc_heap_floor with its default applied, in bytes.
func (t *TLS) HeapFloor() int64 {
	if t.GCHeapFloor == nil {
		return int64(defaultGCHeapFloor)
	}
	return int64(*t.GCHeapFloor)
}

// Handshake priorities.
const (
	PriorityAuto   = "auto"
	PriorityLow    = "low"
	PriorityNice   = "nice"
	PriorityNormal = "normal"
)

// Workers returns handshake_workers with its default applied: half the
// CPUs (runtime.NumCPU counts those of the affinity mask), not of
// GOMAXPROCS, which the binary sets from the loops.
func (t *TLS) Workers() int {
	if t.HandshakeWorkers > 0 {
		return t.HandshakeWorkers
	}
	return max(1, runtime.NumCPU()/2)
}

// UsesTLS reports whether any listener serves HTTPS or any upstream
// speaks TLS: whether handshakes will compute.
func (c *Config) UsesTLS() bool {
	if c.HasTLS() {
		return true
	}
	for i := range c.Upstreams {
		if c.Upstreams[i].TLS != nil {
			return true
		}
	}
	return false
}

const (
	defaultMaxHandshakes = 10000
	defaultTLSHandshake  = Duration(10 * time.Second)
)

// ClientListeners returns the client listeners: listeners, or one plain
// listener on listen when listeners is not set.
func (c *Config) ClientListeners() []Listener {
	if len(c.Listeners) == 0 {
		return []Listener{{Address: c.Listen}}
	}
	return c.Listeners
}

// HasTLS reports whether any listener serves HTTPS.
func (c *Config) HasTLS() bool {
	for _, l := range c.Listeners {
		if l.TLS != nil {
			return true
		}
	}
	return false
}

// applyListenerDefaults makes listen the shorthand for one plain listener,
// and fills each listener's defaults.
func applyListenerDefaults(c *Config) {
	if len(c.Listeners) == 0 {
		setDefault(&c.Listen, defaultListen)
	} else {
		setDefault(&c.Listen, c.Listeners[0].Address)
	}
	for i := range c.Listeners {
		if t := c.Listeners[i].TLS; t != nil {
			setDefault(&t.MinVersion, TLS12)
			if t.ClientAuth != nil {
				setDefault(&t.ClientAuth.Mode, ClientAuthRequire)
			}
		}
	}
	setDefault(&c.TLS.MaxHandshakes, defaultMaxHandshakes)
	setDefault(&c.TLS.HandshakePriority, PriorityAuto)
	if c.TLS.GCHeapFloor == nil { // filled, so that writing the default is no change on a reload
		floor := defaultGCHeapFloor
		c.TLS.GCHeapFloor = &floor
	}
	setDefault(&c.Timeouts.TLSHandshake, defaultTLSHandshake)
}

func (c *Config) validateListeners(p *problems) {
	if len(c.Listeners) > 0 && c.Listen != c.Listeners[0].Address {
		p.add("listen", "%q is set beside listeners; listen is the shorthand for one plain listener: list it under listeners instead", c.Listen)
	}
	seen := make(map[string]int, len(c.Listeners))
	for i := range c.Listeners {
		l := &c.Listeners[i]
		path := fmt.Sprintf("listeners[%d]", i)
		p.addr(path+".address", l.Address, addrRules{emptyHost: true, portZero: true})
		if j, dup := seen[l.Address]; dup && !strings.HasSuffix(l.Address, ":0") {
			p.add(path+".address", "duplicate address %q (also listeners[%d])", l.Address, j)
		} else {
			seen[l.Address] = i
		}
		if l.TLS != nil {
			validateListenerTLS(p, path+".tls", l.TLS)
		}
		switch {
		case l.RedirectHTTPS < 0 || l.RedirectHTTPS > 65535:
			p.add(path+".redirect_https", "port %d is not a number from 1 to 65535", l.RedirectHTTPS)
		case l.RedirectHTTPS > 0 && l.TLS != nil:
			p.add(path+".redirect_https", "on an HTTPS listener; it redirects a plain listener's requests to HTTPS")
		}
	}
	if c.TLS.HandshakeWorkers < 0 {
		p.add("tls.handshake_workers", "%d is negative; 0 means half the CPUs", c.TLS.HandshakeWorkers)
	}
	positive(p, "tls.max_handshakes", c.TLS.MaxHandshakes)
	if f := c.TLS.GCHeapFloor; f != nil && *f < 0 {
		p.add("tls.gc_heap_floor", "%d is negative; 0 turns the floor off", *f)
	}
	switch v := c.TLS.HandshakePriority; v {
	case PriorityAuto, PriorityNormal, PriorityNice, PriorityLow:
	default:
		p.add("tls.handshake_priority", "unknown priority %q (want %q, %q, %q or %q)", v, PriorityAuto, PriorityNormal, PriorityNice, PriorityLow)
	}
	positive(p, "timeouts.tls_handshake", c.Timeouts.TLSHandshake)
}

func validateListenerTLS(p *problems, path string, t *ListenerTLS) {
	if len(t.Certificates) == 0 {
		p.add(path+".certificates", "at least one {cert, key} is required")
	}
	for i, cert := range t.Certificates {
		cp := fmt.Sprintf("%s.certificates[%d]", path, i)
		if cert.Cert == "" {
			p.add(cp+".cert", "missing")
		}
		if cert.Key == "" {
			p.add(cp+".key", "missing")
		}
	}
	switch t.MinVersion {
	case TLS12, TLS13:
	default:
		p.add(path+".min_version", "unknown version %q (want %q or %q; TLS 1.0 and 1.1 are insecure)", t.MinVersion, TLS12, TLS13)
	}
	if a := t.ClientAuth; a != nil {
		if a.CA == "" {
			p.add(path+".client_auth.ca", "missing: client certificates are verified against it")
		}
		switch a.Mode {
		case ClientAuthRequire, ClientAuthOptional:
		default:
			p.add(path+".client_auth.mode", "unknown mode %q (want %q or %q)", a.Mode, ClientAuthRequire, ClientAuthOptional)
		}
		for key, h := range map[string]string{"subject_header": a.SubjectHeader, "sans_header": a.SANsHeader} {
			if h != "" && !isToken(h) {
				p.add(path+".client_auth."+key, "%q is not a header name", h)
			}
		}
	}
	if strings.ContainsAny(t.HSTS, "\r\n") {
		p.add(path+".hsts", "a line break in a header value")
	}
}

// ClientCertHeaders returns the header names that carry client
// certificates upstream, from every listener.
func (c *Config) ClientCertHeaders() []string {
	var out []string
	for _, l := range c.Listeners {
		if l.TLS != nil && l.TLS.ClientAuth != nil {
			for _, h := range []string{l.TLS.ClientAuth.SubjectHeader, l.TLS.ClientAuth.SANsHeader} {
				if h != "" {
					out = append(out, h)
				}
			}
		}
	}
	return out
}

// Route.TLS values: what a route demands of the client's connection.
const (
	RouteTLSAny     = ""            // plain or HTTPS (default)
	RouteHTTPSOnly  = "https_only"  // HTTPS; a plain request is redirected (308) to the first HTTPS listener
	RouteClientCert = "client_cert" // HTTPS with a verified client certificate; else 403, code 40306
)

func validateRouteTLS(p *problems, path string, c *Config, tls string) {
	switch tls {
	case RouteTLSAny:
		return
	case RouteHTTPSOnly, RouteClientCert:
	default:
		p.add(path, "unknown value %q (want %q or %q)", tls, RouteHTTPSOnly, RouteClientCert)
		return
	}
	if !c.HasTLS() {
		p.add(path, "%q, but no listener serves HTTPS", tls)
	}
}

// fixedListeners lists what a reload cannot change about the listeners:
// their addresses, whether each serves HTTPS, its min_version and its
// client_auth mode. Certificates and CA files reload.
func fixedListeners(old, next *Config) []string {
	shape := func(c *Config) []string {
		out := make([]string, len(c.ClientListeners()))
		for i, l := range c.ClientListeners() {
			out[i] = l.Address
			if t := l.TLS; t != nil {
				out[i] += " tls " + t.MinVersion
				if t.ClientAuth != nil {
					out[i] += " client_auth " + t.ClientAuth.Mode
				}
			}
		}
		return out
	}
	o, n := fmt.Sprint(shape(old)), fmt.Sprint(shape(next))
	var d []string
	if o != n && (len(old.Listeners) > 0 || len(next.Listeners) > 0) { // else listen names the change
		d = append(d, "listeners "+o+" -> "+n)
	}
	return d
}
