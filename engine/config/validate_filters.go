// Validate's filter part: filter names and orders, client IP lists, auth, and
// each route's filter options.

package config

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/loopgate/loopgate/codec"
)

// validateFilterConfig checks the top-level filter options. It runs after
// the upstreams are checked, since auth.external names one.
func (c *Config) validateFilterConfig(p *problems) {
	p.filterNames("filters", c.Filters)
	c.validateFilterOrders(p)
	p.ipList("trusted_proxies", c.TrustedProxies)
	p.ipList("ip_allow", c.IPAllow)
	p.ipList("ip_deny", c.IPDeny)
	c.validateAuth(p)
}

// validateFilterOrders requires known names and unique final orders.
func (c *Config) validateFilterOrders(p *problems) {
	for _, name := range sortedKeys(c.FilterOrders) {
		if _, known := DefaultFilterOrders[name]; !known {
			p.add("filter_orders."+name, "unknown filter (want one of %s)", knownFilters())
		}
	}
	// Walk the filters by final order; a clash is reported at the
	// filter_orders entry that caused it.
	names := filterNamesByOrder(c)
	for i := 1; i < len(names); i++ {
		a, b := names[i-1], names[i]
		oa, _ := c.FilterOrder(a)
		ob, _ := c.FilterOrder(b)
		if oa != ob {
			continue
		}
		culprit, other := b, a
		if _, set := c.FilterOrders[b]; !set {
			culprit, other = a, b
		}
		p.add("filter_orders."+culprit, "order %d is also %s's; orders must be unique", ob, other)
	}
}

// validateAuth checks auth and, when any route runs external_auth,
// auth.external.
func (c *Config) validateAuth(p *problems) {
	a := &c.Auth
	p.headerName("auth.header", a.Header)
	positive(p, "auth.cache_ttl", a.CacheTTL)
	positive(p, "auth.cache_size", a.CacheSize)
	if a.JWT.Leeway < 0 {
		p.add("auth.jwt.leeway", "must not be negative, got %v", a.JWT.Leeway)
	}
	p.pemKey("auth.jwt.rs256_public_key", a.JWT.RS256PublicKey, a.JWT.RS256PublicKeyFile)
	p.pemKey("auth.jwt.es256_public_key", a.JWT.ES256PublicKey, a.JWT.ES256PublicKeyFile)
	p.readableFile("auth.jwt.jwks_file", a.JWT.JWKSFile)

	keys := make(map[string]int, len(a.APIKeys))
	for i, k := range a.APIKeys {
		path := fmt.Sprintf("auth.api_keys[%d]", i)
		// Keys are secrets: messages name their position, never their text.
		switch j, dup := keys[k.Key]; {
		case k.Key == "":
			p.add(path+".key", "missing")
		case dup:
			p.add(path+".key", "duplicate key (also api_keys[%d])", j)
		default:
			keys[k.Key] = i
		}
		switch {
		case k.Consumer == "":
			p.add(path+".consumer", "missing")
		case !validIdentityValue(k.Consumer):
			p.add(path+".consumer", "holds a control character; it is sent upstream in a header")
		}
		if !validIdentityValue(k.Tenant) {
			p.add(path+".tenant", "holds a control character; it is sent upstream in a header")
		}
		p.roles(path+".roles", k.Roles)
		for j, r := range k.Roles {
			if strings.Contains(r, ",") || !validIdentityValue(r) {
				p.add(fmt.Sprintf("%s.roles[%d]", path, j), "%q holds a comma or a control character; roles are sent upstream comma-separated", r)
			}
		}
	}

	c.validateIdentityHeaders(p)

	e := &a.External
	if e.Upstream != "" && c.findUpstream(e.Upstream) == nil {
		p.add("auth.external.upstream", "unknown upstream %q", e.Upstream)
	} else if e.Upstream == "" {
		if i := c.firstRouteRunning(FilterExternalAuth); i >= 0 {
			p.add("auth.external.upstream", "missing, and routes[%d] runs external_auth", i)
		}
	}
	if !strings.HasPrefix(e.Path, "/") {
		p.add("auth.external.path", "%q must start with '/'", e.Path)
	} else if !validTarget(e.Path, true) {
		p.add("auth.external.path", "%q %s", e.Path, badTarget(true))
	}
	positive(p, "auth.external.timeout", e.Timeout)
	for i, h := range e.ForwardHeaders {
		p.headerName(fmt.Sprintf("auth.external.forward_headers[%d]", i), h)
	}
	for i, h := range e.CopyHeaders {
		p.editableHeader(fmt.Sprintf("auth.external.copy_headers[%d]", i), h)
	}
}

