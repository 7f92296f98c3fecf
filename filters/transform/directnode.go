// The direct_node filter: a request sent to one named node of its route's
// upstream, for debugging and directed tests, by clients the route allows.

package transform

import (
	"net/netip"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/access"
)

type directNode struct {
	filters.Base
	header   string
	repeated string // the 400's message for a request repeating header
	nodes    []string
	cidrs    []netip.Prefix
	roles    []string
}

var _ filters.Filter = (*directNode)(nil)

// NewDirectNode returns the "direct_node" filter for a route whose upstream
// has nodes (their addresses, in config order) from a validated config.
// Safe for concurrent use.
func NewDirectNode(order int, cfg *DirectNode, nodes []string) filters.Filter {
	return &directNode{Base: filters.Base{FilterName: NameDirectNode, FilterOrder: order},
		header: cfg.Header, repeated: "more than one " + cfg.Header + " header",
		nodes: nodes, cidrs: cfg.cidrs, roles: cfg.AllowRoles}
}

// Request sends a request carrying the header to the node it names, when
// the client may choose: its IP is in allow_cidrs or its identity has a
// role of allow_roles. A client that may not gets 403 (40301), a node name
// that is not one of the upstream's 400 (40001): a directed test must not
// pass on a node it did not ask for. The header never reaches the
// upstream. It does not allocate.
func (f *directNode) Request(x *filters.Exchange) filters.Verdict {
	v, n := x.Req.Headers.Only(f.header)
	if n == 0 {
		return filters.Continue
	}
	x.ReqEdits.AddRemove(f.header)
	if n > 1 {
		return x.Reject(400, 40001, f.repeated)
	}
	if !f.allowed(x) {
		return x.Reject(403, 40301, "not allowed to choose a node")
	}
	for i, node := range f.nodes {
		if string(v) == node {
			// The route's own upstream, whatever gray chose: the node
			// is one of its nodes. The hash key no longer matters.
			x.Upstream = filters.UpstreamEdits{Group: -1, Node: i + 1}
			return filters.Continue
		}
	}
	return x.Reject(400, 40001, "unknown node")
}

func (f *directNode) allowed(x *filters.Exchange) bool {
	if access.Contains(f.cidrs, x.ClientIP) {
		return true
	}
	for _, r := range f.roles {
		if x.Identity.HasRole(r) {
			return true
		}
	}
	return false
}
