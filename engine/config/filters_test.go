// Tests for the filter options: chains, orders and every validation rule.

package config

import (
	"fmt"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
	"github.com/loopgate/loopgate/filters/auth"
	"github.com/loopgate/loopgate/filters/transform"
)

// issueSample is the filter configuration from the feature request.
const issueSample = `
auth:
  header: Authorization
  jwt:
    hs256_secret: "change-me"
    issuer: loopgate-test
    audience: api
    roles_claim: roles
  api_keys:
    - {key: "k-123", consumer: alice, roles: [admin]}
trusted_proxies: ["127.0.0.1/32"]
upstreams:
  - {name: backend, nodes: ["127.0.0.1:9001"]}
  - {name: backend-v2, nodes: ["127.0.0.1:9002"]}
routes:
  - id: admin
    prefix: /admin/
    upstream: backend
    auth: required
    roles: [admin]
    ip_deny: ["10.0.0.0/8"]
  - id: public
    prefix: /public/
    upstream: backend
    auth: none
    gray: {header: X-Gray, value: "true", upstream: backend-v2}
`

func TestIssueSampleParses(t *testing.T) {
	c := mustParse(t, issueSample)
	a := authOf(c)
	if a.JWT.HS256Secret != "change-me" || a.JWT.Issuer != "loopgate-test" ||
		!reflect.DeepEqual(a.APIKeys, []auth.APIKey{{Key: "k-123", Consumer: "alice", Roles: []string{"admin"}}}) {
		t.Errorf("auth = %+v", a)
	}
	if !reflect.DeepEqual(c.TrustedProxies, []string{"127.0.0.1/32"}) {
		t.Errorf("trusted_proxies = %v", c.TrustedProxies)
	}
	admin, public := c.Routes[0], c.Routes[1]
	adminAuth := routeConfig[*auth.Route](admin, auth.Name)
	if adminAuth.Auth != auth.LevelRequired || !reflect.DeepEqual(adminAuth.Roles, []string{"admin"}) ||
		!reflect.DeepEqual(routeConfig[*access.IPLists](admin, access.NameIPAccess).Deny, []string{"10.0.0.0/8"}) {
		t.Errorf("admin route = %+v", admin)
	}
	if routeConfig[*auth.Route](public, auth.Name).Auth != auth.LevelNone ||
		*grayOf(public) != (transform.Gray{Upstream: "backend-v2", Header: "X-Gray", Value: "true"}) {
		t.Errorf("public route = %+v", public)
	}
	for i, want := range [][]string{
		{"request_id", "ip_access", "auth", "forwarded"},
		{"request_id", "ip_access", "gray", "forwarded"},
	} {
		if got := c.RouteFilters(i); !reflect.DeepEqual(got, want) {
			t.Errorf("RouteFilters(%d) = %v, want %v", i, got, want)
		}
	}
}

func TestRouteFiltersOfSample(t *testing.T) {
	c := mustParse(t, sampleYAML) // filters [request_id, forwarded, limits]; forwarded reordered to 50
	for i, want := range [][]string{
		// forwarded disabled; every option-enabled filter added
		{"request_id", "limits", "ip_access", "auth", "external_auth", "headers", "rewrite", "gray", "hash"},
		// ip_access listed and also enabled by the global lists; limits
		// listed, but without a limits section it has nothing to do
		{"forwarded", "request_id", "ip_access", "hash"},
		{"forwarded", "request_id", "ip_access", "gray", "hash"},
	} {
		if got := c.RouteFilters(i); !reflect.DeepEqual(got, want) {
			t.Errorf("RouteFilters(%d) = %v, want %v", i, got, want)
		}
	}
}

func TestRouteFiltersDefaultChain(t *testing.T) {
	c := mustParse(t, minimal)
	if got, want := c.RouteFilters(0), []string{"request_id", "ip_access", "forwarded"}; !reflect.DeepEqual(got, want) {
		t.Errorf("RouteFilters(0) = %v, want %v", got, want)
	}
	c = mustParse(t, "filters: []\n"+minimal) // an explicit empty list means no default filters
	if got := c.RouteFilters(0); len(got) != 0 {
		t.Errorf("with filters: [] RouteFilters(0) = %v, want none", got)
	}
}