// validateIdentityHeaders requires each enabled identity header to be a
// header the filter may set, distinct from the others and from the
// credential header (setting that would replace the credential upstream).
func (c *Config) validateIdentityHeaders(p *problems) {
	seen := map[string]string{}
	for _, f := range c.Auth.IdentityHeaders.fields() {
		if f.name == nil || *f.name == "" {
			continue
		}
		path := "auth.identity_headers." + f.key
		name := *f.name
		if !p.editableHeader(path, name) {
			continue
		}
		lower := strings.ToLower(name)
		switch {
		case strings.EqualFold(name, c.Auth.Header):
			p.add(path, "%q is auth.header, which carries the credential", name)
		case strings.EqualFold(name, "Host"):
			p.add(path, "Host cannot carry an identity")
		case seen[lower] != "":
			p.add(path, "%q is also auth.identity_headers.%s", name, seen[lower])
		default:
			seen[lower] = f.key
		}
	}
}

// validIdentityValue reports whether an identity value can be a header
// field value as it is: no control characters (tab included, since
// receivers trim it at the ends). The auth filter refuses the same in
// tokens.
func validIdentityValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

const noCredentials = "no credentials are configured: set auth.jwt (hs256_secret, rs256_public_key[_file], es256_public_key[_file] or jwks_file) or auth.api_keys"

// hasCredentials reports whether auth can verify anything at all.
func (a *Auth) hasCredentials() bool {
	j := &a.JWT
	return j.HS256Secret != "" || j.RS256PublicKey != "" || j.RS256PublicKeyFile != "" ||
		j.ES256PublicKey != "" || j.ES256PublicKeyFile != "" || j.JWKSFile != "" || len(a.APIKeys) > 0
}

// firstRouteRunning returns the index of the first route whose chain holds
// the named filter, or -1.
func (c *Config) firstRouteRunning(name string) int {
	for i := range c.Routes {
		if slices.Contains(c.RouteFilters(i), name) {
			return i
		}
	}
	return -1
}

// validateRouteFilters checks one route's filter options.
func (c *Config) validateRouteFilters(p *problems, i int, path string, r *Route) {
	p.filterNames(path+".filters", r.Filters)
	p.filterNames(path+".disable_filters", r.DisableFilters)
	enabled := c.optionFilters(r)
	for j, n := range r.DisableFilters {
		jp := fmt.Sprintf("%s.disable_filters[%d]", path, j)
		if option, on := enabled[n]; on {
			p.add(jp, "%s is enabled by %s; remove one of them", n, option)
		}
		if slices.Contains(r.Filters, n) {
			p.add(jp, "%s is also in filters", n)
		}
	}

	switch r.Auth {
	case AuthNone:
		if len(r.Roles) > 0 {
			p.add(path+".roles", "set, but auth is %q; roles need auth: required", r.Auth)
		}
	case AuthRequired:
		if !c.Auth.hasCredentials() {
			p.add(path+".auth", "required, but %s", noCredentials)
		}
	default:
		p.add(path+".auth", "unknown auth level %q (want %s or %s)", r.Auth, AuthNone, AuthRequired)
	}
	if r.Auth != AuthRequired && !c.Auth.hasCredentials() && slices.Contains(c.RouteFilters(i), FilterAuth) {
		// Listed in filters, the auth filter requires a credential just
		// the same, and could admit nobody.
		p.add(path, "runs the auth filter (from filters), but %s", noCredentials)
	}
	p.roles(path+".roles", r.Roles)
	p.ipList(path+".ip_allow", r.IPAllow)
	p.ipList(path+".ip_deny", r.IPDeny)
	if r.Limits != nil {
		c.validateRouteLimits(p, path+".limits", r.Limits)
	}
	if r.RequestHeaders != nil {
		p.headerOps(path+".request_headers", r.RequestHeaders)
		c.identityEdits(p, i, path+".request_headers", r.RequestHeaders)
	}
	if r.ResponseHeaders != nil {
		p.headerOps(path+".response_headers", r.ResponseHeaders)
	}
	if r.Rewrite != nil {
		p.rewrite(path+".rewrite", r.Rewrite)
	}
	if r.Gray != nil {
		c.validateGray(p, path+".gray", r.Gray, r.Upstream)
	}
	if r.Hash != nil {
		p.hash(path+".hash", r.Hash)
	}
}

// identityEdits refuses request_headers that set or add an identity header
// on a route whose auth filters set it: the upstream would get two values
// for one identity.
func (c *Config) identityEdits(p *problems, i int, path string, ops *HeaderOps) {
	chain := c.RouteFilters(i)
	if !slices.Contains(chain, FilterAuth) && !slices.Contains(chain, FilterExternalAuth) {
		return
	}
	for _, name := range c.IdentityHeaderNames() {
		for _, list := range []struct {
			key string
			m   map[string]string
		}{{"set", ops.Set}, {"add", ops.Add}} {
			for _, k := range sortedKeys(list.m) {
				if strings.EqualFold(k, name) {
					p.add(path+"."+list.key+"."+k, "%s is an identity header, set by the route's auth filters", name)
				}
			}
		}
	}
}

