// Tests for decoding, defaults, validation messages and the embedded config.

package config

import (
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/policy"
	"github.com/loopgate/loopgate/engine/router"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
	"github.com/loopgate/loopgate/filters/auth"
	"github.com/loopgate/loopgate/filters/ratelimit/limiter"
	"github.com/loopgate/loopgate/filters/transform"
	"github.com/loopgate/loopgate/pool/pooltest"
	"github.com/loopgate/loopgate/pool/units"
)

func TestMain(m *testing.M) { pooltest.Main(m) }

func mustParse(t *testing.T, text string) *Config {
	t.Helper()
	c, err := Parse([]byte(text))
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, text)
	}
	return c
}

func TestDefaultsMatchDocumentation(t *testing.T) {
	want := &Config{
		Listen: "127.0.0.1:8080",
		Admin:  Admin{Address: "127.0.0.1:9901"},
		Limits: Limits{
			MaxURIBytes:      8 * 1024,
			MaxHeaderCount:   50,
			MaxHeaderBytes:   16 * 1024,
			MaxBodyBytes:     10 * 1024 * 1024,
			MaxConnBuffer:    4 * 1024 * 1024,
			MaxTempFileBytes: 1 << 30,

			MaxResponseHeaderCount: 100,
			MaxResponseHeaderBytes: 64 * 1024,
			MaxBufferedBytes:       256 << 20,
			MaxConnections:         DefaultMaxConnections(descriptorLimit(), runtime.NumCPU()),
		},
		Timeouts: Timeouts{
			HeaderRead:   Duration(10 * time.Second),
			Idle:         Duration(60 * time.Second),
			Drain:        Duration(30 * time.Second),
			Suspend:      Duration(5 * time.Second),
			TLSHandshake: Duration(10 * time.Second),
		},
		TLS:          TLS{MaxHandshakes: 10000, HandshakePriority: "auto", GCHeapFloor: ptr(ByteSize(64 << 20))},
		Filters:      []string{"request_id", "ip_access", "forwarded"},
		AccessLog:    AccessLog{RingSize: 4096},
		ErrorLog:     ErrorLog{Path: "stderr", Level: "info"},
		HealthChecks: HealthChecks{MaxInFlight: 20, Batch: 100},
		WebSocket:    WebSocket{IdleTimeout: Duration(time.Hour), MaxTunnels: 10000, Buffer: 64 << 10},
		Alerts:       Alerts{IsolationThreshold: 50},
	}
	wantGlobals := map[string]filters.GlobalConfig{
		auth.Name:           &auth.Global{Auth: documentedAuth()},
		access.NameIPAccess: &access.IPLists{},
		limiter.Name:        documentedRateLimit(),

		transform.NameTraceContext: &transform.TraceContextGlobal{}, // off
	}
	if got := Default(); !reflect.DeepEqual(withoutFilters(got), want) || !reflect.DeepEqual(got.filterGlobals, wantGlobals) {
		t.Fatalf("Default() =\n%+v\nwant\n%+v", got, want)
	}
	for _, empty := range []string{"", "# nothing here\n", "---\n"} {
		if got := mustParse(t, empty); !reflect.DeepEqual(withoutFilters(got), want) || !reflect.DeepEqual(got.filterGlobals, wantGlobals) {
			t.Errorf("Parse(%q) = %+v, want the defaults", empty, got)
		}
	}
}

// documentedAuth is the auth section with only its documented defaults.
func documentedAuth() auth.Config {
	return auth.Config{
		Header:    "Authorization",
		JWT:       auth.JWT{RolesClaim: "roles", TenantClaim: "tenant"},
		CacheTTL:  Duration(30 * time.Second),
		CacheSize: 10000,
		External: auth.ExternalAuth{
			Path:           "/auth",
			Timeout:        Duration(time.Second),
			ForwardHeaders: []string{"Authorization", "Cookie"},
			CopyHeaders:    []string{"X-User-Id", "X-User-Name", "X-User-Roles"},
		},
		IdentityHeaders: defaultIdentityHeaders(),
	}
}

