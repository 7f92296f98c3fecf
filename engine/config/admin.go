// The admin section: its two YAML forms and its checks.

package config

import (
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/loopgate/loopgate/codec"
)

// Admin is the admin (control-plane) listener. In YAML it is either an
// address, the shorthand `admin: 127.0.0.1:9901` (or `admin: off`), or a
// mapping of these fields. It cannot change on a reload.
type Admin struct {
	// Address is the admin listener "host:port"; default "127.0.0.1:9901";
	// "off" disables it. The host is bound as written: an IPv4 address
	// (0.0.0.0 included) on IPv4 only, an IPv6 one ([::] included) on IPv6
	// only, an empty host (":9901") on every address of both.
	Address string `yaml:"address"`

	// Hosts are the Host header names the admin port serves besides
	// loopback (localhost, 127.0.0.0/8, [::1]) and the address a
	// connection arrived on: DNS-rebinding protection. Names or IP
	// literals, without a port. Default none.
	Hosts []string `yaml:"hosts,omitempty"`

	// Pprof serves Go's /debug/pprof/ endpoints. Default false.
	Pprof bool `yaml:"pprof,omitempty"`
}

// adminFields is Admin's mapping form; it has no methods, so decoding into
// it does not recurse into Admin.UnmarshalYAML.
type adminFields Admin

// UnmarshalYAML implements yaml.Unmarshaler for both forms. checkNode has
// vetted a mapping's keys and scalars against Admin's fields already.
func (a *Admin) UnmarshalYAML(n *yaml.Node) error {
	switch n.Kind {
	case yaml.ScalarNode:
		*a = Admin{Address: n.Value}
		return nil
	case yaml.MappingNode:
		var f adminFields
		if err := n.Decode(&f); err != nil {
			return err
		}
		*a = Admin(f)
		return nil
	default:
		return fmt.Errorf("want \"host:port\", \"off\" or {address: \"host:port\", hosts: [...], pprof: true}")
	}
}

// MarshalYAML writes the shorthand when only the address is set.
func (a Admin) MarshalYAML() (any, error) {
	if len(a.Hosts) == 0 && !a.Pprof {
		return a.Address, nil
	}
	return adminFields(a), nil
}

// validateAdmin checks the admin section; listen is the client listener,
// which the admin port may not share.
func (c *Config) validateAdmin(p *problems) {
	a := &c.Admin
	if a.Address == AdminOff {
		return
	}
	// Problems with the address are reported as "admin", the shorthand's
	// path, whichever form it was written in.
	p.addr("admin", a.Address, addrRules{emptyHost: true, portZero: true})
	if a.Address == c.Listen && !strings.HasSuffix(c.Listen, ":0") { // two port 0s get two ports
		p.add("admin", "same address as listen %q", c.Listen)
	}
	for i, h := range a.Hosts {
		// The Host header grammar, so that every name listed can match.
		name, port, err := codec.NormalizeHost(nil, []byte(h))
		switch {
		case err != nil || len(name) == 0:
			p.add(fmt.Sprintf("admin.hosts[%d]", i), "%q is not a host name or IP address (IPv6 goes in brackets)", h)
		case strings.Contains(h, "*"):
			p.add(fmt.Sprintf("admin.hosts[%d]", i), "%q: wildcards are not supported; list each name", h)
		case port >= 0:
			p.add(fmt.Sprintf("admin.hosts[%d]", i), "%q has a port; list the name alone (any port matches)", h)
		}
	}
}
