// This package's filters' configuration types, defaults and registration.

package transform

import (
	"fmt"
	"net/netip"
	"regexp"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/transform/otlp"
	"github.com/loopgate/loopgate/pool/units"
)

// The names the config gives this package's filters.
const (
	NameRequestID = "request_id"
	NameHeaders   = "headers"
	NameRewrite   = "rewrite"
	NameGray      = "gray"
	NameHash      = "hash"
	NameForwarded = "forwarded"

	NameTraceContext = "trace_context"
	NameDirectNode   = "direct_node"
)

func init() {
	filters.Register(filters.Registration{
		Name: NameRequestID, Order: 100, Default: true, RouteIndependent: true,
		New: func(b *filters.Build) (filters.Filter, error) { return NewRequestID(b.Order), nil },
	})
	filters.Register(filters.Registration{
		// The global section turns it on for every route (traceRoute's
		// EnabledBy), as a global ip_allow turns on ip_access.
		Name: NameTraceContext, Order: 110,
		Global: func() filters.GlobalConfig { return new(TraceContextGlobal) },
		Route:  func() filters.RouteConfig { return new(traceRoute) },
		New:    newTraceContext,
		// The span exporter outlives reloads: its queues, its sender and
		// its counters.
		Service: func() any { return otlp.New() },
	})
	filters.Register(filters.Registration{
		Name: NameHeaders, Order: 400, NeedsRoute: true,
		Route: func() filters.RouteConfig { return new(HeadersRoute) },
		New: func(b *filters.Build) (filters.Filter, error) {
			return NewHeaders(b.Order, b.Config.(*HeadersRoute))
		},
	})
	filters.Register(filters.Registration{
		Name: NameRewrite, Order: 500, NeedsRoute: true,
		Route: func() filters.RouteConfig { return new(RewriteRoute) },
		New: func(b *filters.Build) (filters.Filter, error) {
			return NewRewrite(b.Order, b.Config.(*RewriteRoute).Rewrite)
		},
	})
	filters.Register(filters.Registration{
		Name: NameGray, Order: 600, NeedsRoute: true,
		Route: func() filters.RouteConfig { return new(GrayRoute) },
		New:   newGray,
	})
	filters.Register(filters.Registration{
		// After gray, which it overrides, and after auth, whose roles
		// allow_roles reads.
		Name: NameDirectNode, Order: 640, NeedsRoute: true,
		Route: func() filters.RouteConfig { return new(DirectNodeRoute) },
		New:   newDirectNode,
	})
	filters.Register(filters.Registration{
		Name: NameHash, Order: 700, NeedsRoute: true,
		Route: func() filters.RouteConfig { return new(HashRoute) },
		New: func(b *filters.Build) (filters.Filter, error) {
			return NewHash(b.Order, b.Config.(*HashRoute).Hash), nil
		},
	})
	filters.Register(filters.Registration{
		Name: NameForwarded, Order: 800, Default: true, RouteIndependent: true,
		New: func(b *filters.Build) (filters.Filter, error) { return NewForwarded(b.Order, b.Trusted, b.Loops), nil },
	})
}

// HeadersRoute is the headers filter's route keys.
type HeadersRoute struct {
	Request  *HeaderOps `yaml:"request_headers,omitempty"`  // edits to the upstream request
	Response *HeaderOps `yaml:"response_headers,omitempty"` // edits to the response
}

// HeaderOps edits a head. Each list holds at most MaxHeaderOps entries.
type HeaderOps struct {
	Set    map[string]string `yaml:"set,omitempty"`    // replace (or add) these headers
	Add    map[string]string `yaml:"add,omitempty"`    // add alongside existing ones
	Remove []string          `yaml:"remove,omitempty"` // drop these headers

	ops     headerOps // prepared by Validate
	checked bool      // Validate ran
}

// RewriteRoute is the rewrite filter's route key.
type RewriteRoute struct {
	Rewrite *Rewrite `yaml:"rewrite,omitempty"`
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
	Regex       string `yaml:"regex"`       // RE2 pattern, compiled when the config is validated
	Replacement string `yaml:"replacement"` // with $1-style groups; used with regex
	AddPrefix   string `yaml:"add_prefix"`  // prepended with exactly one '/' at the join; default ""

	strip   []byte         // StripPrefix normalised, without a trailing '/'; set by Validate
	re      *regexp.Regexp // Regex compiled by Validate; nil without one
	checked bool           // Validate ran
}