func TestFilterOrder(t *testing.T) {
	c := mustParse(t, "filter_orders: {hash: 50, auth: 300}\n")
	for name, want := range map[string]int{"hash": 50, "auth": 300, "gray": 600, "request_id": 100} {
		if got, ok := c.FilterOrder(name); !ok || got != want {
			t.Errorf("FilterOrder(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
	if _, ok := c.FilterOrder("nope"); ok {
		t.Error("FilterOrder(nope) reported a known filter")
	}
	if n := len(filters.Registered()); n != 14 {
		t.Errorf("%d built-in filters; update docs/filters.md and this test", n)
	}
}

// twoUpstreams and creds build the error cases below.
const (
	twoUpstreams = "upstreams:\n  - {name: u, nodes: [127.0.0.1:9001]}\n  - {name: v, nodes: [127.0.0.1:9002]}\n"
	creds        = "auth:\n  api_keys: [{key: k, consumer: c}]\n"
)

// withRoute returns top-level YAML top, two upstreams u and v, and one route
// /a to u with the extra route options opts (one per line, unindented).
func withRoute(top, opts string) string {
	var b strings.Builder
	b.WriteString(top + twoUpstreams + "routes:\n  - path: /a\n    upstream: u\n")
	for _, line := range strings.SplitAfter(opts, "\n") {
		if line != "" {
			b.WriteString("    " + line)
		}
	}
	return b.String()
}

const allFilters = "request_id, trace_context, limits, ip_access, auth, external_auth, rate_limit, headers, rewrite, gray, direct_node, hash, forwarded, response_body"

func TestFilterValidationErrors(t *testing.T) {
	cases := []struct{ yaml, want string }{
		// names and orders
		{"filters: [request_id, nope]\n", `config: line 1: filters[1]: unknown filter "nope" (want one of ` + allFilters + ")"},
		{"filters: [auth, auth]\n", "config: line 1: filters[1]: auth is listed twice (also [0])"},
		{"filter_orders: {nope: 5}\n", "config: line 1: filter_orders.nope: unknown filter (want one of " + allFilters + ")"},
		{"filter_orders: {gray: 300}\n", "config: line 1: filter_orders.gray: order 300 is also auth's; orders must be unique"},
		{"filter_orders: {gray: 5, hash: 5}\n", "config: line 1: filter_orders.hash: order 5 is also gray's; orders must be unique"},
		{withRoute("", "filters: [nope]\n"), `config: line 7: routes[0].filters[0]: unknown filter "nope" (want one of ` + allFilters + ")"},
		{withRoute("", "disable_filters: [request_id, Auth]\n"), `config: line 7: routes[0].disable_filters[1]: unknown filter "Auth" (want one of ` + allFilters + ")"},
		{withRoute(creds, "auth: required\ndisable_filters: [auth]\n"), "config: line 10: routes[0].disable_filters[0]: auth is enabled by auth: required; remove one of them"},
		{withRoute("ip_deny: [1.2.3.4]\n", "disable_filters: [ip_access]\n"),
			"config: line 8: routes[0].disable_filters[0]: ip_access is enabled by the global ip_allow/ip_deny, which apply to every route; remove one of them"},
		{withRoute("", "hash: {user: true}\ndisable_filters: [hash]\n"), "config: line 8: routes[0].disable_filters[0]: hash is enabled by hash; remove one of them"},
		{withRoute("", "filters: [gray]\ndisable_filters: [gray]\n"), "config: line 8: routes[0].disable_filters[0]: gray is also in filters"},

		// client IP lists
		{"trusted_proxies: [10.0.0.0/33]\n", `config: line 1: trusted_proxies[0]: "10.0.0.0/33" is not an IP address or CIDR prefix`},
		{"ip_allow: [1.2.3.4, localhost]\n", `config: line 1: ip_allow[1]: "localhost" is not an IP address or CIDR prefix`},
		{"ip_deny: [\"1.2.3.4/\"]\n", `config: line 1: ip_deny[0]: "1.2.3.4/" is not an IP address or CIDR prefix`},
		{withRoute("", "ip_allow: [\"::1\", 300.1.1.1]\n"), `config: line 7: routes[0].ip_allow[1]: "300.1.1.1" is not an IP address or CIDR prefix`},
		{withRoute("", "ip_deny: [\"fe80::1%eth0\"]\n"), `config: line 7: routes[0].ip_deny[0]: "fe80::1%eth0" is not an IP address or CIDR prefix`},
		{withRoute("", "ip_deny: [10.0.0.0/8/8]\n"), `config: line 7: routes[0].ip_deny[0]: "10.0.0.0/8/8" is not an IP address or CIDR prefix`},

		// auth
		{"auth:\n  header: Bad Header\n", `config: line 2: auth.header: "Bad Header" is not a valid header name`},
		{"auth:\n  cache_ttl: -1s\n", "config: line 2: auth.cache_ttl: must be positive, got -1s"},
		{"auth:\n  cache_size: -1\n", "config: line 2: auth.cache_size: must be positive, got -1"},
		{"auth:\n  jwt:\n    leeway: -1s\n", "config: line 3: auth.jwt.leeway: must not be negative, got -1s"},
		{"auth:\n  jwt:\n    jwks_file: testdata/missing.json\n", "config: line 3: auth.jwt.jwks_file: open testdata/missing.json: no such file or directory"},
		{"auth:\n  jwt:\n    rs256_public_key_file: testdata\n", `config: line 3: auth.jwt.rs256_public_key_file: "testdata" is a directory`},
		{"auth:\n  jwt:\n    rs256_public_key: pem\n    rs256_public_key_file: testdata/rs256.pub.pem\n",
			"config: line 3: auth.jwt.rs256_public_key: both it and rs256_public_key_file are set; set one"},
		{"auth:\n  jwt:\n    es256_public_key_file: /nonexistent/es.pem\n", "config: line 3: auth.jwt.es256_public_key_file: open /nonexistent/es.pem: no such file or directory"},
		{"auth:\n  api_keys: [{key: \"\", consumer: a}]\n", "config: line 2: auth.api_keys[0].key: missing"},
		{"auth:\n  api_keys: [{key: k}]\n", "config: line 2: auth.api_keys[0].consumer: missing"},
		{"auth:\n  api_keys: [{key: k, consumer: a, roles: [ops, \"\"]}]\n", "config: line 2: auth.api_keys[0].roles[1]: empty role"},
		{withRoute("", "auth: maybe\n"), `config: line 7: routes[0].auth: unknown auth level "maybe" (want none or required)`},
		{withRoute("", "auth: required\n"), "config: line 7: routes[0].auth: required, but no credentials are configured: " +
			"set auth.jwt (hs256_secret, rs256_public_key[_file], es256_public_key[_file] or jwks_file) or auth.api_keys"},
		{withRoute("", "filters: [auth]\n"), "config: line 5: routes[0]: runs the auth filter (from filters), but " +
			"no credentials are configured: set auth.jwt (hs256_secret, rs256_public_key[_file], es256_public_key[_file] or jwks_file) or auth.api_keys"},
		{withRoute("", "roles: [admin]\n"), `config: line 7: routes[0].roles: set, but auth is "none"; roles need auth: required`},
		{withRoute(creds, "auth: required\nroles: [\"\"]\n"), "config: line 10: routes[0].roles[0]: empty role"},

		// external auth
		{"auth:\n  external: {upstream: nope}\n", `config: line 2: auth.external.upstream: unknown upstream "nope"`},
		{withRoute("", "external_auth: true\n"), "config: auth.external.upstream: missing, and routes[0] runs external_auth"},
		{withRoute("filters: [external_auth]\n", ""), "config: auth.external.upstream: missing, and routes[0] runs external_auth"},
		{"auth:\n  external: {path: auth}\n", `config: line 2: auth.external.path: "auth" must start with '/'`},
		{"auth:\n  external: {path: /a b}\n", `config: line 2: auth.external.path: "/a b" holds a space, a control character or '#'; percent-encode it`},
		{"auth:\n  external: {timeout: -1s}\n", "config: line 2: auth.external.timeout: must be positive, got -1s"},
		{"auth:\n  external: {forward_headers: [Cookie, \"a:b\"]}\n", `config: line 2: auth.external.forward_headers[1]: "a:b" is not a valid header name`},
		{"auth:\n  external: {copy_headers: [Connection]}\n",
			`config: line 2: auth.external.copy_headers[0]: "Connection" is managed by the proxy: framing and hop-by-hop headers cannot be edited`},

		// identity headers
		{"auth:\n  identity_headers: {subject: Authorization}\n", `config: line 2: auth.identity_headers.subject: "Authorization" is auth.header, which carries the credential`},
		{"auth:\n  header: X-Key\n  identity_headers: {kind: x-key}\n", `config: line 3: auth.identity_headers.kind: "x-key" is auth.header, which carries the credential`},
		{"auth:\n  identity_headers: {tenant: host}\n", "config: line 2: auth.identity_headers.tenant: Host cannot carry an identity"},
		{"auth:\n  identity_headers: {roles: x-user-id}\n", `config: line 2: auth.identity_headers.roles: "x-user-id" is also auth.identity_headers.subject`},
		{"auth:\n  identity_headers: {kind: \"X Kind\"}\n", `config: line 2: auth.identity_headers.kind: "X Kind" is not a valid header name`},
		{"auth:\n  identity_headers: {subject: Transfer-Encoding}\n",
			`config: line 2: auth.identity_headers.subject: "Transfer-Encoding" is managed by the proxy: framing and hop-by-hop headers cannot be edited`},
		{withRoute(creds, "auth: required\nrequest_headers: {set: {x-user-id: admin}}\n"),
			"config: line 10: routes[0].request_headers.set.x-user-id: X-User-Id is an identity header, set by the route's auth filters"},
		{withRoute("auth:\n  external: {upstream: v, copy_headers: [X-Team]}\n", "external_auth: true\nrequest_headers: {add: {X-Team: a}}\n"),
			"config: line 10: routes[0].request_headers.add.X-Team: X-Team is an identity header, set by the route's auth filters"},
		{"auth:\n  api_keys: [{key: k, consumer: \"a\\nb\"}]\n", "config: line 2: auth.api_keys[0].consumer: holds a control character; it is sent upstream in a header"},
		{"auth:\n  api_keys: [{key: k, consumer: a, tenant: \"t\\t\"}]\n", "config: line 2: auth.api_keys[0].tenant: holds a control character; it is sent upstream in a header"},
		{"auth:\n  api_keys: [{key: k, consumer: a, roles: [\"ops,admin\"]}]\n",
			`config: line 2: auth.api_keys[0].roles[0]: "ops,admin" holds a comma or a control character; roles are sent upstream comma-separated`},

		// limits
		{withRoute("", "limits: {max_body_bytes: 20MiB}\n"),
			"config: line 7: routes[0].limits.max_body_bytes: 20MiB exceeds the global limits.max_body_bytes 10MiB; a route may only tighten it"},
		{withRoute("", "limits: {max_header_count: 51}\n"),
			"config: line 7: routes[0].limits.max_header_count: 51 exceeds the global limits.max_header_count 50; a route may only tighten it"},
		{withRoute("limits: {max_uri_bytes: 1KiB}\n", "limits: {max_uri_bytes: 2KiB}\n"),
			"config: line 8: routes[0].limits.max_uri_bytes: 2KiB exceeds the global limits.max_uri_bytes 1KiB; a route may only tighten it"},
		{withRoute("", "limits: {max_header_bytes: -1}\n"), "config: line 7: routes[0].limits.max_header_bytes: must not be negative, got -1B"},
		{"limits: {temp_dir: testdata/nope}\n", "config: line 1: limits.temp_dir: stat testdata/nope: no such file or directory"},
		{"limits: {temp_dir: testdata/jwks.json}\n", `config: line 1: limits.temp_dir: "testdata/jwks.json" is not a directory`},

		// headers
		{withRoute("", "request_headers: {set: {Bad Name: x}}\n"), `config: line 7: routes[0].request_headers.set: "Bad Name" is not a valid header name`},
		{withRoute("", "request_headers: {set: {X-A: \"a\\r\\nX-B: b\"}}\n"), "config: line 7: routes[0].request_headers.set.X-A: value holds a control character (only tab is allowed)"},
		{withRoute("", "response_headers: {add: {X-A: \"a\\nb\"}}\n"), "config: line 7: routes[0].response_headers.add.X-A: value holds a control character (only tab is allowed)"},
		{withRoute("", "request_headers: {set: {X-A: \"a\\x7f\"}}\n"), "config: line 7: routes[0].request_headers.set.X-A: value holds a control character (only tab is allowed)"},
		{withRoute("", "request_headers: {remove: [A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q]}\n"),
			"config: line 7: routes[0].request_headers.remove: 17 entries, at most 16"},
		{withRoute("", "request_headers: {add: {content-length: \"5\"}}\n"),
			`config: line 7: routes[0].request_headers.add: "content-length" is managed by the proxy: framing and hop-by-hop headers cannot be edited`},
		{withRoute("", "response_headers: {remove: [X-Ok, Transfer-Encoding]}\n"),
			`config: line 7: routes[0].response_headers.remove[1]: "Transfer-Encoding" is managed by the proxy: framing and hop-by-hop headers cannot be edited`},
		{withRoute("", "request_headers: {remove: [\"\"]}\n"), `config: line 7: routes[0].request_headers.remove[0]: "" is not a valid header name`},

		// rewrite
		{withRoute("", "rewrite: {}\n"), "config: line 7: routes[0].rewrite: does nothing: set strip_prefix, regex or add_prefix"},
		{withRoute("", "rewrite: {strip_prefix: api}\n"), `config: line 7: routes[0].rewrite.strip_prefix: "api" must start with '/'`},
		{withRoute("", "rewrite: {strip_prefix: /api/../v1}\n"),
			`config: line 7: routes[0].rewrite.strip_prefix: "/api/../v1" holds a "." or ".." segment, which a normalised path never does`},
		{withRoute("", "rewrite: {add_prefix: \"/v1?x\"}\n"),
			`config: line 7: routes[0].rewrite.add_prefix: "/v1?x" holds a space, a control character, '?' or '#'; percent-encode it`},
		{withRoute("", "rewrite: {regex: \"(\"}\n"), "config: line 7: routes[0].rewrite.regex: error parsing regexp: missing closing ): `(`"},
		{withRoute("", "rewrite: {strip_prefix: /a, replacement: /b}\n"), "config: line 7: routes[0].rewrite.replacement: set without regex"},
		{withRoute("", "rewrite: {regex: a, replacement: \"/b c\"}\n"),
			`config: line 7: routes[0].rewrite.replacement: "/b c" holds a space, a control character, '?' or '#'; percent-encode it`},

		// gray
		{withRoute("", "gray: {header: X-Gray}\n"), "config: line 7: routes[0].gray.upstream: missing"},
		{withRoute("", "gray: {header: X-Gray, upstream: w}\n"), `config: line 7: routes[0].gray.upstream: unknown upstream "w"`},
		{withRoute("", "gray: {header: X-Gray, upstream: u}\n"), `config: line 7: routes[0].gray.upstream: "u" is the route's own upstream`},
		{withRoute("", "gray: {upstream: v}\n"), "config: line 7: routes[0].gray: selects nothing: set header, cookie or weight"},
		{withRoute("", "gray: {upstream: v, weight: 101}\n"), "config: line 7: routes[0].gray.weight: 101 is not a percentage from 0 to 100"},
		{withRoute("", "gray: {upstream: v, header: X-Gray, weight: -1}\n"), "config: line 7: routes[0].gray.weight: -1 is not a percentage from 0 to 100"},
		{withRoute("", "gray: {upstream: v, header: \"X Gray\"}\n"), `config: line 7: routes[0].gray.header: "X Gray" is not a valid header name`},
		{withRoute("", "gray: {upstream: v, cookie: \"a=b\"}\n"), `config: line 7: routes[0].gray.cookie: "a=b" is not a valid cookie name`},

		// hash
		{withRoute("", "hash: {}\n"), "config: line 7: routes[0].hash: set exactly one of header, cookie and user"},
		{withRoute("", "hash: {header: X-User, user: true}\n"), "config: line 7: routes[0].hash: set exactly one of header, cookie and user"},
		{withRoute("", "hash: {header: \"X;User\"}\n"), `config: line 7: routes[0].hash.header: "X;User" is not a valid header name`},
		{withRoute("", "hash: {cookie: \"s id\"}\n"), `config: line 7: routes[0].hash.cookie: "s id" is not a valid cookie name`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml))
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q)\n got: %v\nwant: %s", c.yaml, err, c.want)
		}
	}
}