// sampleYAML exercises every option and both node forms (of each JWT key's
// inline and file forms, which exclude each other, one is shown). Relative file
// paths are resolved from the package directory, where tests run.
const sampleYAML = `
listen: 0.0.0.0:80
admin: "off"
loops: 2
pin: true
limits:
  max_uri_bytes: 4KiB
  max_header_count: 64
  max_header_bytes: 32768
  max_body_bytes: 1MiB
  max_conn_buffer: 2MiB
  max_temp_file_bytes: 512MiB
  temp_dir: testdata
timeouts:
  header_read: 5s
  idle: 2m
  drain: 10s
filters: [request_id, forwarded, limits]
filter_orders: {forwarded: 50}
trusted_proxies: [10.0.0.0/8, 192.168.1.1, "::1"]
ip_allow: [0.0.0.0/0, "::/0"]
ip_deny: [203.0.113.7]
auth:
  header: X-Credentials
  jwt:
    hs256_secret: 0123456789abcdef0123456789abcdef
    rs256_public_key: "-----BEGIN PUBLIC KEY-----\n(inline PEM; the config does not parse it)"
    es256_public_key_file: testdata/es256.pub.pem
    jwks_file: testdata/jwks.json
    issuer: https://issuer.example
    audience: api
    roles_claim: groups
    tenant_claim: org
    leeway: 5s
  api_keys:
    - {key: k-1, consumer: ci, tenant: t1, roles: [deployer]}
    - {key: k-2, consumer: ci}
  cache_ttl: 10s
  cache_size: 500
  external:
    upstream: users
    path: /check?scope=api
    timeout: 300ms
    forward_headers: [Authorization]
    copy_headers: [X-User-Id]
    fail_open: true
upstreams:
  - name: users
    nodes:
      - 10.0.0.1:8080
      - addr: 10.0.0.2:8080
        weight: 3
    connect_timeout: 250ms
    max_conns: 32
  - name: static
    nodes: ["10.0.1.1:80", {addr: "10.0.1.2:80"}]
    balancer: round_robin
    response_timeout: 30s
    pool_acquire_timeout: 1s
    max_idle: 8
    max_conns: 16
    idle_timeout: 90s
routes:
  - id: get-user
    path: /api/users/*
    host: api.example.com
    methods: [GET, head]
    upstream: users
    response_timeout: 2s
    disable_filters: [forwarded]
    auth: required
    roles: [reader, admin]
    external_auth: true
    ip_allow: [10.1.0.0/16]
    ip_deny: [10.1.2.3]
    limits: {max_uri_bytes: 1KiB, max_header_count: 20, max_header_bytes: 8KiB, max_body_bytes: 64KiB}
    request_headers: {set: {X-Env: prod}, add: {X-Via: loopgate}, remove: [X-Debug]}
    response_headers: {set: {Cache-Control: no-store}, remove: [Server]}
    rewrite: {strip_prefix: /api, regex: "^/users/(.*)$", replacement: /u/$1, add_prefix: /v1}
    gray: {upstream: static, header: X-Gray, cookie: gray, value: "yes", weight: 10}
    hash: {header: X-Session}
  - path: /assets/**
    upstream: static
    connect_timeout: 100ms
    filters: [ip_access]
    hash: {cookie: sid}
  - id: site
    prefix: /
    upstream: static
    gray: {upstream: users, weight: 5}
    hash: {user: true}
`

