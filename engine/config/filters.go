// Filter configuration: the default chain, auth, client IP, and the per-route
// filter options.

package config

import (
	"net/textproto"
	"sort"
	"strings"
)

// The built-in filter names, usable in Config.Filters and in a route's
// filters / disable_filters. Each has a default order (lower runs first);
// filter_orders overrides it. A route's chain is the global list plus its
// additions, minus its opt-outs, plus every filter its own options enable
// (auth, ip lists, headers, rewrite, gray, hash, limits).
const (
	FilterRequestID    = "request_id"    // order 100: X-Request-Id, generated when absent
	FilterLimits       = "limits"        // order 150: per-route limits tighter than the global ones
	FilterIPAccess     = "ip_access"     // order 200: allow/deny lists and bans
	FilterAuth         = "auth"          // order 300: JWT and API keys
	FilterExternalAuth = "external_auth" // order 350: sub-request to an auth service
	FilterHeaders      = "headers"       // order 400: request/response header set/add/remove
	FilterRewrite      = "rewrite"       // order 500: path rewrite
	FilterGray         = "gray"          // order 600: canary routing to another upstream
	FilterHash         = "hash"          // order 700: consistent-hash stickiness
	FilterForwarded    = "forwarded"     // order 800: X-Forwarded-For/-Proto/-Host, X-Real-IP
)

// DefaultFilterOrders are the built-in orders. Read-only.
var DefaultFilterOrders = map[string]int{
	FilterRequestID: 100, FilterLimits: 150, FilterIPAccess: 200, FilterAuth: 300,
	FilterExternalAuth: 350, FilterHeaders: 400, FilterRewrite: 500, FilterGray: 600,
	FilterHash: 700, FilterForwarded: 800,
}

// Route auth levels, in Route.Auth.
const (
	AuthNone     = "none"
	AuthRequired = "required"
)

// FilterOrder returns the order of the named filter: its filter_orders entry
// when there is one, else its DefaultFilterOrders entry. ok is false for an
// unknown name. Safe for concurrent use on a Config nobody is modifying.
func (c *Config) FilterOrder(name string) (order int, ok bool) {
	order, ok = DefaultFilterOrders[name]
	if !ok {
		return 0, false
	}
	if o, set := c.FilterOrders[name]; set {
		order = o
	}
	return order, true
}

// RouteFilters returns the names of the filters route i runs, in chain order
// (ascending FilterOrder):
//
//	filters - routes[i].disable_filters + routes[i].filters
//	        + the filters routes[i]'s own options enable
//
// The options are: auth: required (auth), external_auth: true
// (external_auth), any ip_allow/ip_deny list, global or the route's
// (ip_access), limits (limits), request_headers or response_headers
// (headers), rewrite, gray and hash. limits, headers, rewrite, gray and hash
// act only on their route's own section, so without it they are left out
// even when listed. Unknown names are left out too; Validate reports them.
// Safe for concurrent use on a Config nobody is modifying.
func (c *Config) RouteFilters(i int) []string {
	r := &c.Routes[i]
	on := make(map[string]bool, len(DefaultFilterOrders))
	for _, n := range c.Filters {
		on[n] = true
	}
	for _, n := range r.DisableFilters {
		delete(on, n)
	}
	for _, n := range r.Filters {
		on[n] = true
	}
	for n := range c.optionFilters(r) {
		on[n] = true
	}
	configured := map[string]bool{
		FilterLimits:  r.Limits != nil,
		FilterHeaders: r.RequestHeaders != nil || r.ResponseHeaders != nil,
		FilterRewrite: r.Rewrite != nil,
		FilterGray:    r.Gray != nil,
		FilterHash:    r.Hash != nil,
	}
	names := make([]string, 0, len(on))
	for n := range on {
		_, known := DefaultFilterOrders[n]
		if needs, ok := configured[n]; known && (!ok || needs) {
			names = append(names, n)
		}
	}
	sort.Slice(names, func(a, b int) bool {
		oa, _ := c.FilterOrder(names[a])
		ob, _ := c.FilterOrder(names[b])
		return oa < ob || oa == ob && names[a] < names[b]
	})
	return names
}

// optionFilters maps each filter r's options enable to the option that
// enables it, for RouteFilters and for Validate's messages.
func (c *Config) optionFilters(r *Route) map[string]string {
	m := make(map[string]string)
	if r.Auth == AuthRequired {
		m[FilterAuth] = "auth: required"
	}
	if r.ExternalAuth {
		m[FilterExternalAuth] = "external_auth: true"
	}
	switch {
	case len(r.IPAllow) > 0 || len(r.IPDeny) > 0:
		m[FilterIPAccess] = "the route's ip_allow/ip_deny"
	case len(c.IPAllow) > 0 || len(c.IPDeny) > 0:
		m[FilterIPAccess] = "the global ip_allow/ip_deny, which apply to every route"
	}
	if r.Limits != nil {
		m[FilterLimits] = "limits"
	}
	if r.RequestHeaders != nil || r.ResponseHeaders != nil {
		m[FilterHeaders] = "request_headers/response_headers"
	}
	if r.Rewrite != nil {
		m[FilterRewrite] = "rewrite"
	}
	if r.Gray != nil {
		m[FilterGray] = "gray"
	}
	if r.Hash != nil {
		m[FilterHash] = "hash"
	}
	return m
}