// TestFilterOptionsAccepted pins down what the rules above must not reject.
func TestFilterOptionsAccepted(t *testing.T) {
	for _, text := range []string{
		"filter_orders: {auth: 300}\n", // same as the default: no clash with itself
		"filter_orders: {auth: 1000, forwarded: 300}\n",
		"filters: []\n",
		"ip_allow: [\"::/0\", \"fe80::1\", 192.168.0.1/24]\n", // host bits in a prefix are ignored
		"auth:\n  jwt: {rs256_public_key_file: testdata/rs256.pub.pem, es256_public_key_file: testdata/es256.pub.pem, jwks_file: testdata/jwks.json}\n",
		"auth:\n  api_keys: [{key: a, consumer: ci}, {key: b, consumer: ci}]\n", // key rotation: one consumer, two keys
		withRoute("auth:\n  external: {upstream: v, path: \"/auth?scope=x\"}\n", "external_auth: true\n"),
		withRoute("auth:\n  jwt: {hs256_secret: s}\n", "auth: required\nroles: [a, b]\n"),
		withRoute(creds, "filters: [auth]\n"), // auth from filters: credentials required, no roles
		"ip_allow: [\" 10.0.0.0/8 \"]\n",      // spaces are trimmed, as the filter does
		withRoute("", "limits: {max_uri_bytes: 8KiB, max_body_bytes: 1KiB}\n"),
		withRoute("", "request_headers: {set: {Host: example.com, X-Empty: \"\", X-Tab: \"a\\tb\"}}\n"),
		withRoute("", "rewrite: {add_prefix: /café}\n"),   // raw UTF-8 passes, as the parser tolerates it
		withRoute("", "rewrite: {regex: \"^/a/(.*)\"}\n"), // no replacement: the match is deleted
		withRoute("", "gray: {upstream: v, cookie: canary}\n"),
		withRoute("", "gray: {upstream: v, weight: 100}\n"),
		withRoute("", "hash: {user: true}\n"),
		withRoute("", "rewrite: {strip_prefix: /API/}\n"),
		withRoute("", "rewrite: {strip_prefix: /a.b/..c/}\n"), // dots inside a segment are not dot segments
		"auth:\n  identity_headers: {subject: \"\", tenant: \"\", roles: \"\", kind: \"\"}\n",
		"auth:\n  identity_headers: {subject: X-User-Name}\n", // may name a copy_headers entry
		// Outside auth routes a static identity header is the operator's own.
		withRoute("", "request_headers: {set: {X-User-Id: svc}}\n"),
	} {
		if _, err := Parse([]byte(text)); err != nil {
			t.Errorf("Parse(%q): %v", text, err)
		}
	}
}