func TestSampleParses(t *testing.T) {
	c := mustParse(t, sampleYAML)
	want := &Config{
		Listen: "0.0.0.0:80",
		Admin:  Admin{Address: AdminOff},
		Loops:  2,
		Pin:    true,
		Limits: Limits{
			MaxURIBytes: 4096, MaxHeaderCount: 64, MaxHeaderBytes: 32768,
			MaxBodyBytes: 1 << 20, MaxConnBuffer: 2 << 20, MaxTempFileBytes: 512 << 20,
			TempDir:                "testdata",
			MaxResponseHeaderCount: 100, MaxResponseHeaderBytes: 64 << 10, MaxBufferedBytes: 256 << 20, MaxConnections: DefaultMaxConnections(descriptorLimit(), 2),
		},
		Timeouts: Timeouts{
			HeaderRead:   Duration(5 * time.Second),
			Idle:         Duration(2 * time.Minute),
			Drain:        Duration(10 * time.Second),
			Suspend:      Duration(5 * time.Second),
			TLSHandshake: Duration(10 * time.Second),
		},
		TLS:            TLS{MaxHandshakes: 10000, HandshakePriority: "auto", GCHeapFloor: ptr(ByteSize(64 << 20))},
		Filters:        []string{"request_id", "forwarded", "limits"},
		FilterOrders:   map[string]int{"forwarded": 50},
		TrustedProxies: []string{"10.0.0.0/8", "192.168.1.1", "::1"},
		AccessLog:      AccessLog{RingSize: 4096},
		ErrorLog:       ErrorLog{Path: "stderr", Level: "info"},
		HealthChecks:   HealthChecks{MaxInFlight: 20, Batch: 100},
		WebSocket:      WebSocket{IdleTimeout: Duration(time.Hour), MaxTunnels: 10000, Buffer: 64 << 10},
		Alerts:         Alerts{IsolationThreshold: 50},
		Upstreams: []Upstream{{
			Name:               "users",
			Nodes:              []Node{{Addr: "10.0.0.1:8080", Weight: 1}, {Addr: "10.0.0.2:8080", Weight: 3}},
			Balancer:           WeightedRoundRobin, // chosen because a weight is not 1
			ConnectTimeout:     Duration(250 * time.Millisecond),
			ResponseTimeout:    Duration(5 * time.Second),
			PoolAcquireTimeout: Duration(500 * time.Millisecond),
			MaxIdle:            32, // default: max_conns
			MaxConns:           32,
			IdleTimeout:        Duration(30 * time.Second),
			RetryBudget:        RetryBudget{Percent: 20, MinRetries: 3},
			Outlier:            defaultOutlier,
			SlowStart:          &defaultSlowStart,
		}, {
			Name:               "static",
			Nodes:              []Node{{Addr: "10.0.1.1:80", Weight: 1}, {Addr: "10.0.1.2:80", Weight: 1}},
			Balancer:           RoundRobin,
			ConnectTimeout:     Duration(time.Second),
			ResponseTimeout:    Duration(30 * time.Second),
			PoolAcquireTimeout: Duration(time.Second),
			MaxIdle:            8,
			MaxConns:           16,
			IdleTimeout:        Duration(90 * time.Second),
			RetryBudget:        RetryBudget{Percent: 20, MinRetries: 3},
			Outlier:            defaultOutlier,
			SlowStart:          &defaultSlowStart,
		}},
		Routes: []*Route{{
			ID: "get-user", Path: "/api/users/*", Host: "api.example.com", Methods: []string{"GET", "head"},
			Upstream:        "users",
			EscapedSlashes:  EscapedSlashesReject,             // default
			ConnectTimeout:  Duration(250 * time.Millisecond), // inherited from users
			ResponseTimeout: Duration(2 * time.Second),        // own override
			Retry:           defaultRetry,
			Isolation:       policy.RouteIsolation(nil, nil), // on by default
			Upgrade:         []string{"websocket"},
			DisableFilters:  []string{"forwarded"},
			Limits:          &codec.Limits{MaxURIBytes: 1 << 10, MaxHeaderCount: 20, MaxHeaderBytes: 8 << 10, MaxBodyBytes: 64 << 10},
		}, {
			ID: "route-1", Path: "/assets/**", Upstream: "static", EscapedSlashes: EscapedSlashesReject,
			ConnectTimeout:  Duration(100 * time.Millisecond),
			ResponseTimeout: Duration(30 * time.Second),
			Retry:           defaultRetry,
			Isolation:       policy.RouteIsolation(nil, nil), // on by default
			Upgrade:         []string{"websocket"},
			Filters:         []string{"ip_access"},
		}, {
			ID: "site", Prefix: "/", Upstream: "static", EscapedSlashes: EscapedSlashesReject,
			ConnectTimeout:  Duration(time.Second),
			ResponseTimeout: Duration(30 * time.Second),
			Retry:           defaultRetry,
			Isolation:       policy.RouteIsolation(nil, nil), // on by default
			Upgrade:         []string{"websocket"},
		}},
	}
	if !reflect.DeepEqual(withoutFilters(c), want) {
		t.Fatalf("parsed\n%+v\nwant\n%+v", c, want)
	}
	wantGlobals := globalsWith(map[string]filters.GlobalConfig{
		access.NameIPAccess: &access.IPLists{Allow: []string{"0.0.0.0/0", "::/0"}, Deny: []string{"203.0.113.7"}},
		auth.Name: &auth.Global{Auth: auth.Config{
			Header: "X-Credentials",
			JWT: auth.JWT{
				HS256Secret:        "0123456789abcdef0123456789abcdef",
				RS256PublicKey:     "-----BEGIN PUBLIC KEY-----\n(inline PEM; the config does not parse it)",
				ES256PublicKeyFile: "testdata/es256.pub.pem", // rs256_public_key_file and es256_public_key: TestFilterOptionsAccepted
				JWKSFile:           "testdata/jwks.json",
				Issuer:             "https://issuer.example", Audience: "api",
				RolesClaim: "groups", TenantClaim: "org",
				Leeway: Duration(5 * time.Second),
			},
			APIKeys: []auth.APIKey{
				{Key: "k-1", Consumer: "ci", Tenant: "t1", Roles: []string{"deployer"}},
				{Key: "k-2", Consumer: "ci"},
			},
			CacheTTL:  Duration(10 * time.Second),
			CacheSize: 500,
			External: auth.ExternalAuth{
				Upstream: "users", Path: "/check?scope=api", Timeout: Duration(300 * time.Millisecond),
				ForwardHeaders: []string{"Authorization"}, CopyHeaders: []string{"X-User-Id"}, FailOpen: true,
			},
			IdentityHeaders: defaultIdentityHeaders(),
		}},
	})
	wantRoutes := []map[string]filters.RouteConfig{
		routeConfigsWith(map[string]filters.RouteConfig{
			auth.Name:           &auth.Route{Auth: auth.LevelRequired, Roles: []string{"reader", "admin"}},
			auth.NameExternal:   &auth.ExternalRoute{ExternalAuth: true},
			access.NameIPAccess: &access.IPLists{Allow: []string{"10.1.0.0/16"}, Deny: []string{"10.1.2.3"}},
			access.NameLimits:   &access.LimitsRoute{Limits: &access.RouteLimits{MaxURIBytes: 1 << 10, MaxHeaderCount: 20, MaxHeaderBytes: 8 << 10, MaxBodyBytes: 64 << 10}},
			transform.NameHeaders: &transform.HeadersRoute{
				Request: &transform.HeaderOps{
					Set: map[string]string{"X-Env": "prod"}, Add: map[string]string{"X-Via": "loopgate"}, Remove: []string{"X-Debug"},
				},
				Response: &transform.HeaderOps{Set: map[string]string{"Cache-Control": "no-store"}, Remove: []string{"Server"}},
			},
			transform.NameRewrite: &transform.RewriteRoute{Rewrite: &transform.Rewrite{StripPrefix: "/api", Regex: "^/users/(.*)$", Replacement: "/u/$1", AddPrefix: "/v1"}},
			transform.NameGray:    &transform.GrayRoute{Gray: &transform.Gray{Upstream: "static", Header: "X-Gray", Cookie: "gray", Value: "yes", Weight: 10}},
			transform.NameHash:    &transform.HashRoute{Hash: &transform.Hash{Header: "X-Session"}},
		}),
		routeConfigsWith(map[string]filters.RouteConfig{
			auth.Name:          &auth.Route{Auth: auth.LevelNone}, // default
			transform.NameHash: &transform.HashRoute{Hash: &transform.Hash{Cookie: "sid"}},
		}),
		routeConfigsWith(map[string]filters.RouteConfig{
			transform.NameGray: &transform.GrayRoute{Gray: &transform.Gray{Upstream: "users", Value: "true", Weight: 5}}, // value defaulted
			transform.NameHash: &transform.HashRoute{Hash: &transform.Hash{User: true}},
		}),
	}
	sameOptions(t, "top level", c.filterGlobals, wantGlobals)
	for i, r := range c.Routes {
		sameOptions(t, r.ID, r.filterConfigs, wantRoutes[i])
	}
}

