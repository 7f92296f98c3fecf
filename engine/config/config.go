// The Config types, and Parse, Load, Default, Embedded and RouterSpecs.

package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net/netip"

	"gopkg.in/yaml.v3"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/confstore"
	"github.com/loopgate/loopgate/engine/router"
	"github.com/loopgate/loopgate/filters"
)

// AdminOff as the Admin.Address disables the admin listener.
const AdminOff = "off"

// Route.EscapedSlashes values.
const (
	EscapedSlashesReject = "reject"
	EscapedSlashesKeep   = "keep"
)

// Balancer names accepted in Upstream.Balancer.
const (
	RoundRobin         = "round_robin"
	WeightedRoundRobin = "weighted_round_robin" // smooth weighted round robin, as in nginx
	Random             = "random"               // weighted random
	LeastRequest       = "least_request"        // power of two choices on in-flight calls, by weight
)

// Config is the whole gateway configuration.
type Config struct {
	Listen string `yaml:"listen"` // client listener "host:port"; default "127.0.0.1:8080"; port 0 picks a free port; the shorthand for listeners: [{address: ...}]

	// Listeners are the client listeners, plain or HTTPS (see Listener).
	// Default: one plain listener on listen.
	Listeners []Listener `yaml:"listeners,omitempty"`
	TLS       TLS        `yaml:"tls"` // bounds on handshakes, for every HTTPS listener (see TLS)

	Admin    Admin    `yaml:"admin"` // admin listener: "host:port" (default "127.0.0.1:9901"), "off", or a mapping (see Admin)
	Loops    int      `yaml:"loops"` // event loops; default 0 = one per CPU (runtime.NumCPU())
	Pin      bool     `yaml:"pin"`   // lock each event loop to an OS thread pinned to CPU (loop index mod NumCPU; Linux); default false
	Pid      string   `yaml:"pid"`   // pidfile path, written at start and removed at exit; the -pidfile flag overrides it; default "" = none
	Limits   Limits   `yaml:"limits"`
	Timeouts Timeouts `yaml:"timeouts"`

	// AllowUnderscoreHeaders forwards request header fields whose names
	// contain '_'. By default they are dropped, as nginx does
	// (underscores_in_headers off): WSGI and CGI upstreams read X_User_Id
	// and X-User-Id as the same variable, so a client could otherwise plant
	// a header the gateway manages. Default false.
	AllowUnderscoreHeaders bool `yaml:"allow_underscore_headers"`

	// Filters is the default chain every route runs (see filters.go for
	// how a route's chain is made). Default: the registered filters marked
	// as default, [request_id, ip_access, forwarded]; ip_access is in it
	// so runtime bans apply to every route.
	Filters      []string       `yaml:"filters"`
	FilterOrders map[string]int `yaml:"filter_orders,omitempty"` // override registered orders; orders must stay unique

	// TrustedProxies are the peers (IPs or CIDRs) whose X-Forwarded-For and
	// X-Real-IP are believed. Default none: the client IP is the peer.
	TrustedProxies []string `yaml:"trusted_proxies,omitempty"`

	// The top-level keys a filter owns (auth, ip_allow, ip_deny, ...) are
	// decoded into that filter's own config type (see FilterGlobal).

	AccessLog AccessLog `yaml:"access_log"` // default off (see accesslog.go)
	ErrorLog  ErrorLog  `yaml:"error_log"`  // default stderr, level info (see accesslog.go)
	Metrics   Metrics   `yaml:"metrics"`    // per-request series on by default

	// CircuitBreaker, when present, enables a circuit breaker with these
	// settings on every route; a route's own circuit_breaker overrides it
	// (see CircuitBreaker). Default absent: no breakers.
	CircuitBreaker *CircuitBreaker `yaml:"circuit_breaker,omitempty"`

	// Isolation sets adaptive slow-call isolation on every route (see
	// Isolation): on by default with its defaults; a section here changes
	// them, and `isolation: {enabled: false}` turns it off.
	Isolation *Isolation `yaml:"isolation,omitempty"`

	HealthChecks HealthChecks `yaml:"health_checks"` // bounds on the active health prober (see HealthChecks)

	WebSocket WebSocket `yaml:"websocket"` // bounds on Upgrade tunnels (see WebSocket)
	Alerts    Alerts    `yaml:"alerts"`    // webhooks for breaker, isolation, upstream, Redis and reload alerts (see Alerts); default none

	Upstreams []Upstream `yaml:"upstreams"` // default none
	Routes    []*Route   `yaml:"routes"`    // default none: every request is a 404; shared between configs (WithRoutes), so never modified once parsed

	// filterGlobals holds each registered filter's top-level config, by
	// filter name: decoded from the keys it owns, then provisioned.
	filterGlobals map[string]filters.GlobalConfig
	trusted       []netip.Prefix // TrustedProxies, parsed by Validate
	// table is the routes' router table, as validating them compiled it;
	// immutable, so the engine's snapshot takes it as it is (RouterTable).
	table *router.Table
}

