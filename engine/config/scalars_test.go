// Tests that YAML scalars of the wrong type are refused, never coerced.

package config

import (
	"testing"
	"time"
)

// TestScalarsNotCoerced lists what yaml.v3 alone would quietly accept: a
// float truncated into an int, a leading-zero integer read as octal, YAML
// 1.1 booleans (yes, on, y, even quoted) read as true, and a bare number
// for a duration.
func TestScalarsNotCoerced(t *testing.T) {
	cases := []struct{ yaml, want string }{
		{"loops: 1.5\n", "config: loops: want an integer, got 1.5 (line 1)"},
		{"loops: 2.0\n", "config: loops: want an integer, got 2.0 (line 1)"},
		{"limits:\n  max_connections: 1e5\n", "config: limits.max_connections: want an integer, got 1e5 (line 2)"},
		{"limits:\n  max_header_count: 017\n", "config: limits.max_header_count: want an integer, got 017: YAML reads a leading 0 as octal; write the number without it (line 2)"},
		{"loops: \"2\"\n", `config: loops: want an integer, got "2" (line 1)`},
		{"upstreams:\n  - name: u\n    nodes: [{addr: \"h:1\", weight: 2.5}]\n", "config: upstreams[0].nodes[0].weight: want an integer, got 2.5 (line 3)"},
		{"upstreams:\n  - name: u\n    nodes: [h:1]\n    max_conns: 10.9\n", "config: upstreams[0].max_conns: want an integer, got 10.9 (line 4)"},
		{"filter_orders: {auth: 250.5}\n", "config: filter_orders.auth: want an integer, got 250.5 (line 1)"},
		{minimal + "    gray: {upstream: u, weight: 12.5}\n", "config: routes[0].gray.weight: want an integer, got 12.5 (line 8)"},
		{"pin: yes\n", `config: pin: want true or false, got "yes" (line 1)`},
		{"pin: \"yes\"\n", `config: pin: want true or false, got "yes" (line 1)`},
		{"pin: on\n", `config: pin: want true or false, got "on" (line 1)`},
		{"pin: y\n", `config: pin: want true or false, got "y" (line 1)`},
		{"pin: \"true\"\n", `config: pin: want true or false, got "true" (line 1)`},
		{"pin: 1\n", "config: pin: want true or false, got 1 (line 1)"},
		{"allow_underscore_headers: no\n", `config: allow_underscore_headers: want true or false, got "no" (line 1)`},
		{"auth:\n  external: {fail_open: off}\n", `config: auth.external.fail_open: want true or false, got "off" (line 2)`},
		{minimal + "    hash: {user: Yes}\n", `config: routes[0].hash.user: want true or false, got "Yes" (line 8)`},
		{"timeouts:\n  idle: 30\n", `config: timeouts.idle: invalid duration 30: a unit is needed, such as "30s" or "30ms" (line 2)`},
		{"timeouts:\n  drain: 1.5\n", `config: timeouts.drain: invalid duration 1.5: a unit is needed, such as "1.5s" or "1.5ms" (line 2)`},
		{"timeouts:\n  idle: \"30\"\n", `config: timeouts.idle: invalid duration 30: a unit is needed, such as "30s" or "30ms" (line 2)`},
		{"upstreams:\n  - name: u\n    nodes: [h:1]\n    connect_timeout: 250\n", `config: upstreams[0].connect_timeout: invalid duration 250: a unit is needed, such as "250s" or "250ms" (line 4)`},
		{"limits:\n  max_body_bytes: 1.5\n", `config: limits.max_body_bytes: invalid size "1.5": want bytes (4096) or a number with a unit B, KiB, MiB or GiB ("16KiB") (line 2)`},
	}
	for _, c := range cases {
		_, err := Parse([]byte(c.yaml))
		if err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q)\n got: %v\nwant: %s", c.yaml, err, c.want)
		}
	}
}

// TestScalarsAccepted pins down the forms the strict rules must keep: YAML
// 1.2 integers and booleans, an unquoted zero duration, and numbers or
// booleans where a string is wanted (they are read as written).
func TestScalarsAccepted(t *testing.T) {
	c := mustParse(t, `
loops: 0x2
pin: True
allow_underscore_headers: FALSE
limits:
  max_connections: 1_000
  max_header_count: 0
timeouts:
  idle: 0
auth:
  jwt: {hs256_secret: 123456789}
upstreams:
  - {name: 42, nodes: ["h:1"]}
  - {name: v2, nodes: ["h:2"]}
routes:
  - {path: /a, upstream: 42, gray: {upstream: v2, header: X-Gray, value: true}}
`)
	switch {
	case c.Loops != 2 || !c.Pin || c.AllowUnderscoreHeaders || c.Limits.MaxConnections != 1000:
		t.Errorf("loops %d pin %v allow_underscore_headers %v max_connections %d", c.Loops, c.Pin, c.AllowUnderscoreHeaders, c.Limits.MaxConnections)
	case c.Limits.MaxHeaderCount != defaultMaxHeaderCount || c.Timeouts.Idle != Duration(60*time.Second):
		t.Errorf("zeros did not take the defaults: max_header_count %d, idle %v", c.Limits.MaxHeaderCount, c.Timeouts.Idle)
	case authOf(c).JWT.HS256Secret != "123456789" || c.Upstreams[0].Name != "42" || grayOf(c.Routes[0]).Value != "true":
		t.Errorf("numbers and booleans for strings: secret %q, name %q, gray value %q", authOf(c).JWT.HS256Secret, c.Upstreams[0].Name, grayOf(c.Routes[0]).Value)
	}
}