func TestRouterSpecsFollowRouteOrder(t *testing.T) {
	c := mustParse(t, sampleYAML)
	specs := c.RouterSpecs()
	want := []router.Spec{
		{Path: "/api/users/*", Host: "api.example.com", Methods: []string{"GET", "head"}},
		{Path: "/assets/**"},
		{Prefix: "/"},
	}
	if !reflect.DeepEqual(specs, want) {
		t.Fatalf("RouterSpecs() = %+v, want %+v", specs, want)
	}
}

func TestMarshalRoundTrips(t *testing.T) {
	c := mustParse(t, sampleYAML)
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	again := mustParse(t, string(out))
	if !reflect.DeepEqual(c, again) {
		t.Fatalf("round trip changed the config:\n%s", out)
	}
	if !strings.Contains(string(out), "max_uri_bytes: 4KiB") || !strings.Contains(string(out), "idle: 2m\n") {
		t.Errorf("marshalled units are not human-readable:\n%s", out)
	}
}

func TestEmbeddedConfig(t *testing.T) {
	c := Embedded()
	if c.Listen != "127.0.0.1:8080" || c.Admin.Address != "127.0.0.1:9901" {
		t.Fatalf("listen %q admin %q", c.Listen, c.Admin.Address)
	}
	if len(c.Upstreams) != 1 || c.Upstreams[0].Name != "demo" ||
		!reflect.DeepEqual(c.Upstreams[0].Nodes, []Node{{Addr: "127.0.0.1:9001", Weight: 1}}) {
		t.Fatalf("upstreams = %+v", c.Upstreams)
	}
	table, err := router.Compile(c.RouterSpecs())
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]int{"/api/echo": 0, "/api/echo/": 0, "/anything/else": 1, "/": 1} {
		r := table.Match([]byte("localhost:8080"), []byte("GET"), []byte(path), make([]byte, 0, 64))
		if !r.Found || r.Index != want || c.Routes[r.Index].Upstream != "demo" {
			t.Errorf("%s routed to %d (found=%v), want route %d to demo", path, r.Index, r.Found, want)
		}
	}
	if Embedded() == c {
		t.Error("Embedded must return a fresh Config each call")
	}
}

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "loopgate.yaml")
	if err := os.WriteFile(path, []byte(sampleYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil || c.Listen != "0.0.0.0:80" {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	_, err = Load(filepath.Join(t.TempDir(), "missing.yaml"))
	if err == nil || !strings.HasPrefix(err.Error(), "config: open ") || !strings.Contains(err.Error(), "missing.yaml") {
		t.Fatalf("Load(missing) error = %v", err)
	}
}

// minimal is a valid config the error cases extend.
const minimal = `
upstreams:
  - name: u
    nodes: [127.0.0.1:9001]
routes:
  - path: /a
    upstream: u
`

func TestDecodeErrors(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"listen: x\nmax_pipelined: 16\n", "config: max_pipelined: unknown field (line 2)"},
		{"limits:\n  max_pipelined: 16\n", "config: limits.max_pipelined: unknown field (line 2)"},
		{"upstreams:\n  - name: u\n    nodes:\n      - {addr: 1.2.3.4:80, wieght: 2}\n",
			`config: upstreams[0].nodes[0].wieght: unknown field, did you mean "weight"? (line 4)`},
		{"upstreams:\n  - name: u\n    nodes:\n      - addr: 1.2.3.4:80\n        weight: heavy\n",
			`config: upstreams[0].nodes[0].weight: want an integer, got "heavy" (line 5)`},
		{"upstreams:\n  - name: u\n    nodes:\n      - [1.2.3.4:80]\n",
			`config: upstreams[0].nodes[0]: want "host:port" or {addr: "host:port", weight: N} (line 4)`},
		{"loops: many\n", `config: loops: want an integer, got "many" (line 1)`},
		{"pin: yes please\n", `config: pin: want true or false, got "yes please" (line 1)`},
		{"timeouts:\n  idle: 60\n", `config: timeouts.idle: invalid duration 60: a unit is needed, such as "60s" or "60ms" (line 2)`},
		{"timeouts:\n  idle: 1m30\n", `config: timeouts.idle: invalid duration "1m30": want a number with a unit, such as "500ms", "1s" or "2m" (line 2)`},
		{"timeouts:\n  idle: [1s]\n", `config: timeouts.idle: want a duration such as "500ms" or "1s" (line 2)`},
		{"limits:\n  max_body_bytes: 10MB\n", `config: limits.max_body_bytes: invalid size "10MB": want bytes (4096) or a number with a unit B, KiB, MiB or GiB ("16KiB") (line 2)`},
		{"upstreams:\n  name: u\n", "config: upstreams: want a list, got a mapping (line 2)"},
		{"limits: 5\n", "config: limits: want a mapping of fields, got 5 (line 1)"},
		{"- 1\n", "config: want a mapping of fields, got a list (line 1)"},
		{"listen: a\n---\nlisten: b\n", "config: line 2: a second YAML document; the file must hold exactly one"},
		{"listen: [\n", "config: line 1: did not find expected node content"},
		// Every field in one style: what it wants, what it got, where.
		{"listen: [a]\n", "config: listen: want a string, got a list (line 1)"},
		{"filter_orders: 5\n", "config: filter_orders: want a mapping, got 5 (line 1)"},
		{"trusted_proxies: 10.0.0.0/8\n", `config: trusted_proxies: want a list, got "10.0.0.0/8" (line 1)`},
		{minimal + "    rate_limits:\n      - {rate: fast, per: 1s}\n", `config: routes[0].rate_limits[0].rate: want a number, got "fast" (line 9)`},
		{minimal + "    rate_limits:\n      - {rate: \"5\", per: 1s}\n", `config: routes[0].rate_limits[0].rate: want a number, got "5" (line 9)`},
		// An unknown key names the nearest known one, when one is near.
		{"upstreams:\n  - name: u\n    nodes: [h:1]\n    health_check: {timout: 1s}\n",
			`config: upstreams[0].health_check.timout: unknown field, did you mean "timeout"? (line 4)`},
		{"limts: {}\n", `config: limts: unknown field, did you mean "limits"? (line 1)`},
		{"ip_alow: []\n", `config: ip_alow: unknown field, did you mean "ip_allow"? (line 1)`},
		{minimal + "    retries: 2\n", "config: routes[0].retries: unknown field (line 8)"},
		// A tab in the indentation, with its line and column.
		{"limits:\n\tmax_header_count: 3\n", "config: line 2, column 1: a tab in the indentation; YAML indents with spaces only"},
		{"limits:\n  max_header_count: 3\n  \tmax_uri_bytes: 3\n", "config: line 3, column 3: a tab in the indentation; YAML indents with spaces only"},
		// The same words with no tab near: the decoder's own.
		{"listen: `x`\nauth:\n  jwt:\n    rs256_public_key: |\n\t\tnot a tab error\n", "config: found character that cannot start any token"},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml))
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q)\n got: %v\nwant: %s", c.yaml, err, c.want)
		}
	}
}