// Limits bound what one client connection may send or queue.
type Limits struct {
	MaxURIBytes    ByteSize `yaml:"max_uri_bytes"`    // request target length; default 8KiB; over it: 414, code 41401
	MaxHeaderCount int      `yaml:"max_header_count"` // header fields per request; default 50; over it: 431, code 43101
	MaxHeaderBytes ByteSize `yaml:"max_header_bytes"` // whole request head, request line included; default 16KiB; over it: 431, code 43101
	MaxBodyBytes   ByteSize `yaml:"max_body_bytes"`   // request body size; default 10MiB; over it: 413, code 41301

	// MaxConnBuffer caps the bytes a connection may have queued in either
	// direction: unread pipelined input, or output the peer is not reading.
	// Beyond it the exchange is aborted and the connection closed. It must
	// be at least max_header_bytes, since a head is buffered whole.
	// Default 4MiB.
	MaxConnBuffer ByteSize `yaml:"max_conn_buffer"`

	// MaxTempFileBytes caps the temporary file one response may spill to when
	// the client reads slower than the upstream sends (nginx's
	// proxy_max_temp_file_size). Past it the connection is closed. Default 1GiB.
	MaxTempFileBytes ByteSize `yaml:"max_temp_file_bytes"`

	// TempDir is where spill files are created, unlinked at once. Default ""
	// = the system temporary directory ($TMPDIR, else /tmp).
	TempDir string `yaml:"temp_dir"`

	// RequestBufferBytes: a request body that ends within this many bytes
	// is read and validated whole before an upstream connection is taken,
	// so a malformed body never reaches an upstream (nginx buffers request
	// bodies by default too). Larger bodies stream; a framing error found
	// mid-stream then aborts the upstream connection. Default 64KiB; 0
	// disables buffering (every body streams).
	RequestBufferBytes *ByteSize `yaml:"request_buffer_bytes"`

	// MaxResponseHeaderCount and MaxResponseHeaderBytes bound an upstream's
	// response head (nginx's proxy_buffer_size plays this role). Past them
	// the client gets 502, code 50203, and the gateway logs the node.
	// Defaults 100 fields and 64KiB.
	MaxResponseHeaderCount int      `yaml:"max_response_header_count"`
	MaxResponseHeaderBytes ByteSize `yaml:"max_response_header_bytes"`

	// MaxBufferedBytes is the process-wide budget for request and response
	// bytes held in memory across all connections (bodies waiting for a slow
	// upstream or a slow client). Past it, new requests with a body get 503,
	// code 50303, with Retry-After; exchanges already running finish.
	// Default 256MiB.
	MaxBufferedBytes ByteSize `yaml:"max_buffered_bytes"`

	// MaxConnections caps open client connections, all loops together. Past
	// it new connections are closed at accept and counted. Default: from
	// the descriptor limit (DefaultMaxConnections), at most 100000.
	MaxConnections int `yaml:"max_connections"`
}

