// Validate: rejects a defaulted Config that cannot work, naming each field.

package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/loopgate/loopgate/engine/policy"
	"github.com/loopgate/loopgate/engine/router"
)

// Validate reports every problem in c, one error per problem joined with
// errors.Join, each reading "config: <field path>: <reason>"; a route's
// path names its id too when it has one of its own:
// `config: routes[2] (id "admin").upstream: unknown upstream "x"`. (Parse
// adds the YAML line as well: "config: line 14: routes[2] ...".) Each
// filter validates its own configs (filters.GlobalConfig.Validate). It
// expects defaults to be applied already, as Parse does, and changes no
// option; what it parses or compiles to judge (trusted_proxies, IP lists,
// regular expressions) is kept for building, so nothing is parsed twice.
// It touches the file system only to check that limits.temp_dir is a
// directory and the JWT key files can be opened; parsing keys is the auth
// filter's job. Not safe for concurrent use, since it keeps what it
// compiled; the result is safe to share read-only afterwards.
func (c *Config) Validate() error {
	return c.problems().err(c, nil)
}

// problems runs every check and returns what failed, in the order found.
func (c *Config) problems() problems {
	var p problems
	p.addr("listen", c.Listen, addrRules{emptyHost: true, portZero: true})
	c.validateListeners(&p)
	c.validateAdmin(&p)
	if c.Loops < 0 {
		p.add("loops", "%d is negative; 0 means one per CPU", c.Loops)
	}
	c.validateLimits(&p)
	positive(&p, "health_checks.max_in_flight", c.HealthChecks.MaxInFlight)
	positive(&p, "health_checks.batch", c.HealthChecks.Batch)
	positive(&p, "timeouts.header_read", c.Timeouts.HeaderRead)
	positive(&p, "timeouts.idle", c.Timeouts.Idle)
	positive(&p, "timeouts.drain", c.Timeouts.Drain)
	positive(&p, "timeouts.suspend", c.Timeouts.Suspend)

	names := make(map[string]int, len(c.Upstreams))
	for i := range c.Upstreams {
		validateUpstream(&p, fmt.Sprintf("upstreams[%d]", i), &c.Upstreams[i])
		if j, dup := names[c.Upstreams[i].Name]; dup && c.Upstreams[i].Name != "" {
			p.add(fmt.Sprintf("upstreams[%d].name", i), "duplicate name %q (also upstreams[%d])", c.Upstreams[i].Name, j)
		} else {
			names[c.Upstreams[i].Name] = i
		}
	}
	c.validateFilterConfig(&p)
	c.validateObservability(&p)
	c.validateWebSocket(&p)
	c.validateAlerts(&p)
	c.validateRoutes(&p)
	return p
}

func (c *Config) validateLimits(p *problems) {
	l := &c.Limits
	positive(p, "limits.max_uri_bytes", l.MaxURIBytes)
	positive(p, "limits.max_header_count", l.MaxHeaderCount)
	positive(p, "limits.max_header_bytes", l.MaxHeaderBytes)
	positive(p, "limits.max_body_bytes", l.MaxBodyBytes)
	positive(p, "limits.max_conn_buffer", l.MaxConnBuffer)
	positive(p, "limits.max_temp_file_bytes", l.MaxTempFileBytes)
	positive(p, "limits.max_response_header_count", l.MaxResponseHeaderCount)
	positive(p, "limits.max_response_header_bytes", l.MaxResponseHeaderBytes)
	positive(p, "limits.max_buffered_bytes", l.MaxBufferedBytes)
	positive(p, "limits.max_connections", l.MaxConnections)
	if l.RequestBufferBytes != nil && *l.RequestBufferBytes < 0 {
		p.add("limits.request_buffer_bytes", "must not be negative (0 disables buffering), got %v", *l.RequestBufferBytes)
	}
	if l.TempDir != "" {
		if st, err := os.Stat(l.TempDir); err != nil {
			p.add("limits.temp_dir", "%v", err)
		} else if !st.IsDir() {
			p.add("limits.temp_dir", "%q is not a directory", l.TempDir)
		}
	}
	// max_header_bytes bounds the whole head, request line included, and a
	// head is buffered whole before it is parsed.
	if l.MaxConnBuffer > 0 && l.MaxConnBuffer < l.MaxHeaderBytes {
		p.add("limits.max_conn_buffer", "%s is smaller than max_header_bytes %s, so a request head could not be buffered", l.MaxConnBuffer, l.MaxHeaderBytes)
	}
}