func TestValidationErrors(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"listen: localhost\n", `config: line 1: listen: missing port in address "localhost"`},
		{"listen: localhost:http\n", `config: line 1: listen: port "http" in address "localhost:http" is not a number from 0 to 65535 (0 picks a free port)`},
		{"listen: localhost:70000\n", `config: line 1: listen: port "70000" in address "localhost:70000" is not a number from 0 to 65535 (0 picks a free port)`},
		{"admin: 9901\n", `config: line 1: admin: missing port in address "9901"`},
		{"admin: 127.0.0.1:8080\n", `config: line 1: admin: same address as listen "127.0.0.1:8080"`},
		{"loops: -1\n", "config: line 1: loops: -1 is negative; 0 means one per CPU"},
		{"limits:\n  max_uri_bytes: -1\n", "config: line 2: limits.max_uri_bytes: must be positive, got -1B"},
		{"limits:\n  max_header_count: -5\n", "config: line 2: limits.max_header_count: must be positive, got -5"},
		{"limits:\n  max_conn_buffer: 8KiB\n", "config: line 2: limits.max_conn_buffer: 8KiB is smaller than max_header_bytes 16KiB, so a request head could not be buffered"},
		{"timeouts:\n  drain: -1s\n", "config: line 2: timeouts.drain: must be positive, got -1s"},
		{"upstreams:\n  - nodes: [1.2.3.4:80]\n", "config: line 2: upstreams[0].name: missing"},
		{"upstreams:\n  - name: a b\n    nodes: [1.2.3.4:80]\n", `config: line 2: upstreams[0].name: "a b": use only letters, digits, '-', '_' and '.'`},
		{"upstreams:\n  - name: u\n", "config: line 2: upstreams[0].nodes: at least one node is required"},
		{"upstreams:\n  - name: u\n    nodes: [1.2.3.4:80, 1.2.3.5:80, x]\n", `config: line 3: upstreams[0].nodes[2].addr: missing port in address "x"`},
		{"upstreams:\n  - name: u\n    nodes: [\":80\"]\n", `config: line 3: upstreams[0].nodes[0].addr: missing host in address ":80"`},
		{"upstreams:\n  - name: u\n    nodes: [\"h:0\"]\n", `config: line 3: upstreams[0].nodes[0].addr: port 0 in address "h:0"; a node needs a real port`},
		{"upstreams:\n  - name: u\n    nodes: [h:1, h:1]\n", `config: line 3: upstreams[0].nodes[1].addr: duplicate address "h:1" (also nodes[0])`},
		{"upstreams:\n  - name: u\n    nodes: [{addr: \"h:1\", weight: -2}]\n", "config: line 3: upstreams[0].nodes[0].weight: -2 is less than 1"},
		{"upstreams:\n  - name: u\n    nodes: [h:1]\n    balancer: fastest\n", `config: line 4: upstreams[0].balancer: unknown balancer "fastest" (want round_robin, weighted_round_robin, random or least_request)`},
		{"upstreams:\n  - name: u\n    nodes: [h:1]\n    connect_timeout: -1s\n", "config: line 4: upstreams[0].connect_timeout: must be positive, got -1s"},
		{"upstreams:\n  - name: u\n    nodes: [h:1]\n    max_idle: 10\n    max_conns: 5\n", "config: line 4: upstreams[0].max_idle: 10 exceeds max_conns 5"},
		{"upstreams:\n  - name: u\n    nodes: [h:1]\n    max_conns: -1\n", "config: line 4: upstreams[0].max_conns: must be positive, got -1"},
		{"upstreams:\n  - name: u\n    nodes: [h:1]\n  - name: u\n    nodes: [h:2]\n", `config: line 4: upstreams[1].name: duplicate name "u" (also upstreams[0])`},
		{minimal + "  - path: /b\n    upstream: nope\n", `config: line 9: routes[1].upstream: unknown upstream "nope" (known: u)`},
		{minimal + "  - path: /b\n    upstream: uu\n", `config: line 9: routes[1].upstream: unknown upstream "uu" (known: u)`},
		{"upstreams:\n  - {name: backend, nodes: [h:1]}\n  - {name: auth, nodes: [h:2]}\nroutes:\n  - {path: /, upstream: bakend}\n",
			`config: line 5: routes[0].upstream: unknown upstream "bakend" (did you mean "backend"? known: backend, auth)`},
		{"routes:\n  - {path: /, upstream: backend}\n", `config: line 2: routes[0].upstream: unknown upstream "backend" (no upstreams are configured)`},
		{minimal + "  - path: /b\n", "config: line 8: routes[1].upstream: missing"},
		{minimal + "  - id: route-0\n    path: /b\n    upstream: u\n", `config: line 8: routes[1].id: duplicate id "route-0" (also routes[0])`},
		{minimal + "  - id: \"my route\"\n    path: /b\n    upstream: u\n", `config: line 8: routes[1].id: "my route": use only letters, digits, '-', '_' and '.'`},
		{minimal + "  - path: /b\n    upstream: u\n    response_timeout: -2s\n", "config: line 10: routes[1].response_timeout: must be positive, got -2s"},
		{minimal + "  - path: /b/**/c\n    upstream: u\n", `config: line 8: routes[1].path: "/b/**/c": "**" must be the last segment`},
		{minimal + "  - upstream: u\n", "config: line 8: routes[1]: one of path or prefix must be set"},
		{minimal + "  - path: /A/\n    upstream: u\n", "config: line 8: routes[1]: duplicates routes[0] (same path or prefix, host and methods)"},
		{minimal + "  - path: /b\n    methods: [\"\"]\n    upstream: u\n", `config: line 9: routes[1].methods: [0] "" is not a valid HTTP method`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml))
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q)\n got: %v\nwant: %s", c.yaml, err, c.want)
		}
	}
}