// Auth configures credential checks. A route opts in with auth: required.
type Auth struct {
	Header string `yaml:"header"` // where credentials come from: "Bearer <jwt>" or a raw API key; default "Authorization"

	JWT     JWT      `yaml:"jwt"`
	APIKeys []APIKey `yaml:"api_keys,omitempty"` // default none

	CacheTTL  Duration `yaml:"cache_ttl"`  // how long a verified credential is trusted without re-verifying; default 30s
	CacheSize int      `yaml:"cache_size"` // verified credentials kept per loop; default 10000 (oldest evicted)

	// IdentityHeaders name the upstream request headers the auth filter
	// sets for a request it admitted. Default {subject: X-User-Id, tenant:
	// X-User-Tenant, roles: X-User-Roles, kind: X-Auth-Kind}.
	IdentityHeaders IdentityHeaders `yaml:"identity_headers"`

	External ExternalAuth `yaml:"external"` // used by routes with external_auth: true
}

// IdentityHeaders carry the verified identity to the upstream, as Kong and
// APISIX do: on a route where the auth filter admitted a request, each
// header is set to the verified value, replacing any field the client sent,
// or removed when the identity has no value for it. A field left out takes
// its default; an explicit "" turns that header off.
//
// The gateway treats every name here, with auth.external.copy_headers, as
// an identity header (see Config.IdentityHeaderNames): the engine removes
// client-sent copies of them on every route, with or without auth, so an
// upstream never sees a client's own value under these names.
type IdentityHeaders struct {
	Subject *string `yaml:"subject"` // JWT sub or API key consumer; default "X-User-Id"
	Tenant  *string `yaml:"tenant"`  // the tenant claim or API key tenant; default "X-User-Tenant"
	Roles   *string `yaml:"roles"`   // roles joined with ","; default "X-User-Roles"
	Kind    *string `yaml:"kind"`    // credential kind, "jwt" or "api_key"; default "X-Auth-Kind"
}

// The default identity header names.
const (
	DefaultSubjectHeader = "X-User-Id"
	DefaultTenantHeader  = "X-User-Tenant"
	DefaultRolesHeader   = "X-User-Roles"
	DefaultKindHeader    = "X-Auth-Kind"
)

// identityField is one identity header and its config key.
type identityField struct {
	key  string
	name *string // nil before defaults are applied
}

// fields lists the identity headers in a fixed order.
func (h *IdentityHeaders) fields() [4]identityField {
	return [4]identityField{{"subject", h.Subject}, {"tenant", h.Tenant}, {"roles", h.Roles}, {"kind", h.Kind}}
}

// IdentityHeaderNames returns every header name the gateway manages as
// identity: the enabled auth.identity_headers and every
// auth.external.copy_headers entry, in canonical case, without duplicates
// (compared case-insensitively), identity headers first. The engine strips
// client-sent fields of these names from the upstream request on every
// route; the auth filters then set their verified values. Each call returns
// a new slice. Safe for concurrent use on a Config nobody is modifying.
func (c *Config) IdentityHeaderNames() []string {
	var names []string
	add := func(n string) {
		if n == "" {
			return
		}
		n = textproto.CanonicalMIMEHeaderKey(n)
		for _, have := range names {
			if strings.EqualFold(have, n) {
				return
			}
		}
		names = append(names, n)
	}
	for _, f := range c.Auth.IdentityHeaders.fields() {
		if f.name != nil {
			add(*f.name)
		}
	}
	for _, n := range c.Auth.External.CopyHeaders {
		add(n)
	}
	return names
}

// JWT configures token verification. Any combination of keys may be set; a
// token's alg header picks the key (alg "none" is always rejected).
type JWT struct {
	HS256Secret        string   `yaml:"hs256_secret"`          // shared secret for HS256
	RS256PublicKey     string   `yaml:"rs256_public_key"`      // inline PEM
	RS256PublicKeyFile string   `yaml:"rs256_public_key_file"` // PEM file
	ES256PublicKey     string   `yaml:"es256_public_key"`      // inline PEM (P-256)
	ES256PublicKeyFile string   `yaml:"es256_public_key_file"` // PEM file
	JWKSFile           string   `yaml:"jwks_file"`             // JSON Web Key Set file (RSA and EC P-256 keys, matched by kid)
	Issuer             string   `yaml:"issuer"`                // required iss when set; default "" = not checked
	Audience           string   `yaml:"audience"`              // required aud (string or list) when set; default "" = not checked
	RolesClaim         string   `yaml:"roles_claim"`           // claim holding roles (string or list); default "roles"
	TenantClaim        string   `yaml:"tenant_claim"`          // claim holding the tenant; default "tenant"
	Leeway             Duration `yaml:"leeway"`                // clock skew allowed on exp/nbf; default 0s
}

