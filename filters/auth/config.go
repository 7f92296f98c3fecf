// The auth and external_auth filters' configuration types, their defaults,
// and their registration.

package auth

import (
	"fmt"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool/units"
)

// The names the config gives this package's filters.
const (
	Name         = "auth"          // JWT and API keys
	NameExternal = "external_auth" // a sub-request to an auth service
)

func init() {
	filters.Register(filters.Registration{
		Name: Name, Order: 300, SetsIdentity: true,
		Global:  func() filters.GlobalConfig { return new(Global) },
		Route:   func() filters.RouteConfig { return new(Route) },
		Prepare: prepareVerifier,
		New:     newAuth,
		Service: func() any { return NewRevocations() }, // the server's, shared by every version's verifier
	})
	filters.Register(filters.Registration{
		Name: NameExternal, Order: 350, SetsIdentity: true,
		Route: func() filters.RouteConfig { return new(ExternalRoute) },
		New:   newExternal, // its settings are auth.external, in Global
	})
}

// Global is the auth filters' top-level key, auth. external_auth reads its
// External section.
type Global struct {
	Auth Config `yaml:"auth"`
}

// Config configures credential checks (the auth section). A route opts in
// with auth: required.
type Config struct {
	Header string `yaml:"header"` // where credentials come from: "Bearer <jwt>" or a raw API key; default "Authorization"

	JWT     JWT      `yaml:"jwt"`
	APIKeys []APIKey `yaml:"api_keys,omitempty"` // default none

	CacheTTL  units.Duration `yaml:"cache_ttl"`  // how long a verified credential is trusted without re-verifying; default 30s
	CacheSize int            `yaml:"cache_size"` // verified credentials kept per loop; default 10000 (oldest evicted)

	// IdentityHeaders name the upstream request headers the auth filter
	// sets for a request it admitted. Default {subject: X-User-Id, tenant:
	// X-User-Tenant, roles: X-User-Roles, kind: X-Auth-Kind}.
	IdentityHeaders IdentityHeaders `yaml:"identity_headers"`

	External ExternalAuth `yaml:"external"` // used by routes with external_auth: true
}

// JWT configures token verification. Any combination of keys may be set; a
// token's alg header picks the key (alg "none" is always rejected). Keys
// are parsed by NewVerifier, not by Validate.
type JWT struct {
	HS256Secret        string         `yaml:"hs256_secret"`          // shared secret for HS256
	RS256PublicKey     string         `yaml:"rs256_public_key"`      // inline PEM
	RS256PublicKeyFile string         `yaml:"rs256_public_key_file"` // PEM file
	ES256PublicKey     string         `yaml:"es256_public_key"`      // inline PEM (P-256)
	ES256PublicKeyFile string         `yaml:"es256_public_key_file"` // PEM file
	JWKSFile           string         `yaml:"jwks_file"`             // JSON Web Key Set file (RSA and EC P-256 keys, matched by kid)
	Issuer             string         `yaml:"issuer"`                // required iss when set; default "" = not checked
	Audience           string         `yaml:"audience"`              // required aud (string or list) when set; default "" = not checked
	RolesClaim         string         `yaml:"roles_claim"`           // claim holding roles (string or list); default "roles"
	TenantClaim        string         `yaml:"tenant_claim"`          // claim holding the tenant; default "tenant"
	Leeway             units.Duration `yaml:"leeway"`                // clock skew allowed on exp/nbf; default 0s
}

// APIKey maps a static key to a consumer.
type APIKey struct {
	Key      string   `yaml:"key"`      // the key as sent in the auth header
	Consumer string   `yaml:"consumer"` // becomes the identity's subject
	Tenant   string   `yaml:"tenant,omitempty"`
	Roles    []string `yaml:"roles,omitempty"`
}

// IdentityHeaders carry the verified identity to the upstream, as Kong and
// APISIX do: on a route where the auth filter admitted a request, each
// header is set to the verified value, replacing any field the client sent,
// or removed when the identity has no value for it. A field left out takes
// its default; an explicit "" turns that header off.
//
// The gateway treats every name here, with auth.external.copy_headers, as
// an identity header (Global.IdentityHeaders): the engine removes
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

// ExternalAuth asks an auth service about each request on routes that set
// external_auth: true.
type ExternalAuth struct {
	Upstream       string         `yaml:"upstream"`        // upstream (by name) serving the auth endpoint; required when used
	Path           string         `yaml:"path"`            // request path; default "/auth"
	Timeout        units.Duration `yaml:"timeout"`         // answer deadline; default 1s; expiry: 503 (or pass with fail_open)
	ForwardHeaders []string       `yaml:"forward_headers"` // request headers sent along; default [Authorization, Cookie]
	CopyHeaders    []string       `yaml:"copy_headers"`    // response headers copied to the upstream request on 2xx, and identity headers client copies of which are removed on every route; default [X-User-Id, X-User-Name, X-User-Roles]
	FailOpen       bool           `yaml:"fail_open"`       // let requests through when the service is down or slow; default false
}