func TestAllProblemsReportedAtOnce(t *testing.T) {
	_, err := Parse([]byte("listen: nope\nloops: -1\n" + minimal + "  - path: /b\n    upstream: gone\n"))
	want := "config: line 1: listen: missing port in address \"nope\"\n" +
		"config: line 2: loops: -1 is negative; 0 means one per CPU\n" +
		"config: line 11: routes[1].upstream: unknown upstream \"gone\" (known: u)"
	if err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
}

func TestListenerAddressForms(t *testing.T) {
	c := mustParse(t, "listen: \":0\"\nadmin: \"[::1]:9901\"\n")
	if c.Listen != ":0" || c.Admin.Address != "[::1]:9901" {
		t.Fatalf("listen %q admin %q", c.Listen, c.Admin.Address)
	}
}

func TestExplicitBalancerWins(t *testing.T) {
	c := mustParse(t, "upstreams:\n  - name: u\n    balancer: round_robin\n    nodes: [{addr: \"h:1\", weight: 5}]\n")
	if c.Upstreams[0].Balancer != RoundRobin {
		t.Fatalf("balancer %q, want the explicit round_robin", c.Upstreams[0].Balancer)
	}
}

// documentedRateLimit is the rate_limit filter's top level as
// docs/configuration.md documents its defaults: no redis section.
func documentedRateLimit() *limiter.Global {
	return &limiter.Global{
		RateLimit: limiter.Settings{TenantHeader: "X-Tenant-Id", MaxKeys: 131072, KeyIdle: units.Duration(time.Minute)},
		Cluster: limiter.ClusterSettings{FallbackNodes: 1, MinNodes: 1,
			Heartbeat: units.Duration(time.Second), MemberTTL: units.Duration(3 * time.Second), LiveMaxAge: units.Duration(30 * time.Second),
			FailureThreshold: 3, ProbeMin: units.Duration(100 * time.Millisecond), ProbeMax: units.Duration(2 * time.Second), RampStep: 0.10},
	}
}