// APIKey maps a static key to a consumer.
type APIKey struct {
	Key      string   `yaml:"key"`      // the key as sent in the auth header
	Consumer string   `yaml:"consumer"` // becomes the identity's subject
	Tenant   string   `yaml:"tenant,omitempty"`
	Roles    []string `yaml:"roles,omitempty"`
}

// ExternalAuth asks an auth service about each request on routes that set
// external_auth: true.
type ExternalAuth struct {
	Upstream       string   `yaml:"upstream"`        // upstream (by name) serving the auth endpoint; required when used
	Path           string   `yaml:"path"`            // request path; default "/auth"
	Timeout        Duration `yaml:"timeout"`         // answer deadline; default 1s; expiry: 503 (or pass with fail_open)
	ForwardHeaders []string `yaml:"forward_headers"` // request headers sent along; default [Authorization, Cookie]
	CopyHeaders    []string `yaml:"copy_headers"`    // response headers copied to the upstream request on 2xx, and identity headers client copies of which are removed on every route; default [X-User-Id, X-User-Name, X-User-Roles]
	FailOpen       bool     `yaml:"fail_open"`       // let requests through when the service is down or slow; default false
}

// HeaderOps edits a head.
type HeaderOps struct {
	Set    map[string]string `yaml:"set,omitempty"`    // replace (or add) these headers
	Add    map[string]string `yaml:"add,omitempty"`    // add alongside existing ones
	Remove []string          `yaml:"remove,omitempty"` // drop these headers
}

// Rewrite changes the path sent upstream (the route still matches the
// request's path). Applied in order: strip_prefix, regex, add_prefix, to the
// normalised path the route matched; the result starts with "/".
type Rewrite struct {
	// StripPrefix is removed when the path starts with it as whole
	// segments, compared as routes compare (ASCII case-insensitively):
	// "/api" and "/api/" both strip "/API/users" to "/users" and "/api" to
	// "/", but leave "/apiv2" alone. Default "" = nothing stripped.
	StripPrefix string `yaml:"strip_prefix"`
	Regex       string `yaml:"regex"`       // RE2 pattern, compiled at load time
	Replacement string `yaml:"replacement"` // with $1-style groups; used with regex
	AddPrefix   string `yaml:"add_prefix"`  // prepended with exactly one '/' at the join; default ""
}

// Gray sends part of a route's traffic to another upstream: requests whose
// header (or cookie) equals Value, and/or Weight percent of the rest.
type Gray struct {
	Upstream string `yaml:"upstream"` // required: the canary upstream
	Header   string `yaml:"header"`   // e.g. X-Gray
	Cookie   string `yaml:"cookie"`   // cookie name, alternative to header
	Value    string `yaml:"value"`    // value that selects the canary; default "true"
	Weight   int    `yaml:"weight"`   // percent of other requests sent to the canary (0-100); default 0
}

// Hash picks a node by consistent hashing, so the same key keeps landing on
// the same node.
type Hash struct {
	Header string `yaml:"header"` // hash this request header
	Cookie string `yaml:"cookie"` // or this cookie
	User   bool   `yaml:"user"`   // or the authenticated subject
}

// RouteLimits tighten the global limits for one route; zero inherits.
type RouteLimits struct {
	MaxURIBytes    ByteSize `yaml:"max_uri_bytes"`
	MaxHeaderCount int      `yaml:"max_header_count"`
	MaxHeaderBytes ByteSize `yaml:"max_header_bytes"`
	MaxBodyBytes   ByteSize `yaml:"max_body_bytes"`
}

func applyFilterDefaults(c *Config) {
	a := &c.Auth
	setDefault(&a.Header, "Authorization")
	setDefault(&a.CacheTTL, defaultAuthCacheTTL)
	setDefault(&a.CacheSize, 10000)
	setDefault(&a.JWT.RolesClaim, "roles")
	setDefault(&a.JWT.TenantClaim, "tenant")
	ih := &a.IdentityHeaders
	setDefaultName(&ih.Subject, DefaultSubjectHeader)
	setDefaultName(&ih.Tenant, DefaultTenantHeader)
	setDefaultName(&ih.Roles, DefaultRolesHeader)
	setDefaultName(&ih.Kind, DefaultKindHeader)
	e := &a.External
	setDefault(&e.Path, "/auth")
	setDefault(&e.Timeout, defaultExternalTimeout)
	if e.ForwardHeaders == nil {
		e.ForwardHeaders = []string{"Authorization", "Cookie"}
	}
	if e.CopyHeaders == nil {
		e.CopyHeaders = []string{"X-User-Id", "X-User-Name", "X-User-Roles"}
	}
	if c.Filters == nil {
		c.Filters = []string{FilterRequestID, FilterIPAccess, FilterForwarded}
	}
	for i := range c.Routes {
		r := &c.Routes[i]
		setDefault(&r.Auth, AuthNone)
		if r.Gray != nil {
			setDefault(&r.Gray.Value, "true")
		}
	}
}

// setDefaultName sets an optional name left out of the config. An explicit
// "" is a value, not an absence: it stays, and turns the header off.
func setDefaultName(field **string, def string) {
	if *field == nil {
		*field = &def
	}
}