func TestAPIKeysNeverInErrors(t *testing.T) {
	_, err := Parse([]byte("auth:\n  api_keys: [{key: sekrit-1, consumer: a}, {key: sekrit-1, consumer: b}]\n"))
	if err == nil || err.Error() != "config: line 2: auth.api_keys[1].key: duplicate key (also api_keys[0])" {
		t.Fatalf("err = %v", err)
	}
	if strings.Contains(err.Error(), "sekrit") {
		t.Fatalf("the error shows the key: %v", err)
	}
}

func TestFilterProblemsReportedTogether(t *testing.T) {
	_, err := Parse([]byte(withRoute("filters: [nope]\n", "auth: required\ngray: {upstream: u, header: X}\n")))
	want := `config: line 1: filters[0]: unknown filter "nope" (want one of ` + allFilters + ")\n" +
		"config: line 8: routes[0].auth: required, but no credentials are configured: " +
		"set auth.jwt (hs256_secret, rs256_public_key[_file], es256_public_key[_file] or jwks_file) or auth.api_keys\n" +
		`config: line 9: routes[0].gray.upstream: "u" is the route's own upstream`
	if err == nil || err.Error() != want {
		t.Fatalf("got:\n%v\nwant:\n%s", err, want)
	}
}

func TestFilterDecodeErrors(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{minimal + "    gray: {wieght: 1}\n", `config: routes[0].gray.wieght: unknown field, did you mean "weight"? (line 8)`},
		{minimal + "    limits: {max_body_bytes: 10MB}\n",
			`config: routes[0].limits.max_body_bytes: invalid size "10MB": want bytes (4096) or a number with a unit B, KiB, MiB or GiB ("16KiB") (line 8)`},
		{"filter_orders: {auth: first}\n", `config: filter_orders.auth: want an integer, got "first" (line 1)`},
		{minimal + "    request_headers: {set: {X-A: [1]}}\n", "config: routes[0].request_headers.set.X-A: want a string, got a list (line 8)"},
		{"auth:\n  jwt:\n    leeway: 5\n", `config: auth.jwt.leeway: invalid duration 5: a unit is needed, such as "5s" or "5ms" (line 3)`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml))
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q)\n got: %v\nwant: %s", c.yaml, err, c.want)
		}
	}
}

