// A filter added outside engine and engine/config, by one filters.Register
// call from this test package, is decoded, validated, built and run like a
// built-in one.

package engine_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
)

// pin sends its route's requests to another upstream, as gray does for all
// of them, and notes it in a request header.
type pin struct {
	filters.Base
	group int
	note  []byte
}

func (p *pin) Request(x *filters.Exchange) filters.Verdict {
	x.Upstream.Group = p.group
	x.ReqEdits.AddSet("X-Pinned", p.note)
	return filters.Continue
}

type pinGlobal struct {
	Note string `yaml:"pin_note"` // default "pinned"
}

func (g *pinGlobal) Provision()              { filters.SetDefault(&g.Note, "pinned") }
func (g *pinGlobal) Validate(*filters.Check) {}

type pinRoute struct {
	To string `yaml:"pin_to,omitempty"` // an upstream
}

func (r *pinRoute) Provision() {}

func (r *pinRoute) Validate(c *filters.Check) {
	if r.To != "" && !c.Env.HasUpstream(r.To) {
		c.Add("pin_to", "unknown upstream %q", r.To)
	}
}

func (r *pinRoute) EnabledBy(filters.GlobalConfig) string {
	if r.To != "" {
		return "pin_to"
	}
	return ""
}

func init() {
	filters.Register(filters.Registration{
		Name: "pin", Order: 650, NeedsRoute: true,
		Global: func() filters.GlobalConfig { return new(pinGlobal) },
		Route:  func() filters.RouteConfig { return new(pinRoute) },
		New: func(b *filters.Build) (filters.Filter, error) {
			group, _ := b.Upstream(b.Config.(*pinRoute).To) // Validate checked it exists
			return &pin{Base: filters.Base{FilterName: b.Name, FilterOrder: b.Order}, group: group,
				note: []byte(b.Global.(*pinGlobal).Note)}, nil
		},
	})
}

func TestRegisteredFilterRuns(t *testing.T) {
	answer := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, name+" "+r.Header.Get("X-Pinned")) }
	}
	a, b := startUpstream(t, answer("a")), startUpstream(t, answer("b"))
	g := startGateway(t, `
pin_note: by-test
upstreams:
  - {name: a, nodes: ["%s"]}
  - {name: b, nodes: ["%s"]}
routes:
  - {id: pinned, path: /pinned, upstream: a, pin_to: b}
  - {id: plain, path: /plain, upstream: a}
`, a, b)
	for path, want := range map[string]string{"/pinned": "b by-test", "/plain": "a "} {
		f := fetch(g.url(path))
		if f.err != nil || f.resp.StatusCode != 200 || string(f.body) != want {
			t.Errorf("%s: %v %v %q, want %q", path, f.err, f.resp, f.body, want)
		}
	}

	_, err := config.Parse([]byte("upstreams: [{name: a, nodes: [\"h:1\"]}]\nroutes:\n  - {id: x, path: /x, upstream: a, pin_to: nope}\n"))
	if err == nil || !strings.Contains(err.Error(), `config: line 3: routes[0] (id "x").pin_to: unknown upstream "nope"`) {
		t.Errorf("an unknown pin_to upstream: %v", err)
	}
}