// Route is the auth filter's route keys.
type Route struct {
	Auth  string   `yaml:"auth,omitempty"`  // "none" (default) or "required"
	Roles []string `yaml:"roles,omitempty"` // with auth: required, the identity needs one of these; 403, code 40301
}

// Route auth levels, in Route.Auth.
const (
	LevelNone     = "none"
	LevelRequired = "required"
)

// ExternalRoute is the external_auth filter's route key.
type ExternalRoute struct {
	ExternalAuth bool `yaml:"external_auth,omitempty"` // ask auth.external before forwarding; default false
}

var (
	_ filters.GlobalConfig   = (*Global)(nil)
	_ filters.IdentitySource = (*Global)(nil)
	_ filters.RouteConfig    = (*Route)(nil)
	_ filters.RouteConfig    = (*ExternalRoute)(nil)
)

// Provision applies the defaults the field comments state.
func (g *Global) Provision() {
	a := &g.Auth
	filters.SetDefault(&a.Header, "Authorization")
	filters.SetDefault(&a.CacheTTL, units.Duration(30*time.Second))
	filters.SetDefault(&a.CacheSize, 10000)
	filters.SetDefault(&a.JWT.RolesClaim, "roles")
	filters.SetDefault(&a.JWT.TenantClaim, "tenant")
	ih := &a.IdentityHeaders
	setDefaultName(&ih.Subject, DefaultSubjectHeader)
	setDefaultName(&ih.Tenant, DefaultTenantHeader)
	setDefaultName(&ih.Roles, DefaultRolesHeader)
	setDefaultName(&ih.Kind, DefaultKindHeader)
	e := &a.External
	filters.SetDefault(&e.Path, "/auth")
	filters.SetDefault(&e.Timeout, units.Duration(time.Second))
	if e.ForwardHeaders == nil {
		e.ForwardHeaders = []string{"Authorization", "Cookie"}
	}
	if e.CopyHeaders == nil {
		e.CopyHeaders = []string{"X-User-Id", "X-User-Name", "X-User-Roles"}
	}
}

// setDefaultName sets an optional name left out of the config. An explicit
// "" is a value, not an absence: it stays, and turns the header off.
func setDefaultName(field **string, def string) {
	if *field == nil {
		*field = &def
	}
}

// IdentityHeaders returns the names the auth filters set: the enabled
// identity headers, then every auth.external.copy_headers entry.
func (g *Global) IdentityHeaders() []string {
	var names []string
	for _, f := range g.Auth.IdentityHeaders.fields() {
		if f.name != nil && *f.name != "" {
			names = append(names, *f.name)
		}
	}
	return append(names, g.Auth.External.CopyHeaders...)
}

// Provision defaults the level to none.
func (r *Route) Provision() { filters.SetDefault(&r.Auth, LevelNone) }

// EnabledBy: auth: required.
func (r *Route) EnabledBy(filters.GlobalConfig) string {
	if r.Auth == LevelRequired {
		return "auth: required"
	}
	return ""
}

// Provision does nothing: false is the default.
func (r *ExternalRoute) Provision() {}

// Validate has nothing to check: auth.external is checked with auth.
func (r *ExternalRoute) Validate(*filters.Check) {}

// EnabledBy: external_auth: true.
func (r *ExternalRoute) EnabledBy(filters.GlobalConfig) string {
	if r.ExternalAuth {
		return "external_auth: true"
	}
	return ""
}

// prepareVerifier builds the verifier every route's auth filter shares. Its
// revocations are the server's (a service), so they outlive the config
// version; without the service the verifier keeps a set of its own.
func prepareVerifier(b *filters.Build) (any, error) {
	g, ok := b.Global.(*Global)
	if !ok {
		g = new(Global)
		g.Provision()
	}
	revoked, _ := filters.Service[*Revocations](b)
	return NewVerifier(&g.Auth, b.Loops, revoked)
}

func newAuth(b *filters.Build) (filters.Filter, error) {
	v, _ := b.Shared.(*Verifier)
	r, _ := b.Config.(*Route)
	if v == nil || r == nil {
		return nil, nil
	}
	return NewFilter(v, b.Order, r.Roles), nil
}

// newExternal builds a route's external_auth filter, resolving
// auth.external.upstream through the engine.
func newExternal(b *filters.Build) (filters.Filter, error) {
	g, _ := b.Globals(Name).(*Global)
	if g == nil {
		return nil, nil
	}
	e := &g.Auth.External
	group, ok := b.Upstream(e.Upstream)
	if !ok {
		return nil, fmt.Errorf("auth.external.upstream %q is not an upstream", e.Upstream)
	}
	return NewExternal(e, group, b.Order), nil
}
