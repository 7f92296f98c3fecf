// Validate for this package's route configs: each checks its section once
// and keeps what it compiled for the constructor.

package transform

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

// Validate checks both edit lists and prepares them; request edits may not
// set an identity header on a route whose auth filters set it, since the
// upstream would get two values for one identity.
func (h *HeadersRoute) Validate(c *filters.Check) {
	if h.Request != nil {
		h.Request.validate(c, "request_headers")
		identityEdits(c, "request_headers", h.Request)
	}
	if h.Response != nil {
		h.Response.validate(c, "response_headers")
	}
}

// validate checks names and values (map keys sorted, so messages come out
// in a stable order) and prepares ops.
func (o *HeaderOps) validate(c *filters.Check, key string) {
	for _, list := range []struct {
		key string
		m   map[string]string
	}{{"set", o.Set}, {"add", o.Add}} {
		if len(list.m) > MaxHeaderOps {
			c.Add(key+"."+list.key, "%d entries, at most %d", len(list.m), MaxHeaderOps)
		}
		for _, name := range sortedKeys(list.m) {
			if c.EditableHeader(key+"."+list.key, name) && !validFieldValue(list.m[name]) {
				c.Add(key+"."+list.key+"."+name, "value holds a control character (only tab is allowed)")
			}
		}
	}
	if len(o.Remove) > MaxHeaderOps {
		c.Add(key+".remove", "%d entries, at most %d", len(o.Remove), MaxHeaderOps)
	}
	for i, name := range o.Remove {
		c.EditableHeader(fmt.Sprintf("%s.remove[%d]", key, i), name)
	}
	o.ops = headerOps{remove: slices.Clone(o.Remove), set: prepareHeaders(o.Set), add: prepareHeaders(o.Add)}
	o.checked = true
}

// prepareHeaders turns a validated map into edits in name order, so runs
// are reproducible, with values trimmed of surrounding spaces and tabs.
func prepareHeaders(m map[string]string) []filters.Header {
	var out []filters.Header
	for _, name := range sortedKeys(m) {
		out = append(out, filters.Header{Name: name, Value: []byte(strings.Trim(m[name], " \t"))})
	}
	return out
}

// identityEdits refuses set and add of an identity header on a route that
// runs a filter setting identity headers.
func identityEdits(c *filters.Check, key string, o *HeaderOps) {
	if !c.RouteSetsIdentity() {
		return
	}
	for _, name := range c.Env.IdentityHeaders() {
		for _, list := range []struct {
			key string
			m   map[string]string
		}{{"set", o.Set}, {"add", o.Add}} {
			for _, k := range sortedKeys(list.m) {
				if strings.EqualFold(k, name) {
					c.Add(key+"."+list.key+"."+k, "%s is an identity header, set by the route's auth filters", name)
				}
			}
		}
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

// Validate checks the rewrite section and compiles it: the normalised
// strip prefix and the regex.
func (r *RewriteRoute) Validate(c *filters.Check) {
	rw := r.Rewrite
	if rw == nil {
		return
	}
	if rw.StripPrefix == "" && rw.Regex == "" && rw.AddPrefix == "" {
		c.Add("rewrite", "does nothing: set strip_prefix, regex or add_prefix")
	}
	usable := pathPrefix(c, "rewrite.strip_prefix", rw.StripPrefix)
	if hasDotSegment(rw.StripPrefix) {
		c.Add("rewrite.strip_prefix", "%q holds a \".\" or \"..\" segment, which a normalised path never does", rw.StripPrefix)
	} else if usable {
		// Compared with normalised request paths, so normalised the same way.
		if strip, _, err := codec.NormalizePath(nil, []byte(rw.StripPrefix)); err != nil {
			c.Add("rewrite.strip_prefix", "%q: %v", rw.StripPrefix, err)
		} else {
			rw.strip = bytes.TrimSuffix(strip, slash)
		}
	}
	pathPrefix(c, "rewrite.add_prefix", rw.AddPrefix)
	if rw.Regex != "" {
		re, err := regexp.Compile(rw.Regex)
		if err != nil {
			c.Add("rewrite.regex", "%v", err)
		}
		rw.re = re
	}
	switch {
	case rw.Replacement != "" && rw.Regex == "":
		c.Add("rewrite.replacement", "set without regex")
	default:
		c.Target("rewrite.replacement", rw.Replacement, false)
	}
	rw.checked = true
}

// pathPrefix requires a prefix, when set, to be an absolute path that can
// be written in a request target as it is. It reports whether there is a
// usable prefix.
func pathPrefix(c *filters.Check, key, prefix string) bool {
	switch {
	case prefix == "":
		return false
	case !strings.HasPrefix(prefix, "/"):
		c.Add(key, "%q must start with '/'", prefix)
		return false
	}
	return c.Target(key, prefix, false)
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

// Validate checks the gray section against the route and the upstreams.
func (g *GrayRoute) Validate(c *filters.Check) {
	gr := g.Gray
	if gr == nil {
		return
	}
	switch {
	case gr.Upstream == "":
		c.Add("gray.upstream", "missing")
	case !c.Env.HasUpstream(gr.Upstream):
		c.Add("gray.upstream", "unknown upstream %q", gr.Upstream)
	case c.Route != nil && gr.Upstream == c.Route.Upstream:
		c.Add("gray.upstream", "%q is the route's own upstream", gr.Upstream)
	}
	if gr.Header == "" && gr.Cookie == "" && gr.Weight <= 0 {
		c.Add("gray", "selects nothing: set header, cookie or weight")
	}
	if gr.Header != "" {
		c.HeaderName("gray.header", gr.Header)
	}
	if gr.Cookie != "" && !filters.IsToken(gr.Cookie) {
		c.Add("gray.cookie", "%q is not a valid cookie name", gr.Cookie)
	}
	if gr.Weight < 0 || gr.Weight > 100 {
		c.Add("gray.weight", "%d is not a percentage from 0 to 100", gr.Weight)
	}
}

// Validate requires exactly one hash key source, well formed.
func (h *HashRoute) Validate(c *filters.Check) {
	hs := h.Hash
	if hs == nil {
		return
	}
	set := 0
	for _, on := range []bool{hs.Header != "", hs.Cookie != "", hs.User} {
		if on {
			set++
		}
	}
	if set != 1 {
		c.Add("hash", "set exactly one of header, cookie and user")
	}
	if hs.Header != "" {
		c.HeaderName("hash.header", hs.Header)
	}
	if hs.Cookie != "" && !filters.IsToken(hs.Cookie) {
		c.Add("hash.cookie", "%q is not a valid cookie name", hs.Cookie)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
