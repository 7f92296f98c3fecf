// Tests for the direct_node filter's config and its request phase.

package transform

import (
	"strings"
	"testing"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/filterstest"
)

func TestDirectNodeConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg  DirectNode
		want string // prefix of the one problem; "" = accepted
	}{
		{DirectNode{AllowCIDRs: []string{"10.0.0.0/8"}}, ""},
		{DirectNode{AllowRoles: []string{"sre"}}, ""},
		{DirectNode{AllowRoles: []string{"sre"}, AllowCIDRs: []string{"10.0.0.0/8"}}, "routes[0].direct_node.allow_roles: no identity"},
		{DirectNode{}, "routes[0].direct_node: allows nobody"},
		{DirectNode{AllowCIDRs: []string{"10.0.0.0/33"}}, "routes[0].direct_node.allow_cidrs[0]"},
		{DirectNode{Header: "Transfer-Encoding", AllowRoles: []string{"sre"}}, "routes[0].direct_node.header"},
	} {
		r := &DirectNodeRoute{DirectNode: &tc.cfg}
		chain := []string{"auth", "direct_node"}
		if strings.HasSuffix(tc.want, "no identity") {
			chain = chain[1:]
		}
		p := filterstest.Check(r, &filterstest.Env{Upstreams: []string{"main"}}, &filters.RouteInfo{ID: "r", Upstream: "main", Chain: chain})
		if tc.want == "" && len(p) > 0 || tc.want != "" && (len(p) != 1 || !strings.HasPrefix(p[0], tc.want)) {
			t.Errorf("%+v: problems %q, want %q", tc.cfg, p, tc.want)
		}
		if tc.want == "" && tc.cfg.Header != "X-Loopgate-Node" {
			t.Errorf("header defaulted to %q", tc.cfg.Header)
		}
	}
}

func TestDirectNodeRequest(t *testing.T) {
	r := &DirectNodeRoute{DirectNode: &DirectNode{AllowCIDRs: []string{"192.0.2.0/24"}, AllowRoles: []string{"sre"}}}
	if p := filterstest.Check(r, &filterstest.Env{}, &filters.RouteInfo{ID: "r", Chain: []string{"auth", "direct_node"}}); len(p) > 0 {
		t.Fatal(p)
	}
	f := NewDirectNode(640, r.DirectNode, []string{"10.0.0.1:80", "10.0.0.2:80"})
	for _, tc := range []struct {
		name, peer, role string
		lines            []string
		node, status     int
	}{
		{"allowed by IP", "192.0.2.9", "", []string{"X-Loopgate-Node: 10.0.0.2:80"}, 2, 0},
		{"allowed by role", "198.51.100.1", "sre", []string{"X-Loopgate-Node: 10.0.0.1:80"}, 1, 0},
		{"not allowed", "198.51.100.1", "dev", []string{"X-Loopgate-Node: 10.0.0.1:80"}, 0, 403},
		{"unknown node", "192.0.2.9", "", []string{"X-Loopgate-Node: 10.0.0.3:80"}, 0, 400},
		{"twice", "192.0.2.9", "", []string{"X-Loopgate-Node: 10.0.0.1:80", "X-Loopgate-Node: 10.0.0.1:80"}, 0, 400},
		{"absent", "198.51.100.1", "", nil, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := request(t, append([]string{"GET / HTTP/1.1", "Host: a"}, tc.lines...)...)
			x := exchange(req, tc.peer)
			x.Upstream.Group = 3 // as gray would
			if tc.role != "" {
				x.Identity.Roles = []string{tc.role}
			}
			v := f.Request(x)
			if tc.status != 0 {
				if v != filters.Respond || x.Rejection.Status != tc.status {
					t.Fatalf("verdict %v, rejection %+v; want %d", v, x.Rejection, tc.status)
				}
				return
			}
			if v != filters.Continue || x.Upstream.Node != tc.node {
				t.Fatalf("verdict %v, node %d; want %d", v, x.Upstream.Node, tc.node)
			}
			if tc.node > 0 && (x.Upstream.Group != -1 || !removes(&x.ReqEdits, "X-Loopgate-Node")) {
				t.Errorf("directed: group %d, edits %+v", x.Upstream.Group, x.ReqEdits)
			}
		})
	}
}

func TestDirectNodeAllocs(t *testing.T) {
	r := checked(t, &DirectNodeRoute{DirectNode: &DirectNode{AllowCIDRs: []string{"192.0.2.0/24"}}})
	f := NewDirectNode(640, r.DirectNode, []string{"10.0.0.1:80", "10.0.0.2:80"})
	req, _ := request(t, "GET / HTTP/1.1", "Host: a", "X-Loopgate-Node: 10.0.0.2:80")
	x := exchange(req, "192.0.2.9")
	id := []byte("gen-0001")
	run := func() {
		x.Reset(req, id, x.Peer, 0, nil)
		f.Request(x)
	}
	for i := 0; i < 10; i++ {
		run()
	}
	if n := testing.AllocsPerRun(1000, run); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
}
