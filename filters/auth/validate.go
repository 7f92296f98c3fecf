// Validate for the auth filters' configuration: the auth section and a
// route's auth and roles.

package auth

import (
	"fmt"
	"os"
	"strings"

	"github.com/loopgate/loopgate/filters"
)

// Validate checks the auth section and, when a route runs external_auth,
// auth.external.
func (g *Global) Validate(c *filters.Check) {
	a := &g.Auth
	c.HeaderName("auth.header", a.Header)
	filters.Positive(c, "auth.cache_ttl", a.CacheTTL)
	filters.Positive(c, "auth.cache_size", a.CacheSize)
	if a.JWT.Leeway < 0 {
		c.Add("auth.jwt.leeway", "must not be negative, got %v", a.JWT.Leeway)
	}
	pemKey(c, "auth.jwt.rs256_public_key", a.JWT.RS256PublicKey, a.JWT.RS256PublicKeyFile)
	pemKey(c, "auth.jwt.es256_public_key", a.JWT.ES256PublicKey, a.JWT.ES256PublicKeyFile)
	readableFile(c, "auth.jwt.jwks_file", a.JWT.JWKSFile)
	validateAPIKeys(c, a.APIKeys)
	validateIdentityHeaders(c, a)

	e := &a.External
	if e.Upstream != "" && !c.Env.HasUpstream(e.Upstream) {
		c.Add("auth.external.upstream", "unknown upstream %q", e.Upstream)
	} else if e.Upstream == "" {
		if i := c.Env.FirstRouteRunning(NameExternal); i >= 0 {
			c.Add("auth.external.upstream", "missing, and routes[%d] runs external_auth", i)
		}
	}
	if !strings.HasPrefix(e.Path, "/") {
		c.Add("auth.external.path", "%q must start with '/'", e.Path)
	} else {
		c.Target("auth.external.path", e.Path, true)
	}
	filters.Positive(c, "auth.external.timeout", e.Timeout)
	for i, h := range e.ForwardHeaders {
		c.HeaderName(fmt.Sprintf("auth.external.forward_headers[%d]", i), h)
	}
	for i, h := range e.CopyHeaders {
		c.EditableHeader(fmt.Sprintf("auth.external.copy_headers[%d]", i), h)
	}
}

// validateAPIKeys requires each key to be set, unique, and to name a
// consumer, with values that can travel in a header as they are. Keys are
// secrets: messages name their position, never their text.
func validateAPIKeys(c *filters.Check, keys []APIKey) {
	seen := make(map[string]int, len(keys))
	for i, k := range keys {
		path := fmt.Sprintf("auth.api_keys[%d]", i)
		switch j, dup := seen[k.Key]; {
		case k.Key == "":
			c.Add(path+".key", "missing")
		case dup:
			c.Add(path+".key", "duplicate key (also api_keys[%d])", j)
		default:
			seen[k.Key] = i
		}
		switch {
		case k.Consumer == "":
			c.Add(path+".consumer", "missing")
		case !fieldSafe(k.Consumer):
			c.Add(path+".consumer", "holds a control character; it is sent upstream in a header")
		}
		if !fieldSafe(k.Tenant) {
			c.Add(path+".tenant", "holds a control character; it is sent upstream in a header")
		}
		roles(c, path+".roles", k.Roles)
		for j, r := range k.Roles {
			if strings.Contains(r, ",") || !fieldSafe(r) {
				c.Add(fmt.Sprintf("%s.roles[%d]", path, j), "%q holds a comma or a control character; roles are sent upstream comma-separated", r)
			}
		}
	}
}

// validateIdentityHeaders requires each enabled identity header to be a
// header the filter may set, distinct from the others and from the
// credential header (setting that would replace the credential upstream).
func validateIdentityHeaders(c *filters.Check, a *Config) {
	seen := map[string]string{}
	for _, f := range a.IdentityHeaders.fields() {
		if f.name == nil || *f.name == "" {
			continue
		}
		path := "auth.identity_headers." + f.key
		name := *f.name
		if !c.EditableHeader(path, name) {
			continue
		}
		lower := strings.ToLower(name)
		switch {
		case strings.EqualFold(name, a.Header):
			c.Add(path, "%q is auth.header, which carries the credential", name)
		case strings.EqualFold(name, "Host"):
			c.Add(path, "Host cannot carry an identity")
		case seen[lower] != "":
			c.Add(path, "%q is also auth.identity_headers.%s", name, seen[lower])
		default:
			seen[lower] = f.key
		}
	}
}

const noCredentials = "no credentials are configured: set auth.jwt (hs256_secret, rs256_public_key[_file], es256_public_key[_file] or jwks_file) or auth.api_keys"

// hasCredentials reports whether auth can verify anything at all.
func (a *Config) hasCredentials() bool {
	j := &a.JWT
	return j.HS256Secret != "" || j.RS256PublicKey != "" || j.RS256PublicKeyFile != "" ||
		j.ES256PublicKey != "" || j.ES256PublicKeyFile != "" || j.JWKSFile != "" || len(a.APIKeys) > 0
}

// Validate checks the route's level and roles against the auth section.
func (r *Route) Validate(c *filters.Check) {
	creds := false
	if g, ok := c.Env.Global(Name).(*Global); ok {
		creds = g.Auth.hasCredentials()
	}
	switch r.Auth {
	case LevelNone:
		if len(r.Roles) > 0 {
			c.Add("roles", "set, but auth is %q; roles need auth: required", r.Auth)
		}
	case LevelRequired:
		if !creds {
			c.Add("auth", "required, but %s", noCredentials)
		}
	default:
		c.Add("auth", "unknown auth level %q (want %s or %s)", r.Auth, LevelNone, LevelRequired)
	}
	if r.Auth != LevelRequired && !creds && c.Route != nil && c.Route.Runs(Name) {
		// Listed in filters, the auth filter requires a credential just
		// the same, and could admit nobody.
		c.Add("", "runs the auth filter (from filters), but %s", noCredentials)
	}
	roles(c, "roles", r.Roles)
}

func roles(c *filters.Check, key string, roles []string) {
	for i, r := range roles {
		if r == "" {
			c.Add(fmt.Sprintf("%s[%d]", key, i), "empty role")
		}
	}
}

// pemKey allows a key inline or in a file, not both.
func pemKey(c *filters.Check, key, inline, file string) {
	if inline != "" && file != "" {
		c.Add(key, "both it and %s_file are set; set one", key[strings.LastIndexByte(key, '.')+1:])
		return
	}
	readableFile(c, key+"_file", file)
}

// readableFile requires name, when set, to be a regular file this process
// can open. Parsing its contents is NewVerifier's job.
func readableFile(c *filters.Check, key, name string) {
	if name == "" {
		return
	}
	f, err := os.Open(name)
	if err != nil {
		c.Add(key, "%v", err)
		return
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		c.Add(key, "%v", err)
	} else if st.IsDir() {
		c.Add(key, "%q is a directory", name)
	}
}