// validateRouteLimits requires each route limit to be unset (0) or within
// the global one: a route may only tighten.
func (c *Config) validateRouteLimits(p *problems, path string, l *RouteLimits) {
	g := &c.Limits
	tighter(p, path+".max_uri_bytes", l.MaxURIBytes, g.MaxURIBytes)
	tighter(p, path+".max_header_count", l.MaxHeaderCount, g.MaxHeaderCount)
	tighter(p, path+".max_header_bytes", l.MaxHeaderBytes, g.MaxHeaderBytes)
	tighter(p, path+".max_body_bytes", l.MaxBodyBytes, g.MaxBodyBytes)
}

func tighter[T ~int | ~int64](p *problems, path string, v, global T) {
	switch {
	case v < 0:
		p.add(path, "must not be negative, got %v", v)
	case v > global:
		p.add(path, "%v exceeds the global limits.%s %v; a route may only tighten it", v, path[strings.LastIndexByte(path, '.')+1:], global)
	}
}

func (c *Config) validateGray(p *problems, path string, g *Gray, own string) {
	switch {
	case g.Upstream == "":
		p.add(path+".upstream", "missing")
	case c.findUpstream(g.Upstream) == nil:
		p.add(path+".upstream", "unknown upstream %q", g.Upstream)
	case g.Upstream == own:
		p.add(path+".upstream", "%q is the route's own upstream", g.Upstream)
	}
	if g.Header == "" && g.Cookie == "" && g.Weight <= 0 {
		p.add(path, "selects nothing: set header, cookie or weight")
	}
	if g.Header != "" {
		p.headerName(path+".header", g.Header)
	}
	if g.Cookie != "" && !isToken(g.Cookie) {
		p.add(path+".cookie", "%q is not a valid cookie name", g.Cookie)
	}
	if g.Weight < 0 || g.Weight > 100 {
		p.add(path+".weight", "%d is not a percentage from 0 to 100", g.Weight)
	}
}

func (p *problems) hash(path string, h *Hash) {
	set := 0
	for _, on := range []bool{h.Header != "", h.Cookie != "", h.User} {
		if on {
			set++
		}
	}
	if set != 1 {
		p.add(path, "set exactly one of header, cookie and user")
	}
	if h.Header != "" {
		p.headerName(path+".header", h.Header)
	}
	if h.Cookie != "" && !isToken(h.Cookie) {
		p.add(path+".cookie", "%q is not a valid cookie name", h.Cookie)
	}
}

func (p *problems) rewrite(path string, rw *Rewrite) {
	if rw.StripPrefix == "" && rw.Regex == "" && rw.AddPrefix == "" {
		p.add(path, "does nothing: set strip_prefix, regex or add_prefix")
	}
	p.pathPrefix(path+".strip_prefix", rw.StripPrefix)
	if hasDotSegment(rw.StripPrefix) {
		p.add(path+".strip_prefix", "%q holds a \".\" or \"..\" segment, which a normalised path never does", rw.StripPrefix)
	}
	p.pathPrefix(path+".add_prefix", rw.AddPrefix)
	if rw.Regex != "" {
		if _, err := regexp.Compile(rw.Regex); err != nil {
			p.add(path+".regex", "%v", err)
		}
	}
	switch {
	case rw.Replacement != "" && rw.Regex == "":
		p.add(path+".replacement", "set without regex")
	case !validTarget(rw.Replacement, false):
		p.add(path+".replacement", "%q %s", rw.Replacement, badTarget(false))
	}
}

func (p *problems) pathPrefix(path, prefix string) {
	switch {
	case prefix == "":
	case !strings.HasPrefix(prefix, "/"):
		p.add(path, "%q must start with '/'", prefix)
	case !validTarget(prefix, false):
		p.add(path, "%q %s", prefix, badTarget(false))
	}
}

// hasDotSegment reports whether a path holds a "." or ".." segment.
func hasDotSegment(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}

// maxHeaderOps bounds each of set, add and remove, as the headers filter
// does (transform.MaxHeaderOps; this package cannot import it).
const maxHeaderOps = 16

