// Tests that validation errors give the YAML line and the route's id.

package config

import (
	"strings"
	"testing"
)

// linesYAML has a problem of each kind lines are found for: a key that is
// written, a key that is left out (its list item's line), a route problem
// found by the route table, a map key, and one whose section is absent
// altogether (no line).
const linesYAML = `listen: 127.0.0.1:8080
admin: "off"
filter_orders:
  gray: 300
upstreams:
  - name: backend
    nodes:
      - 127.0.0.1:9001
routes:
  - id: public
    prefix: /
    upstream: backend
  - id: admin
    prefix: /admin/
    upstream: x
  - path: /b
    external_auth: true
  - id: again
    prefix: /admin
    upstream: backend
  - {id: flow, path: /f, upstream: backend, escaped_slashes: maybe}
`

func TestValidationErrorsCarryLines(t *testing.T) {
	_, err := Parse([]byte(linesYAML))
	if err == nil {
		t.Fatal("Parse accepted a config with problems")
	}
	want := []string{
		"config: line 4: filter_orders.gray: order 300 is also auth's; orders must be unique",
		"config: auth.external.upstream: missing, and routes[2] runs external_auth",
		`config: line 15: routes[1] (id "admin").upstream: unknown upstream "x" (known: backend)`,
		"config: line 16: routes[2].upstream: missing",
		`config: line 21: routes[4] (id "flow").escaped_slashes: "maybe": want "reject" or "keep"`,
		`config: line 18: routes[3] (id "again"): duplicates routes[1] (same path or prefix, host and methods)`,
	}
	if got := strings.Split(err.Error(), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

// TestValidateWithoutYAML: a Config built in code has no lines, but its
// errors still name the route's id.
func TestValidateWithoutYAML(t *testing.T) {
	c := mustParse(t, minimal)
	c.Routes[0].ID = "api"
	c.Routes[0].Upstream = "gone"
	want := `config: routes[0] (id "api").upstream: unknown upstream "gone" (known: u)`
	if err := c.Validate(); err == nil || err.Error() != want {
		t.Fatalf("Validate() = %v, want %s", err, want)
	}
	c.Routes[0].ID = "route-0" // the default id adds nothing
	if err := c.Validate(); err == nil || err.Error() != `config: routes[0].upstream: unknown upstream "gone" (known: u)` {
		t.Fatalf("Validate() = %v", err)
	}
}

func TestLineOf(t *testing.T) {
	l := indexLines([]byte("a:\n  b:\n    - x\n    - {c: 1}\nd: [\"p.q\"]\n"))
	for path, want := range map[string]int{
		"a": 1, "a.b": 2, "a.b[0]": 3, "a.b[1]": 4, "a.b[1].c": 4,
		"a.b[1].missing": 4, "a.b[7]": 2, "a.zz.yy": 1, "d[0]": 5, "d[0].p.q": 5, "nowhere": 0, "": 0,
	} {
		if got := l.lineOf(path); got != want {
			t.Errorf("lineOf(%q) = %d, want %d", path, got, want)
		}
	}
	if got := lineIndex(nil).lineOf("a"); got != 0 {
		t.Errorf("nil index: lineOf = %d", got)
	}
}

// Two listeners on port 0 get two different ports, so they do not clash.
func TestAdminAndListenBothPortZero(t *testing.T) {
	mustParse(t, "listen: 127.0.0.1:0\nadmin: 127.0.0.1:0\n")
}