// RequestBuffer returns request_buffer_bytes with its default applied.
func (l *Limits) RequestBuffer() int64 {
	if l.RequestBufferBytes == nil {
		return int64(defaultRequestBuffer)
	}
	return int64(*l.RequestBufferBytes)
}

// Timeouts are the client-side deadlines.
type Timeouts struct {
	HeaderRead Duration `yaml:"header_read"` // time to receive a whole request head; default 10s; expiry: 408, code 40801
	Idle       Duration `yaml:"idle"`        // keep-alive wait for the next request, and longest gap in a request body; default 60s; expiry: connection closed
	Drain      Duration `yaml:"drain"`       // graceful-shutdown budget for in-flight requests; default 30s
	// Suspend bounds how long a request may wait on an asynchronous filter
	// (external auth, a cluster rate limit) before it is answered 504, code
	// 50401. Default 5s.
	Suspend Duration `yaml:"suspend"`
	// TLSHandshake bounds a TLS handshake, from accept to its end; a client
	// that has not finished by then is disconnected. Default 10s.
	TLSHandshake Duration `yaml:"tls_handshake"`
}

// Upstream is a named group of backend nodes and how to reach them.
type Upstream struct {
	Name  string `yaml:"name"`  // required, unique; letters, digits, '-', '_', '.'
	Nodes []Node `yaml:"nodes"` // at least one; each "host:port" or {addr: "host:port", weight: 3}

	// Balancer is "round_robin", "weighted_round_robin", "random" or
	// "least_request". Default round_robin, or weighted_round_robin when
	// any node's weight is not 1.
	Balancer string `yaml:"balancer"`

	// SlowStart: a node added by a reload, or back from an ejection or a
	// failed health check, takes 10 % of its weight, rising to all of it
	// over this window. Default 30s; 0 disables it.
	SlowStart *Duration `yaml:"slow_start"`

	ConnectTimeout     Duration `yaml:"connect_timeout"`      // dial deadline; default 1s; failure: 502, code 50201
	ResponseTimeout    Duration `yaml:"response_timeout"`     // request sent to first response byte, then max gap between response reads; default 5s; expiry: 504, code 50401
	PoolAcquireTimeout Duration `yaml:"pool_acquire_timeout"` // wait for a connection when max_conns are busy; default 500ms; expiry: 503, code 50302
	MaxIdle            int      `yaml:"max_idle"`             // idle keep-alive connections per node per loop; default max_conns
	MaxConns           int      `yaml:"max_conns"`            // connections per node per loop (active + idle + dialing); default 1024 (Envoy's per-cluster default); past it requests wait, up to as many again
	IdleTimeout        Duration `yaml:"idle_timeout"`         // idle pooled connections older than this are closed; default 30s

	RetryBudget RetryBudget  `yaml:"retry_budget"`           // retries in flight the upstream takes (see RetryBudget)
	Outlier     Outlier      `yaml:"outlier"`                // passive ejection of failing nodes (see Outlier)
	HealthCheck *HealthCheck `yaml:"health_check,omitempty"` // active health check; default none (see HealthCheck)

	// TLS makes the gateway speak HTTPS to every node of the upstream
	// (see UpstreamTLS). Default absent: plain HTTP.
	TLS *UpstreamTLS `yaml:"tls,omitempty"`
}

// Node is one backend address. In YAML it is either the bare string
// "host:port" or a mapping {addr: "host:port", weight: 3}.
type Node struct {
	Addr   string `yaml:"addr"`   // required "host:port", numeric port
	Weight int    `yaml:"weight"` // relative share for weighted_round_robin; default 1
}