// TestFiltersDocCoversEveryFilter keeps docs/filters.md in step with the
// built-in filters: a section and a row of the order table for each.
func TestFiltersDocCoversEveryFilter(t *testing.T) {
	doc, err := os.ReadFile("../../docs/filters.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	for _, name := range filterNamesByOrder(&Config{}) {
		if !strings.Contains(text, "\n### `"+name+"`\n") {
			t.Errorf("docs/filters.md has no section \"### `%s`\"", name)
		}
		order, _ := (&Config{}).FilterOrder(name)
		row := fmt.Sprintf("\n| `%s` | %d |", name, order)
		if !strings.Contains(text, row) {
			t.Errorf("docs/filters.md's order table lacks %q", row)
		}
	}
}

// defaultIdentityHeaders is auth.identity_headers as documented.
func defaultIdentityHeaders() auth.IdentityHeaders {
	name := func(s string) *string { return &s }
	return auth.IdentityHeaders{Subject: name("X-User-Id"), Tenant: name("X-User-Tenant"), Roles: name("X-User-Roles"), Kind: name("X-Auth-Kind")}
}

func TestIdentityHeadersDefaults(t *testing.T) {
	if got := authOf(Default()).IdentityHeaders; !reflect.DeepEqual(got, defaultIdentityHeaders()) {
		t.Errorf("Default() identity headers %s, want the documented ones", showIdentity(got))
	}
	// A field left out keeps its default; an explicit "" turns it off.
	c := mustParse(t, "auth:\n  identity_headers: {subject: X-Sub, tenant: \"\"}\n")
	want := defaultIdentityHeaders()
	sub, none := "X-Sub", ""
	want.Subject, want.Tenant = &sub, &none
	if got := authOf(c).IdentityHeaders; !reflect.DeepEqual(got, want) {
		t.Errorf("parsed %s, want %s", showIdentity(got), showIdentity(want))
	}
	if err := func() error { _, err := Parse([]byte("auth:\n  identity_headers: {user: X}\n")); return err }(); err == nil ||
		err.Error() != "config: auth.identity_headers.user: unknown field (line 2)" {
		t.Errorf("unknown identity_headers key: %v", err)
	}
}

