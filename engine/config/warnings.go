// Warnings: what is valid but almost certainly a mistake (no routes, routes
// no request can reach), and the probe that finds shadowed routes.

package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loopgate/loopgate/engine/router"
)

// Warnings returns one message per setting that is valid but almost
// certainly a mistake, each reading like a validation error ("config:
// <path>: <reason>"), in route order:
//
//   - no routes at all: every request gets 404;
//   - a shadowed route: one that no request can reach, because for every
//     request it matches (every path, host and method) the router decides
//     for another route first, by serving it or by answering 405 (see
//     shadowedRoutes).
//
// c must be valid, as Parse returns it. -check prints these; they never
// stop the gateway. Safe for concurrent use on a Config nobody is
// modifying.
func (c *Config) Warnings() []string {
	if len(c.Routes) == 0 {
		return []string{"config: routes: none, so every request gets 404 (code 40401)"}
	}
	var out []string
	for i, u := range c.Upstreams {
		if u.TLS != nil && u.TLS.InsecureSkipVerify {
			out = append(out, fmt.Sprintf("config: upstreams[%d] (%s).tls.insecure_skip_verify: the nodes' certificates are not verified; anyone on the path can read and change this traffic", i, u.Name))
		}
	}
	for _, s := range c.shadowedRoutes() {
		names := make([]string, len(s.by))
		for i, j := range s.by {
			names[i] = c.describePath(fmt.Sprintf("routes[%d]", j))
		}
		verb := "decides"
		if len(names) > 1 {
			verb = "decide"
		}
		out = append(out, fmt.Sprintf("config: %s: shadowed, no request can reach it: %s %s every request it matches",
			c.describePath(fmt.Sprintf("routes[%d]", s.route)), joinAnd(names), verb))
	}
	return out
}

// shadowing says that route is never chosen, and which routes decide the
// requests it matches instead.
type shadowing struct {
	route int
	by    []int // sorted
}

// shadowedRoutes finds every route the router never chooses. It asks the
// compiled table itself, with a finite set of requests per route that
// stands for all the requests the route matches:
//
//   - the path is the route's pattern with each "*" replaced by a segment
//     no route names, "**" by 1 to depth such segments, and a prefix
//     extended by 0 to depth of them, where depth exceeds every pattern's
//     length;
//   - the host is the route's own, or one no route names;
//   - the methods are the route's own, or one no route names.
//
// These are the requests with the least competition: any other request
// the route matches uses literal segments, a named host or a named method
// where these use unnamed ones, and that can only let more routes match
// earlier or rank ahead of it, never fewer (literal segments add trie
// branches tried before "*"; hosts and methods only add candidates). Past
// depth segments no "*" pattern matches and every "**" pattern or prefix
// that matches keeps matching, so longer paths decide alike. If the route
// is chosen for none of its probes, it is chosen for no request at all.
//
// Typical cases: a route whose methods are a subset of an earlier route's
// with the same normalised path or prefix and host ([GET] after
// [GET, POST]); a prefix covered by a "**" pattern, which is tried before
// every prefix (prefix /api/v2/ after path /api/**). A route matched by a
// request no probe makes is never reported, so the warning has no false
// positives; a probe that matches nothing (which the argument above rules
// out) also counts as reachable.
func (c *Config) shadowedRoutes() []shadowing {
	specs := c.RouterSpecs()
	table, err := c.RouterTable()
	if err != nil {
		return nil // Validate reports it
	}
	p := newProber(specs)
	scratch := make([]byte, 0, 256)
	var out []shadowing
	for i, s := range specs {
		by, reached := []int(nil), false
		for _, q := range p.requests(s) {
			r := table.MatchIndex([]byte(q.host), []byte(q.method), []byte(q.path), scratch)
			switch {
			case r.Found && r.Index == i:
				reached = true
			case r.Found:
				by = append(by, r.Index)
			case r.Allow != "":
				// A 405: the routes that decided are the ones serving the
				// allowed methods on this path.
				for _, m := range strings.Split(r.Allow, ", ") {
					if rr := table.MatchIndex([]byte(q.host), []byte(m), []byte(q.path), scratch); rr.Found {
						by = append(by, rr.Index)
					}
				}
			default:
				reached = true // cannot happen; never warn on a guess
			}
			if reached {
				break
			}
		}
		if !reached {
			slices.Sort(by)
			out = append(out, shadowing{route: i, by: slices.Compact(by)})
		}
	}
	return out
}

// prober makes the requests that stand for everything a spec matches.
type prober struct {
	segment string // a path segment no spec names
	host    string // a host no spec names
	method  string // a method no spec names
	depth   int    // more segments than any spec's pattern has
}

// probe is one request.
type probe struct{ host, method, path string }

func newProber(specs []router.Spec) *prober {
	longestSeg, longestHost, longestMethod, mostSegs := 0, 0, 0, 0
	for _, s := range specs {
		segs := patternSegments(s)
		mostSegs = max(mostSegs, len(segs))
		for _, seg := range segs {
			longestSeg = max(longestSeg, len(seg))
		}
		longestHost = max(longestHost, len(s.Host))
		for _, m := range s.Methods {
			longestMethod = max(longestMethod, len(m))
		}
	}
	// Longer than every name of its kind, so equal to none of them.
	return &prober{
		segment: strings.Repeat("~", longestSeg+1),
		host:    strings.Repeat("x", longestHost+1) + ".invalid",
		method:  strings.Repeat("X", longestMethod+1),
		depth:   mostSegs + 2,
	}
}

// patternSegments splits a spec's path or prefix into segments, one
// trailing slash ignored as the router does; "/" has none.
func patternSegments(s router.Spec) []string {
	p := s.Path
	if p == "" {
		p = s.Prefix
	}
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	if p == "/" || p == "" {
		return nil
	}
	return strings.Split(p[1:], "/")
}

// requests returns the probes for s (see shadowedRoutes).
func (p *prober) requests(s router.Spec) []probe {
	segs := patternSegments(s)
	var base []string
	var extra []int // how many unnamed segments to append, one path each
	for i, seg := range segs {
		switch {
		case seg == "**" && i == len(segs)-1:
			for n := 1; n <= p.depth; n++ {
				extra = append(extra, n)
			}
		case seg == "*":
			base = append(base, p.segment)
		default:
			base = append(base, seg)
		}
	}
	switch {
	case s.Prefix != "":
		for n := 0; n <= p.depth; n++ {
			extra = append(extra, n)
		}
	case extra == nil:
		extra = []int{0}
	}

	host := s.Host
	if host == "" {
		host = p.host
	}
	// The HEAD that GET implies needs no probe of its own: a route that
	// takes GET from s takes HEAD too.
	methods := []string{p.method}
	if len(s.Methods) > 0 {
		methods = methods[:0]
		for _, m := range s.Methods {
			methods = append(methods, strings.ToUpper(m))
		}
	}

	var out []probe
	for _, n := range extra {
		path := slices.Clone(base)
		for range n {
			path = append(path, p.segment)
		}
		for _, m := range methods {
			out = append(out, probe{host: host, method: m, path: "/" + strings.Join(path, "/")})
		}
	}
	return out
}

// joinAnd joins names as "a", "a and b" or "a, b and c".
func joinAnd(names []string) string {
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