// Route sends matching requests to an upstream. Matching semantics are
// those of package router; exactly one of Path and Prefix is set.
type Route struct {
	ID       string   `yaml:"id"`                // unique name used in logs and metrics; default "route-<index>"
	Path     string   `yaml:"path,omitempty"`    // exact path, or pattern with "*" (one segment) / trailing "**" (one or more)
	Prefix   string   `yaml:"prefix,omitempty"`  // whole-segment prefix, e.g. "/static/"
	Host     string   `yaml:"host,omitempty"`    // only this Host (case-insensitive, port ignored); default "" = any host
	Methods  []string `yaml:"methods,omitempty"` // only these methods (HEAD is implied by GET); default empty = any method; a path matched only for other methods: 405, code 40501, with Allow
	Upstream string   `yaml:"upstream"`          // required: name of an upstream

	// TLS is what the route demands of the client's connection:
	// "https_only" (a plain request is redirected, 308, to the first HTTPS
	// listener) or "client_cert" (HTTPS with a verified client
	// certificate, else 403, code 40306). Default "": any connection.
	TLS string `yaml:"tls,omitempty"`

	// EscapedSlashes is what a request path holding %2F or %5C (an encoded
	// slash or backslash) or a raw backslash gets on this route: "reject"
	// (400, code 40001) or "keep" (forwarded encoded, as %2F / %5C). Envoy's
	// path_with_escaped_slashes_action is the model. Default "reject".
	EscapedSlashes string `yaml:"escaped_slashes,omitempty"`

	// Per-route overrides; default (zero) inherits the upstream's value.
	ConnectTimeout  Duration `yaml:"connect_timeout"`
	ResponseTimeout Duration `yaml:"response_timeout"`

	// WebSocket: false refuses WebSocket upgrade requests on the route
	// (403, code 40305). Default true.
	WebSocket *bool `yaml:"websocket,omitempty"`
	// Upgrade lists the Upgrade tokens (RFC 9110 7.8) the route tunnels,
	// case-insensitive; a request asking for another is refused (403, code
	// 40305), except h2c, which is served as HTTP/1.1. Default [websocket],
	// or [] with websocket: false.
	Upgrade []string `yaml:"upgrade,omitempty"`

	Retry Retry `yaml:"retry"` // the retry policy (see Retry); defaults apply when absent
	// CircuitBreaker is the route's breaker over the global one (see
	// CircuitBreaker); after defaults, the effective settings, or nil when
	// the route has none.
	CircuitBreaker *CircuitBreaker `yaml:"circuit_breaker,omitempty"`
	// Isolation is the route's slow-call isolation over the global one
	// (see Isolation); after defaults, the effective settings (never nil;
	// On reports whether it is enabled).
	Isolation *Isolation `yaml:"isolation,omitempty"`

	// Filters (see filters.go). The route keys a filter owns (auth,
	// roles, ip_allow, gray, ...) are decoded into that filter's own
	// config type (see FilterConfig).
	Filters        []string `yaml:"filters,omitempty"`         // added to the global chain
	DisableFilters []string `yaml:"disable_filters,omitempty"` // removed from the global chain

	// Limits are the route's request limits tighter than the global ones,
	// as its filters set them (the limits filter's limits key; see
	// filters.RequestLimiter), collected when defaults are applied; nil
	// when none. A zero field inherits. The engine enforces the body limit
	// itself while a chunked body streams.
	Limits *codec.Limits `yaml:"-"`

	filterConfigs map[string]filters.RouteConfig // each registered filter's route config, by name
}

//go:embed default.yaml
var embeddedYAML []byte

// Default returns a Config holding only defaults: no upstreams, no routes.
func Default() *Config {
	c := &Config{}
	applyDefaults(c)
	return c
}

// Embedded returns the built-in demo configuration: listen on
// 127.0.0.1:8080, admin on 127.0.0.1:9901, and routes "/api/echo" (exact)
// and "/" (prefix) to upstream "demo" at 127.0.0.1:9001. Each call returns
// a new *Config. It panics if the embedded file is invalid, which its tests
// rule out.
func Embedded() *Config {
	c, err := Parse(embeddedYAML)
	if err != nil {
		panic("config: embedded default.yaml is invalid: " + err.Error())
	}
	return c
}