func validateUpstream(p *problems, path string, u *Upstream) {
	if u.Name == "" {
		p.add(path+".name", "missing")
	} else if !isName(u.Name) {
		p.add(path+".name", "%q: use only letters, digits, '-', '_' and '.'", u.Name)
	}
	if len(u.Nodes) == 0 {
		p.add(path+".nodes", "at least one node is required")
	}
	seen := make(map[string]int, len(u.Nodes))
	for i, n := range u.Nodes {
		np := fmt.Sprintf("%s.nodes[%d]", path, i)
		p.addr(np+".addr", n.Addr, addrRules{})
		if j, dup := seen[n.Addr]; dup {
			p.add(np+".addr", "duplicate address %q (also nodes[%d])", n.Addr, j)
		} else {
			seen[n.Addr] = i
		}
		if n.Weight < 1 {
			p.add(np+".weight", "%d is less than 1", n.Weight)
		}
	}
	switch u.Balancer {
	case RoundRobin, WeightedRoundRobin, Random, LeastRequest:
	default:
		p.add(path+".balancer", "unknown balancer %q (want %s, %s, %s or %s)", u.Balancer, RoundRobin, WeightedRoundRobin, Random, LeastRequest)
	}
	if u.TLS != nil {
		validateUpstreamTLS(p, path+".tls", u.TLS)
	}
	if u.SlowStart != nil && *u.SlowStart < 0 {
		p.add(path+".slow_start", "must not be negative (0 disables it), got %v", *u.SlowStart)
	}
	positive(p, path+".connect_timeout", u.ConnectTimeout)
	positive(p, path+".response_timeout", u.ResponseTimeout)
	positive(p, path+".pool_acquire_timeout", u.PoolAcquireTimeout)
	positive(p, path+".idle_timeout", u.IdleTimeout)
	positive(p, path+".max_conns", u.MaxConns)
	positive(p, path+".max_idle", u.MaxIdle)
	u.RetryBudget.Validate(p.at(path + ".retry_budget"))
	validateOutlier(p, path+".outlier", &u.Outlier)
	if u.HealthCheck != nil {
		validateHealthCheck(p, path+".health_check", u.HealthCheck)
	}
	if u.MaxIdle > u.MaxConns && u.MaxConns > 0 {
		p.add(path+".max_idle", "%d exceeds max_conns %d", u.MaxIdle, u.MaxConns)
	}
}

func (c *Config) validateRoutes(p *problems) {
	ids := make(map[string]int, len(c.Routes))
	chains, checks := c.Chains(), c.routeChecks(p)
	// The breaker and isolation settings most routes share (the global
	// ones, one per parse) are checked once: what they report depends on
	// them alone. Paths are built only for a problem: at 30,000 routes
	// the strings of checks that pass were a fifth of validating them.
	var sound [2]any // the last breaker and isolation settings that passed
	settings := func(path, key string, kind int, v any, validate func(policy.Report)) {
		if sound[kind] == v {
			return
		}
		had := len(*p)
		validate(p.under(path, key))
		if len(*p) == had {
			sound[kind] = v
		}
	}
	for i := range c.Routes {
		r := c.Routes[i]
		path := "routes[" + strconv.Itoa(i) + "]"
		if !isName(r.ID) {
			p.add(path+".id", "%q: use only letters, digits, '-', '_' and '.'", r.ID)
		}
		if j, dup := ids[r.ID]; dup {
			p.add(path+".id", "duplicate id %q (also routes[%d])", r.ID, j)
		} else {
			ids[r.ID] = i
		}
		switch {
		case r.Upstream == "":
			p.add(path+".upstream", "missing")
		case c.findUpstream(r.Upstream) == nil:
			p.add(path+".upstream", "%s", c.unknownUpstream(r.Upstream))
		default: // timeouts were inherited, so zero or negative means set wrong
			if r.ConnectTimeout <= 0 {
				positive(p, path+".connect_timeout", r.ConnectTimeout)
			}
			if r.ResponseTimeout <= 0 {
				positive(p, path+".response_timeout", r.ResponseTimeout)
			}
		}
		if r.EscapedSlashes != EscapedSlashesReject && r.EscapedSlashes != EscapedSlashesKeep {
			p.add(path+".escaped_slashes", "%q: want %q or %q", r.EscapedSlashes, EscapedSlashesReject, EscapedSlashesKeep)
		}
		if r.TLS != RouteTLSAny {
			validateRouteTLS(p, path+".tls", c, r.TLS)
		}
		r.Retry.Validate(p.under(path, ".retry"))
		validateRouteUpgrade(p, path, r)
		if r.CircuitBreaker != nil {
			settings(path, ".circuit_breaker", 0, r.CircuitBreaker, r.CircuitBreaker.Validate)
		}
		if r.Isolation != nil {
			settings(path, ".isolation", 1, r.Isolation, r.Isolation.Validate)
		}
		c.validateRouteFilters(p, chains, checks, i, path, r)
	}
	table, err := router.Compile(c.RouterSpecs())
	c.table = table
	if err != nil {
		var se *router.SpecError
		if errors.As(err, &se) {
			path := fmt.Sprintf("routes[%d]", se.Index)
			if se.Field != "" {
				path += "." + se.Field
			}
			p.add(path, "%s", strings.TrimPrefix(se.Describe("routes"), path+": "))
		} else {
			p.add("routes", "%v", err)
		}
	}
}