// defaultRetry is a route's retry policy when it sets none.
var defaultRetry = Retry{Attempts: 2, Methods: []string{"GET", "HEAD", "OPTIONS", "PUT", "DELETE"}}

// defaultOutlier is an upstream's ejection policy when it sets none.
var defaultOutlier = Outlier{Consecutive: 5, BaseEjection: Duration(30 * time.Second), MaxEjection: Duration(300 * time.Second), MaxEjectedPercent: 50}

// defaultSlowStart is an upstream's slow_start when it sets none.
var defaultSlowStart = Duration(30 * time.Second)

func TestWebSocketOptions(t *testing.T) {
	const base = "upstreams:\n  - {name: a, nodes: [\"127.0.0.1:1\"]}\nroutes:\n  - prefix: /\n    upstream: a"
	off := mustParse(t, base+"\n    websocket: false\n")
	if r := off.Routes[0]; r.WebSocketOn() || len(r.Upgrade) != 0 {
		t.Fatalf("websocket: false: on %v, upgrade %v", r.WebSocketOn(), r.Upgrade)
	}
	custom := mustParse(t, base+"\n    upgrade: [WebSocket, my-proto]\n")
	if got := custom.Routes[0].Upgrade; !reflect.DeepEqual(got, []string{"websocket", "my-proto"}) {
		t.Fatalf("upgrade = %v, want lower-cased [websocket my-proto]", got)
	}
	for _, bad := range []string{
		"\n    upgrade: [h2c]\n",
		"\n    upgrade: [\"a b\"]\n",
		"\n    upgrade: [x, X]\n",
		"\n    websocket: false\n    upgrade: [websocket]\n",
	} {
		if _, err := Parse([]byte(base + bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
	if _, err := Parse([]byte("websocket: {buffer: 1KiB, max_tunnels: 0}\n" + base)); err == nil ||
		!strings.Contains(err.Error(), "websocket.buffer") {
		t.Errorf("websocket.buffer 1KiB: err = %v", err)
	}
}

func ptr[T any](v T) *T { return &v }