// Parse decodes YAML strictly, applies defaults and validates. An empty
// document yields Default() (Load refuses an empty file). Every error message starts with "config: " and
// names the field path and the YAML line; validation reports all problems
// at once, one per line (the error is an errors.Join), each as
// `config: line 14: routes[2] (id "admin").upstream: unknown upstream "x"`
// (see Validate).
func Parse(data []byte) (*Config, error) {
	c, _, err := parse(data)
	return c, err
}

// parse is Parse, also reporting whether the document set nothing (Load
// refuses that from a file).
func parse(data []byte) (c *Config, empty bool, err error) {
	// A large config's routes are nearly all of the plainest kind: decoded
	// from their text without the YAML decoder, they cost a tenth of what
	// they did. A document that does not split so, or has a problem, is
	// parsed whole, so every error names its line as before.
	if rest, routes, ok := confstore.PlainRoutes(data); ok {
		if c, _, err := parseWithRoutes(rest, routes); err == nil {
			return c, false, nil // PlainRoutes found routes: the document sets something
		}
	}
	return parseYAML(data)
}

// parseYAML is parse with the YAML decoder for the whole document.
func parseYAML(data []byte) (c *Config, empty bool, err error) {
	c = &Config{}
	if empty, err = decodeStrict(data, c); err != nil {
		return nil, false, err
	}
	applyDefaults(c)
	if p := c.problems(); len(p) > 0 {
		return nil, false, p.err(c, indexLines(data))
	}
	return c, empty, nil
}

// decodeStrict decodes one YAML document into c, and reports whether it
// set nothing: no document, a null one or an empty mapping. Every key and
// scalar is vetted first (checkNode), so an unknown key, a filter's
// included, and a scalar yaml.v3 would coerce (strictScalar) are refused
// with their path and line before anything is decoded.
func decodeStrict(data []byte, c *Config) (empty bool, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return true, nil // empty document
		}
		return false, explainDecodeError(data, err)
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return false, explainDecodeError(data, err)
	default:
		return false, fmt.Errorf("config: line %d: a second YAML document; the file must hold exactly one", extra.Line)
	}
	if len(doc.Content) == 0 {
		return true, nil
	}
	root := doc.Content[0]
	if root.ShortTag() == "!!null" || root.Kind == yaml.MappingNode && len(root.Content) == 0 {
		return true, nil
	}
	if err := checkNode(root, configType, ""); err != nil {
		return false, err
	}
	if err := decodeDocument(root, c); err != nil {
		return false, explainDecodeError(data, err)
	}
	return false, nil
}

// RouterSpecs returns the routes' match criteria in route order, so
// router.Table indexes equal route indexes.
func (c *Config) RouterSpecs() []router.Spec {
	specs := make([]router.Spec, len(c.Routes))
	for i := range c.Routes {
		specs[i] = c.Routes[i].routerSpec()
	}
	return specs
}

// routerSpec is the route's match criteria.
func (r *Route) routerSpec() router.Spec {
	return router.Spec{Path: r.Path, Prefix: r.Prefix, Host: r.Host, Methods: r.Methods}
}

// findUpstream returns the upstream called name, or nil.
func (c *Config) findUpstream(name string) *Upstream {
	for i := range c.Upstreams {
		if c.Upstreams[i].Name == name {
			return &c.Upstreams[i]
		}
	}
	return nil
}

// NodeAddrs returns the addresses of the named upstream's nodes, in
// order; nil for an unknown name.
func (c *Config) NodeAddrs(upstream string) []string {
	for i := range c.Upstreams {
		if u := &c.Upstreams[i]; u.Name == upstream {
			addrs := make([]string, len(u.Nodes))
			for j, n := range u.Nodes {
				addrs[j] = n.Addr
			}
			return addrs
		}
	}
	return nil
}