func showIdentity(h auth.IdentityHeaders) string {
	var parts []string
	for _, f := range []struct {
		key  string
		name *string
	}{{"subject", h.Subject}, {"tenant", h.Tenant}, {"roles", h.Roles}, {"kind", h.Kind}} {
		if f.name == nil {
			parts = append(parts, f.key+"=<unset>")
		} else {
			parts = append(parts, fmt.Sprintf("%s=%q", f.key, *f.name))
		}
	}
	return "{" + strings.Join(parts, " ") + "}"
}

func TestIdentityHeaderNames(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want []string
	}{
		{"", []string{"X-User-Id", "X-User-Tenant", "X-User-Roles", "X-Auth-Kind", "X-User-Name"}},
		{"auth:\n  identity_headers: {subject: x-sub, tenant: \"\", roles: \"\", kind: \"\"}\n  external: {copy_headers: [X-SUB, x-team-id, X-Team-Id]}\n",
			[]string{"X-Sub", "X-Team-Id"}},
		{"auth:\n  identity_headers: {subject: \"\", tenant: \"\", roles: \"\", kind: \"\"}\n  external: {copy_headers: []}\n", nil},
	} {
		if got := mustParse(t, c.yaml).IdentityHeaderNames(); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: IdentityHeaderNames() = %q, want %q", c.yaml, got, c.want)
		}
	}
	// Each call returns its own slice.
	cfg := Default()
	cfg.IdentityHeaderNames()[0] = "changed"
	if cfg.IdentityHeaderNames()[0] != "X-User-Id" {
		t.Error("IdentityHeaderNames shares its result")
	}
}