// maxListed bounds the names an error lists, so a config with hundreds of
// upstreams gets a line, not a page.
const maxListed = 10

// unknownUpstream words a reference to an upstream that is not there,
// with the nearest name when one is near and the names there are:
// `unknown upstream "bakend" (did you mean "backend"? known: auth, backend)`.
func (c *Config) unknownUpstream(name string) string {
	known := names(c.Upstreams, func(u *Upstream) string { return u.Name })
	if len(known) == 0 {
		return fmt.Sprintf("unknown upstream %q (no upstreams are configured)", name)
	}
	hint := ""
	if near := nearest(name, known); near != "" {
		hint = fmt.Sprintf("did you mean %q? ", near)
	}
	list := strings.Join(known[:min(len(known), maxListed)], ", ")
	if len(known) > maxListed {
		list += fmt.Sprintf(" and %d more", len(known)-maxListed)
	}
	return fmt.Sprintf("unknown upstream %q (%sknown: %s)", name, hint, list)
}

// problem is one validation failure: the field path as YAML keys spell it
// ("routes[2].upstream") and the reason.
type problem struct{ path, reason string }

// problems collects validation failures in the order they are found.
type problems []problem

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, problem{path, fmt.Sprintf(format, args...)})
}

// err joins the problems into one error, a line each:
// "config: [line N: ]<path>: <reason>", the path naming a route's id
// (describePath). lines, from the YAML document (lineIndex), may be nil.
// It returns nil when there are no problems.
func (p problems) err(c *Config, lines lineIndex) error {
	if len(p) == 0 {
		return nil
	}
	errs := make([]error, len(p))
	for i, pr := range p {
		where := ""
		if n := lines.lineOf(pr.path); n > 0 {
			where = "line " + strconv.Itoa(n) + ": "
		}
		errs[i] = errors.New("config: " + where + c.describePath(pr.path) + ": " + pr.reason)
	}
	return errors.Join(errs...)
}

// describePath adds a route's id to a path inside routes[i], as in
// `routes[2] (id "admin").upstream`, when the route has an id of its own
// (not the default route-<i>) and the path is not the id itself.
func (c *Config) describePath(path string) string {
	rest, ok := strings.CutPrefix(path, "routes[")
	if !ok {
		return path
	}
	digits, rest, ok := strings.Cut(rest, "]")
	i, err := strconv.Atoi(digits)
	if !ok || err != nil || i < 0 || i >= len(c.Routes) || rest == ".id" {
		return path
	}
	id := c.Routes[i].ID
	if id == "" || id == defaultRouteID(i) {
		return path
	}
	return fmt.Sprintf("routes[%d] (id %q)%s", i, id, rest)
}

// positive requires v > 0; zero can only remain when a default was overridden
// with a negative value or a route's upstream is missing.
func positive[T ~int | ~int64](p *problems, path string, v T) {
	if v <= 0 {
		p.add(path, "must be positive, got %v", v)
	}
}

// addrRules loosen address checks for listeners.
type addrRules struct {
	emptyHost bool // ":8080" means every interface
	portZero  bool // port 0 means the kernel picks one
}

// addr requires "host:port" with a numeric port in range.
func (p *problems) addr(path, addr string, rules addrRules) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			p.add(path, "%s %q", ae.Err, ae.Addr)
		} else {
			p.add(path, "%v", err)
		}
		return
	}
	if host == "" && !rules.emptyHost {
		p.add(path, "missing host in address %q", addr)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	switch {
	case err != nil && rules.portZero:
		p.add(path, "port %q in address %q is not a number from 0 to 65535 (0 picks a free port)", port, addr)
	case err != nil:
		p.add(path, "port %q in address %q is not a number from 1 to 65535", port, addr)
	case n == 0 && !rules.portZero:
		p.add(path, "port 0 in address %q; a node needs a real port", addr)
	}
}

// isName accepts identifiers safe in logs and metric labels.
func isName(s string) bool {
	return s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
	}) < 0
}