// GrayRoute is the gray filter's route key.
type GrayRoute struct {
	Gray *Gray `yaml:"gray,omitempty"`
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

// HashRoute is the hash filter's route key.
type HashRoute struct {
	Hash *Hash `yaml:"hash,omitempty"`
}

// Hash picks a node by consistent hashing, so the same key keeps landing on
// the same node.
type Hash struct {
	Header string `yaml:"header"` // hash this request header
	Cookie string `yaml:"cookie"` // or this cookie
	User   bool   `yaml:"user"`   // or the authenticated subject
}

// TraceContextGlobal is the trace_context filter's top-level key.
type TraceContextGlobal struct {
	TraceContext *TraceContext `yaml:"trace_context,omitempty"` // default none: traceparent passes untouched, no trace id is logged
}

// TraceContext propagates W3C Trace Context: a valid traceparent and its
// tracestate are kept, a malformed or missing one is replaced by a new
// trace, and the trace id is logged.
type TraceContext struct {
	// SamplePercent is the share (0-100) of the traces the gateway starts
	// that it marks sampled (flag 01). A client's valid traceparent keeps
	// its own flag. Default 100, as Envoy's random_sampling.
	SamplePercent *int `yaml:"sample_percent"`
	// DyeHeader names a request header (a gray or test tag) echoed on the
	// response; it goes upstream as every header does. Default "" = none.
	DyeHeader string `yaml:"dye_header"`
	// OTLP exports the gateway's own span of every sampled request to an
	// OpenTelemetry collector. Default none: the gateway reports no span
	// and forwards a valid traceparent unchanged.
	OTLP *OTLP `yaml:"otlp,omitempty"`
}

// OTLP is where spans go (OTLP/HTTP, JSON) and how they are batched. Zero
// means the default.
type OTLP struct {
	Endpoint      string            `yaml:"endpoint"`       // required: http(s) URL; no path means /v1/traces
	BatchSize     int               `yaml:"batch_size"`     // spans per post; default 512
	FlushInterval units.Duration    `yaml:"flush_interval"` // longest a span waits for its batch; default 1s
	QueueSize     int               `yaml:"queue_size"`     // spans each event loop holds; beyond it, dropped and counted; default 4096; fixed at start
	Timeout       units.Duration    `yaml:"timeout"`        // one post's deadline; default 5s
	Headers       map[string]string `yaml:"headers"`        // sent with every post; default none
	ServiceName   string            `yaml:"service_name"`   // the resource's service.name; default "loopgate"

	opts *otlp.Options // built by Provision, handed to every span
}

// options are the exporter's options Provision built: one pointer per
// config, shared by every route's filter.
func (o *OTLP) options() *otlp.Options { return o.opts }

var _ filters.GlobalConfig = (*TraceContextGlobal)(nil)

// Provision defaults sample_percent to 100.
func (g *TraceContextGlobal) Provision() {
	if g.TraceContext != nil && g.TraceContext.SamplePercent == nil {
		p := 100
		g.TraceContext.SamplePercent = &p
	}
	if g.TraceContext != nil && g.TraceContext.OTLP != nil {
		o := g.TraceContext.OTLP
		opts := &otlp.Options{Endpoint: o.Endpoint, BatchSize: o.BatchSize, FlushInterval: time.Duration(o.FlushInterval),
			QueueSize: o.QueueSize, Timeout: time.Duration(o.Timeout), Headers: o.Headers, ServiceName: o.ServiceName}
		opts.Provision()
		o.opts = opts
		o.Endpoint, o.BatchSize, o.FlushInterval, o.QueueSize = opts.Endpoint, opts.BatchSize, units.Duration(opts.FlushInterval), opts.QueueSize
		o.Timeout, o.ServiceName = units.Duration(opts.Timeout), opts.ServiceName
	}
}

// Validate bounds sample_percent and checks dye_header is a field name.
func (g *TraceContextGlobal) Validate(c *filters.Check) {
	t := g.TraceContext
	if t == nil {
		return
	}
	if p := *t.SamplePercent; p < 0 || p > 100 {
		c.Add("trace_context.sample_percent", "must be 0 to 100, got %d", p)
	}
	if t.DyeHeader != "" {
		c.EditableHeader("trace_context.dye_header", t.DyeHeader)
	}
	if t.OTLP != nil {
		for _, p := range t.OTLP.opts.Validate() {
			c.Add("trace_context.otlp."+p.Option, "%s", p.Reason)
		}
		for name := range t.OTLP.Headers {
			c.HeaderName("trace_context.otlp.headers", name)
		}
	}
}

// DirectNodeRoute is the direct_node filter's route key.
type DirectNodeRoute struct {
	DirectNode *DirectNode `yaml:"direct_node,omitempty"` // default none: no client chooses a node
}

// DirectNode lets allowed clients send a request to one named node of the
// route's upstream. At least one of AllowCIDRs and AllowRoles is required.
type DirectNode struct {
	Header     string   `yaml:"header"`      // carries the node's address as configured ("10.0.0.1:8080"); default X-Loopgate-Node
	AllowCIDRs []string `yaml:"allow_cidrs"` // client IPs (as trusted_proxies report them) that may choose; default none
	AllowRoles []string `yaml:"allow_roles"` // identity roles that may choose (auth or external_auth must run first); default none

	cidrs []netip.Prefix // parsed by Validate
}

var _ filters.RouteConfig = (*DirectNodeRoute)(nil)

// Provision defaults direct_node.header to X-Loopgate-Node.
func (d *DirectNodeRoute) Provision() {
	if d.DirectNode != nil {
		filters.SetDefault(&d.DirectNode.Header, "X-Loopgate-Node")
	}
}

// Validate checks the header and parses allow_cidrs; a section that allows
// nobody is refused, since it would only turn every use into a 403.
func (d *DirectNodeRoute) Validate(c *filters.Check) {
	n := d.DirectNode
	if n == nil {
		return
	}
	c.EditableHeader("direct_node.header", n.Header)
	n.cidrs = c.Prefixes("direct_node.allow_cidrs", n.AllowCIDRs)
	if len(n.AllowCIDRs)+len(n.AllowRoles) == 0 {
		c.Add("direct_node", "allows nobody: set allow_cidrs or allow_roles")
	}
	if len(n.AllowRoles) > 0 && c.Route != nil && !c.Route.Runs("auth") && !c.Route.Runs("external_auth") {
		c.Add("direct_node.allow_roles", "no identity to read roles from: the route runs neither auth nor external_auth")
	}
}

// EnabledBy: the direct_node section.
func (d *DirectNodeRoute) EnabledBy(filters.GlobalConfig) string {
	if d.DirectNode != nil {
		return "direct_node"
	}
	return ""
}

// newDirectNode builds a route's direct_node filter over its upstream's
// nodes.
func newDirectNode(b *filters.Build) (filters.Filter, error) {
	d := b.Config.(*DirectNodeRoute).DirectNode
	if d == nil {
		return nil, nil
	}
	return NewDirectNode(b.Order, d, b.Nodes), nil
}

// traceRoute is trace_context's route config: it owns no route key, and
// exists so that the global section enables the filter on every route.
type traceRoute struct{}

var _ filters.RouteConfig = (*traceRoute)(nil)

func (*traceRoute) Provision()              {}
func (*traceRoute) Validate(*filters.Check) {}

// EnabledBy: the global trace_context section.
func (*traceRoute) EnabledBy(global filters.GlobalConfig) string {
	if g, _ := global.(*TraceContextGlobal); g != nil && g.TraceContext != nil {
		return "the global trace_context section, which applies to every route"
	}
	return ""
}

// newTraceContext builds the filter when the trace_context section is set.
func newTraceContext(b *filters.Build) (filters.Filter, error) {
	g, _ := b.Global.(*TraceContextGlobal)
	if g == nil || g.TraceContext == nil {
		return nil, nil
	}
	var exp *otlp.Exporter
	if o := g.TraceContext.OTLP; o != nil {
		exp, _ = filters.Service[*otlp.Exporter](b)
		if b.Loops < 1 {
			exp = nil // no loop to record on (a config compiled to be checked)
		}
		if exp != nil {
			exp.Start(b.Loops, o.QueueSize)
		}
	}
	return NewTraceContext(b.Order, b.Loops, g.TraceContext, exp), nil
}

var (
	_ filters.RouteConfig = (*HeadersRoute)(nil)
	_ filters.RouteConfig = (*RewriteRoute)(nil)
	_ filters.RouteConfig = (*GrayRoute)(nil)
	_ filters.RouteConfig = (*HashRoute)(nil)
)

// Provision does nothing: headers has no defaults.
func (h *HeadersRoute) Provision() {}

// EnabledBy: either edit list.
func (h *HeadersRoute) EnabledBy(filters.GlobalConfig) string {
	if h.Request != nil || h.Response != nil {
		return "request_headers/response_headers"
	}
	return ""
}

// Provision does nothing: rewrite has no defaults.
func (r *RewriteRoute) Provision() {}

// EnabledBy: the rewrite section.
func (r *RewriteRoute) EnabledBy(filters.GlobalConfig) string {
	if r.Rewrite != nil {
		return "rewrite"
	}
	return ""
}

// Provision defaults gray.value to "true".
func (g *GrayRoute) Provision() {
	if g.Gray != nil {
		filters.SetDefault(&g.Gray.Value, "true")
	}
}

// EnabledBy: the gray section.
func (g *GrayRoute) EnabledBy(filters.GlobalConfig) string {
	if g.Gray != nil {
		return "gray"
	}
	return ""
}

// Provision does nothing: hash has no defaults.
func (h *HashRoute) Provision() {}

// EnabledBy: the hash section.
func (h *HashRoute) EnabledBy(filters.GlobalConfig) string {
	if h.Hash != nil {
		return "hash"
	}
	return ""
}

// newGray builds a route's gray filter, resolving its upstream through the
// engine.
func newGray(b *filters.Build) (filters.Filter, error) {
	g := b.Config.(*GrayRoute).Gray
	if g == nil {
		return nil, nil
	}
	group, ok := b.Upstream(g.Upstream)
	if !ok {
		return nil, fmt.Errorf("gray.upstream %q is not an upstream", g.Upstream)
	}
	return NewGray(b.Order, g, group), nil
}
