package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestListenersAndTLSValidation(t *testing.T) {
	const up = "upstreams:\n  - {name: u, nodes: [h:1]}\n"
	for _, c := range []struct{ yaml, want string }{
		{"listen: 127.0.0.1:1\nlisteners:\n  - address: 127.0.0.1:2\n",
			`listen: "127.0.0.1:1" is set beside listeners; listen is the shorthand for one plain listener: list it under listeners instead`},
		{"listeners:\n  - address: nope\n", `listeners[0].address: missing port in address "nope"`},
		{"listeners:\n  - address: 127.0.0.1:2\n  - address: 127.0.0.1:2\n", `listeners[1].address: duplicate address "127.0.0.1:2" (also listeners[0])`},
		{"listeners:\n  - address: 127.0.0.1:2\n    tls: {}\n", "listeners[0].tls.certificates: at least one {cert, key} is required"},
		{"listeners:\n  - address: 127.0.0.1:2\n    tls: {certificates: [{cert: c.pem}]}\n", "listeners[0].tls.certificates[0].key: missing"},
		{"listeners:\n  - address: 127.0.0.1:2\n    tls: {certificates: [{cert: c, key: k}], min_version: \"1.1\"}\n",
			`listeners[0].tls.min_version: unknown version "1.1" (want "1.2" or "1.3"; TLS 1.0 and 1.1 are insecure)`},
		{"listeners:\n  - address: 127.0.0.1:2\n    tls: {certificates: [{cert: c, key: k}], client_auth: {mode: sometimes}}\n",
			"listeners[0].tls.client_auth.ca: missing"},
		{"listeners:\n  - address: 127.0.0.1:2\n    tls: {certificates: [{cert: c, key: k}], client_auth: {ca: x, subject_header: \"X Subject\"}}\n",
			`listeners[0].tls.client_auth.subject_header: "X Subject" is not a header name`},
		{"listeners:\n  - address: 127.0.0.1:2\n    redirect_https: 443\n    tls: {certificates: [{cert: c, key: k}]}\n",
			"listeners[0].redirect_https: on an HTTPS listener"},
		{"tls: {max_handshakes: -1}\n", "tls.max_handshakes: must be positive, got -1"},
		{"tls: {handshake_priority: high}\n", `tls.handshake_priority: unknown priority "high" (want "auto", "normal", "nice" or "low")`},
		{"tls: {gc_heap_floor: -1}\n", "tls.gc_heap_floor: -1 is negative; 0 turns the floor off"},
		{"timeouts: {tls_handshake: -1s}\n", "timeouts.tls_handshake: must be positive, got -1s"},
		{up + "routes:\n  - {prefix: /, upstream: u, tls: https_only}\n", `routes[0].tls: "https_only", but no listener serves HTTPS`},
		{up + "routes:\n  - {prefix: /, upstream: u, tls: always}\n", `routes[0].tls: unknown value "always" (want "https_only" or "client_cert")`},
		{"upstreams:\n  - {name: u, nodes: [h:1], tls: {client_cert: c.pem}}\n", "upstreams[0].tls: client_cert and client_key go together"},
		{"upstreams:\n  - {name: u, nodes: [h:1], tls: {insecure_skip_verify: true, ca: x}}\n", "upstreams[0].tls.insecure_skip_verify: set beside ca or server_name"},
	} {
		_, err := Parse([]byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q)\n got: %v\nwant: %s", c.yaml, err, c.want)
		}
	}
	// listen stays the shorthand: the first listener's address is listen.
	c, err := Parse([]byte("listeners:\n  - address: 127.0.0.1:2\n  - address: 127.0.0.1:3\n    tls: {certificates: [{cert: c, key: k}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:2" || len(c.ClientListeners()) != 2 || c.Listeners[1].TLS.MinVersion != TLS12 || !c.HasTLS() {
		t.Errorf("defaults: listen %q, %+v", c.Listen, c.ClientListeners())
	}
	if d := Compare(c, mustParse(t, "listen: 127.0.0.1:2\n")); len(d.Fixed) == 0 {
		t.Error("dropping the HTTPS listener is not refused on a reload")
	}
	if d := Compare(c, mustParse(t, "listeners:\n  - address: 127.0.0.1:2\n  - address: 127.0.0.1:3\n    tls: {certificates: [{cert: c, key: k}]}\ntls: {handshake_priority: nice}\n")); fmt.Sprint(d.Fixed) != "[tls.handshake_priority auto -> nice]" {
		t.Errorf("a reload changing the handshake runner's bounds: fixed %q", d.Fixed)
	}
	for yaml, want := range map[string]int64{"": 64 << 20, "tls: {gc_heap_floor: 0}\n": 0, "tls: {gc_heap_floor: 128MiB}\n": 128 << 20} {
		if got := mustParse(t, yaml).TLS.HeapFloor(); got != want {
			t.Errorf("%q: heap floor %d, want %d", yaml, got, want)
		}
	}
	if d := Compare(mustParse(t, ""), mustParse(t, "tls: {gc_heap_floor: 0}\n")); fmt.Sprint(d.Fixed) != "[tls.gc_heap_floor 64MiB -> 0B]" {
		t.Errorf("a reload changing the heap floor: fixed %q", d.Fixed)
	}
	if d := Compare(mustParse(t, ""), mustParse(t, "tls: {gc_heap_floor: 64MiB}\n")); len(d.Fixed) != 0 {
		t.Errorf("the default heap floor, written out on a reload: fixed %q", d.Fixed)
	}
	if d := Compare(mustParse(t, "tls: {gc_heap_floor: 32MiB}\n"), mustParse(t, "tls: {gc_heap_floor: 32MiB}\n")); len(d.Fixed) != 0 {
		t.Errorf("the same heap floor, reloaded: fixed %q", d.Fixed)
	}
	if w := mustParse(t, "upstreams:\n  - {name: u, nodes: [h:1], tls: {insecure_skip_verify: true}}\nroutes:\n  - {prefix: /, upstream: u}\n").Warnings(); len(w) != 1 || !strings.Contains(w[0], "insecure_skip_verify") {
		t.Errorf("warnings %q", w)
	}
}