// headerOps checks header names and values; map keys are visited sorted so
// messages come out in a stable order.
func (p *problems) headerOps(path string, ops *HeaderOps) {
	for _, list := range []struct {
		key string
		m   map[string]string
	}{{"set", ops.Set}, {"add", ops.Add}} {
		if len(list.m) > maxHeaderOps {
			p.add(path+"."+list.key, "%d entries, at most %d", len(list.m), maxHeaderOps)
		}
		for _, name := range sortedKeys(list.m) {
			if p.editableHeader(path+"."+list.key, name) && !validFieldValue(list.m[name]) {
				p.add(path+"."+list.key+"."+name, "value holds a control character (only tab is allowed)")
			}
		}
	}
	if len(ops.Remove) > maxHeaderOps {
		p.add(path+".remove", "%d entries, at most %d", len(ops.Remove), maxHeaderOps)
	}
	for i, name := range ops.Remove {
		p.editableHeader(fmt.Sprintf("%s.remove[%d]", path, i), name)
	}
}

// validFieldValue refuses control characters other than tab: CR and LF
// would split the head, and the rest are invalid in a field value.
func validFieldValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// editableHeader requires a valid name the proxy does not manage itself:
// framing (Content-Length, Transfer-Encoding) and hop-by-hop headers are
// decided per connection, and editing them could desynchronise a peer.
func (p *problems) editableHeader(path, name string) bool {
	if !p.headerName(path, name) {
		return false
	}
	if codec.IsHopByHop([]byte(name)) || strings.EqualFold(name, "Content-Length") {
		p.add(path, "%q is managed by the proxy: framing and hop-by-hop headers cannot be edited", name)
		return false
	}
	return true
}

func (p *problems) headerName(path, name string) bool {
	if !isToken(name) {
		p.add(path, "%q is not a valid header name", name)
		return false
	}
	return true
}

// filterNames requires known, distinct filter names.
func (p *problems) filterNames(path string, names []string) {
	seen := make(map[string]int, len(names))
	for i, n := range names {
		ip := fmt.Sprintf("%s[%d]", path, i)
		if _, known := DefaultFilterOrders[n]; !known {
			p.add(ip, "unknown filter %q (want one of %s)", n, knownFilters())
		} else if j, dup := seen[n]; dup {
			p.add(ip, "%s is listed twice (also [%d])", n, j)
		} else {
			seen[n] = i
		}
	}
}

var errBadIP = errors.New("not an IP address")

// ipList requires each entry to be an IP address or a CIDR prefix, without
// an IPv6 zone; surrounding spaces are ignored. The filter parses the same
// way (access.ParsePrefixes).
func (p *problems) ipList(path string, list []string) {
	for i, s := range list {
		var err error
		if t := strings.TrimSpace(s); strings.Contains(t, "/") {
			_, err = netip.ParsePrefix(t) // refuses zones
		} else if a, perr := netip.ParseAddr(t); perr != nil || a.Zone() != "" {
			err = errBadIP
		}
		if err != nil {
			p.add(fmt.Sprintf("%s[%d]", path, i), "%q is not an IP address or CIDR prefix", s)
		}
	}
}

func (p *problems) roles(path string, roles []string) {
	for i, r := range roles {
		if r == "" {
			p.add(fmt.Sprintf("%s[%d]", path, i), "empty role")
		}
	}
}

// pemKey allows a key inline or in a file, not both.
func (p *problems) pemKey(path, inline, file string) {
	if inline != "" && file != "" {
		p.add(path, "both it and %s_file are set; set one", path[strings.LastIndexByte(path, '.')+1:])
		return
	}
	p.readableFile(path+"_file", file)
}

// readableFile requires name, when set, to be a regular file this process
// can open. Parsing its contents is the filter's job.
func (p *problems) readableFile(path, name string) {
	if name == "" {
		return
	}
	f, err := os.Open(name)
	if err != nil {
		p.add(path, "%v", err)
		return
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		p.add(path, "%v", err)
	} else if st.IsDir() {
		p.add(path, "%q is a directory", name)
	}
}

// isToken reports whether s is an RFC 9110 token, the syntax of header and
// cookie names.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// badTarget explains a validTarget failure.
func badTarget(query bool) string {
	if query {
		return "holds a space, a control character or '#'; percent-encode it"
	}
	return "holds a space, a control character, '?' or '#'; percent-encode it"
}

// validTarget reports whether s may appear in a request target as written;
// '?' only when query is set, since the path is followed by its own query.
// Non-ASCII bytes pass, as the request parser tolerates them in targets.
func validTarget(s string, query bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c == 0x7f || c == '#' || c == '?' && !query {
			return false
		}
	}
	return true
}

// knownFilters lists the filter names in default order, for messages.
func knownFilters() string {
	return strings.Join(filterNamesByOrder(&Config{}), ", ")
}

// filterNamesByOrder returns every known filter name by c's final order.
func filterNamesByOrder(c *Config) []string {
	names := sortedKeys(DefaultFilterOrders)
	sort.SliceStable(names, func(i, j int) bool {
		oi, _ := c.FilterOrder(names[i])
		oj, _ := c.FilterOrder(names[j])
		return oi < oj
	})
	return names
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