// TestFormerDuplicatesCheckedOnce: what engine/config and the filters used
// to check each on their own (header names, the rewrite regex, IP lists,
// the header edit count) is checked once, by the filter's Validate through
// Parse, with the message Parse always gave: one line per problem, never
// two. Each filter package's tests show its filter is built from what its
// Validate compiled (TestRewriteRegexCompiledOnce, TestHeaderEditsCheckedOnce,
// TestIPListsParsedOnce).
func TestFormerDuplicatesCheckedOnce(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{withRoute("", "request_headers: {set: {Bad Name: x}}\n"), `config: line 7: routes[0].request_headers.set: "Bad Name" is not a valid header name`},
		{withRoute("", "hash: {header: \"X;User\"}\n"), `config: line 7: routes[0].hash.header: "X;User" is not a valid header name`},
		{"auth:\n  external: {forward_headers: [\"a:b\"]}\n", `config: line 2: auth.external.forward_headers[0]: "a:b" is not a valid header name`},
		{withRoute("", "rewrite: {regex: \"(\"}\n"), "config: line 7: routes[0].rewrite.regex: error parsing regexp: missing closing ): `(`"},
		{"trusted_proxies: [10.0.0.0/33]\n", `config: line 1: trusted_proxies[0]: "10.0.0.0/33" is not an IP address or CIDR prefix`},
		{"ip_allow: [1.2.3.4, localhost]\n", `config: line 1: ip_allow[1]: "localhost" is not an IP address or CIDR prefix`},
		{withRoute("", "ip_deny: [\"fe80::1%eth0\"]\n"), `config: line 7: routes[0].ip_deny[0]: "fe80::1%eth0" is not an IP address or CIDR prefix`},
		{withRoute("", "request_headers: {remove: [A, B, C, D, E, F, G, H, I, J, K, L, M, N, O, P, Q]}\n"),
			"config: line 7: routes[0].request_headers.remove: 17 entries, at most 16"},
		{withRoute("", "rewrite: {strip_prefix: \"/a%zz\"}\n"), `config: line 7: routes[0].rewrite.strip_prefix: "/a%zz": ` + badEscape(t)},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q)\n got: %v\nwant: %s", c.yaml, err, c.want)
		}
	}
	// The lists are parsed once, by Validate, and kept for the engine.
	c := mustParse(t, "trusted_proxies: [\" 10.1.2.3/8 \", \"::ffff:192.0.2.1\"]\n")
	if got, want := c.TrustedPrefixes(), []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.1/32")}; !reflect.DeepEqual(got, want) {
		t.Errorf("TrustedPrefixes() = %v, want %v", got, want)
	}
}

