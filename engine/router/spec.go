// Spec, its validation and compile-time normalisation, and SpecError.

package router

import (
	"fmt"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// Spec describes one route's match criteria. Exactly one of Path and Prefix
// is set.
type Spec struct {
	Path    string   // exact path ("/api/echo") or pattern with whole-segment "*" / trailing "**"
	Prefix  string   // segment-boundary prefix ("/static/")
	Host    string   // optional; case-insensitive, without port, one trailing dot ignored; "" = any host
	Methods []string // optional; uppercased at compile time; GET implies HEAD; empty = any method
}

// SpecError reports why the spec at Index was rejected.
type SpecError struct {
	Index  int    // position in the slice passed to Compile
	Field  string // "path", "prefix", "host", "methods", or "" for the spec as a whole
	Reason string // why; empty for a duplicate

	// Duplicate is set when the spec matches exactly what the earlier spec
	// at index Of matches (same normalised path or prefix, host and methods),
	// so one of them could never be chosen.
	Duplicate bool
	Of        int
}

func (e *SpecError) Error() string { return "router: " + e.Describe("spec") }

// Describe renders the error with the spec list called list, e.g.
// Describe("routes") gives `routes[1].path: "x" must start with '/'`.
func (e *SpecError) Describe(list string) string {
	where := fmt.Sprintf("%s[%d]", list, e.Index)
	if e.Field != "" {
		where += "." + e.Field
	}
	if e.Duplicate {
		return fmt.Sprintf("%s: duplicates %s[%d] (same path or prefix, host and methods)", where, list, e.Of)
	}
	return where + ": " + e.Reason
}

// kind says which structure a compiled spec lives in.
type kind uint8

const (
	kindExact  kind = iota // plain Path
	kindSingle             // Path with "*" segments only
	kindMulti              // Path ending in "**"
	kindPrefix             // Prefix
)

// compiled is a validated, normalised spec.
type compiled struct {
	kind    kind
	pattern string   // normalised path or prefix
	host    string   // lowercased, brackets removed; "" = any
	methods []string // uppercased, HEAD added to GET, sorted, deduplicated; nil = any
	index   int
}

// key identifies specs that would be indistinguishable at match time.
func (c *compiled) key() string {
	// Concatenated, not Sprintf: Compile keys every route, 30,000 of them
	// in a large table, on every config change.
	return strconv.Itoa(int(c.kind)) + "|" + c.pattern + "|" + c.host + "|" + strings.Join(c.methods, ",")
}

// compileSpec validates s and normalises it for matching.
func compileSpec(i int, s Spec) (compiled, error) {
	c := compiled{index: i}
	fail := func(field, format string, args ...any) (compiled, error) {
		return compiled{}, &SpecError{Index: i, Field: field, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case s.Path == "" && s.Prefix == "":
		return fail("", "one of path or prefix must be set")
	case s.Path != "" && s.Prefix != "":
		return fail("", "path and prefix are mutually exclusive")
	}

	field, raw := "path", s.Path
	if s.Prefix != "" {
		field, raw = "prefix", s.Prefix
	}
	if raw[0] != '/' {
		return fail(field, "%q must start with '/'", raw)
	}
	if j := strings.IndexFunc(raw, badPathRune); j >= 0 {
		return fail(field, "%q contains %q, which cannot appear in a request path", raw, raw[j])
	}
	if strings.Contains(raw, ";") {
		return fail(field, "%q contains ';': path parameters are ignored when matching, so it could never match", raw)
	}
	c.pattern = normalisePattern(raw)

	if s.Prefix != "" {
		c.kind = kindPrefix
		if strings.Contains(raw, "*") {
			return fail(field, "%q: wildcards are only allowed in path, not prefix", raw)
		}
	} else if strings.IndexByte(c.pattern, '*') >= 0 { // without one: exact, and nothing to split
		segs := strings.Split(c.pattern[1:], "/")
		for j, seg := range segs {
			switch {
			case seg == "**" && j != len(segs)-1:
				return fail(field, "%q: \"**\" must be the last segment", raw)
			case seg == "**":
				c.kind = kindMulti
			case seg == "*":
				if c.kind == kindExact {
					c.kind = kindSingle
				}
			case strings.Contains(seg, "*"):
				return fail(field, "%q: '*' must be a whole segment (\"*\" or \"**\"), not part of %q", raw, seg)
			}
		}
	}

	host, err := normaliseHost(s.Host)
	if err != nil {
		return fail("host", "%q %s", s.Host, err.Error())
	}
	c.host = host

	methods, err := normaliseMethods(s.Methods)
	if err != nil {
		return fail("methods", "%s", err.Error())
	}
	c.methods = methods
	return c, nil
}

// badPathRune reports characters that a request path (the part before '?')
// never contains, so a spec containing them could never match.
func badPathRune(r rune) bool {
	return r <= ' ' || r == 0x7f || r == '?' || r == '#' || r >= 0x80
}

// normalisePattern lowercases ASCII and drops one trailing slash, keeping "/".
func normalisePattern(p string) string {
	p = strings.Map(lowerASCII, p)
	if len(p) > 1 && p[len(p)-1] == '/' {
		p = p[:len(p)-1]
	}
	return p
}

func lowerASCII(r rune) rune {
	if 'A' <= r && r <= 'Z' {
		return r + ('a' - 'A')
	}
	return r
}

// normaliseHost lowercases h, drops one trailing dot ("admin.test." is
// "admin.test") and strips IPv6 brackets. It rejects ports, wildcards and
// characters that cannot occur in a Host header.
func normaliseHost(h string) (string, error) {
	if h == "" {
		return "", nil
	}
	h = strings.Map(lowerASCII, h)
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return "", fmt.Errorf("names no host")
	}
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if strings.Contains(h, ":") {
		if addr, err := netip.ParseAddr(h); err != nil || !addr.Is6() {
			return "", fmt.Errorf("must not include a port")
		}
		return h, nil
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return "", fmt.Errorf("contains %q; only letters, digits, '-', '.' and '_' are allowed", r)
		}
	}
	return h, nil
}

// normaliseMethods uppercases, deduplicates and sorts methods, adding HEAD
// wherever GET is present.
func normaliseMethods(methods []string) ([]string, error) {
	if len(methods) == 0 {
		return nil, nil
	}
	seen := make(map[string]bool, len(methods)+1)
	out := make([]string, 0, len(methods)+1)
	for j, m := range methods {
		if m == "" || strings.IndexFunc(m, notTokenRune) >= 0 {
			return nil, fmt.Errorf("[%d] %q is not a valid HTTP method", j, m)
		}
		m = strings.ToUpper(m)
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	if seen["GET"] && !seen["HEAD"] {
		out = append(out, "HEAD")
	}
	sort.Strings(out)
	return out, nil
}

// notTokenRune reports runes outside the RFC 9110 token alphabet.
func notTokenRune(r rune) bool {
	if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
		return false
	}
	return !strings.ContainsRune("!#$%&'*+-.^_`|~", r)
}
