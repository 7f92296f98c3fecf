// The admin section's two forms, its checks, and that it cannot change on
// a reload.

package config

import (
	"reflect"
	"testing"

	"gopkg.in/yaml.v3"
)

func TestAdminForms(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want Admin
	}{
		{"", Admin{Address: "127.0.0.1:9901"}},
		{"admin: 127.0.0.1:9902\n", Admin{Address: "127.0.0.1:9902"}},
		{"admin: \"off\"\n", Admin{Address: AdminOff}},
		{"admin: {pprof: true}\n", Admin{Address: "127.0.0.1:9901", Pprof: true}},
		{"admin:\n  address: 0.0.0.0:9901\n  hosts: [gw-admin.internal, \"[fd00::1]\", 10.0.0.7, Admin.Example.]\n  pprof: false\n  tokens: [{name: ops, token: 0123456789abcdef}]\n",
			Admin{Address: "0.0.0.0:9901", Hosts: []string{"gw-admin.internal", "[fd00::1]", "10.0.0.7", "Admin.Example."},
				Tokens: []AdminToken{{Name: "ops", Role: RoleRead, Token: "0123456789abcdef"}}}},
	} {
		if got := mustParse(t, c.yaml).Admin; !reflect.DeepEqual(got, c.want) {
			t.Errorf("%q: admin %+v, want %+v", c.yaml, got, c.want)
		}
	}
}

func TestAdminErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"admin: {address: 9901}\n", `config: line 1: admin: missing port in address "9901"`},
		{"admin: {adress: 127.0.0.1:1}\n", `config: admin.adress: unknown field, did you mean "address"? (line 1)`},
		{"admin: {pprof: yes}\n", `config: admin.pprof: want true or false, got "yes" (line 1)`},
		{"admin: [a]\n", `config: admin: want "host:port", "off" or {address: "host:port", hosts: [...], pprof: true} (line 1)`},
		{"admin:\n  hosts: [\"gw.internal:9901\"]\n", `config: line 2: admin.hosts[0]: "gw.internal:9901" has a port; list the name alone (any port matches)`},
		{"admin:\n  hosts: [\"::1\"]\n", `config: line 2: admin.hosts[0]: "::1" is not a host name or IP address (IPv6 goes in brackets)`},
		{"admin:\n  hosts: [\"*.internal\"]\n", `config: line 2: admin.hosts[0]: "*.internal": wildcards are not supported; list each name`},
		{"admin:\n  hosts: [\"\"]\n", `config: line 2: admin.hosts[0]: "" is not a host name or IP address (IPv6 goes in brackets)`},
	} {
		if _, err := Parse([]byte(c.yaml)); err == nil || err.Error() != c.want {
			t.Errorf("Parse(%q)\n got: %v\nwant: %s", c.yaml, err, c.want)
		}
	}
}

// The shorthand is written back when only the address is set, the mapping
// otherwise; both read back the same.
func TestAdminRoundTrip(t *testing.T) {
	for _, text := range []string{"admin: 127.0.0.1:9901\n", "admin: {hosts: [gw.internal], pprof: true}\n"} {
		c := mustParse(t, text)
		out, err := yaml.Marshal(c.Admin)
		if err != nil {
			t.Fatal(err)
		}
		var back Admin
		if err := yaml.Unmarshal(out, &back); err != nil || !reflect.DeepEqual(back, c.Admin) {
			t.Errorf("%q: marshalled %q, read back %+v (%v)", text, out, back, err)
		}
	}
}

func TestAdminIsFixed(t *testing.T) {
	old := mustParse(t, "admin: 127.0.0.1:9901\n")
	next := mustParse(t, "admin: {hosts: [gw.internal], pprof: true}\n")
	want := []string{"admin.hosts [] -> [gw.internal]", "admin.pprof false -> true"}
	if d := Compare(old, next); !reflect.DeepEqual(d.Fixed, want) {
		t.Fatalf("fixed: %q, want %q", d.Fixed, want)
	}
}