// badEscape is how codec.NormalizePath refuses "%zz".
func badEscape(t *testing.T) string {
	_, _, err := codec.NormalizePath(nil, []byte("/a%zz"))
	if err == nil {
		t.Fatal("NormalizePath accepted %zz")
	}
	return err.Error()
}

// TestFilterKeysThroughMerges: a filter's keys reached through a YAML merge
// (<<) go to the filter like written ones, and a written key overrides a
// merged one, as for the gateway's own keys.
func TestFilterKeysThroughMerges(t *testing.T) {
	c := mustParse(t, creds+twoUpstreams+`routes:
  - &base
    path: /z
    upstream: u
    auth: required
    gray: {upstream: v, header: X-Gray}
  - <<: *base
    path: /a
    gray: {upstream: v, cookie: canary}
`)
	if a := routeConfig[*auth.Route](c.Routes[1], auth.Name); a.Auth != auth.LevelRequired {
		t.Errorf("merged auth: %q, want required", a.Auth)
	}
	if g := grayOf(c.Routes[1]); g.Cookie != "canary" || g.Header != "" {
		t.Errorf("gray %+v: the route's own gray should override the merged one", g)
	}
	if got, want := c.RouteFilters(1), []string{"request_id", "ip_access", "auth", "gray", "forwarded"}; !reflect.DeepEqual(got, want) {
		t.Errorf("RouteFilters(1) = %v, want %v", got, want)
	}
}
