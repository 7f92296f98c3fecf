// The admin section: its two YAML forms and its checks.

package config

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
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

	// Tokens are the bearer tokens the admin port accepts. With none, the
	// port is unauthenticated, which is allowed only while it listens on
	// loopback. With any, every request needs one, but for OpenReads.
	// Default none.
	Tokens []AdminToken `yaml:"tokens,omitempty"`

	// OpenReads are the read endpoints served without a token when Tokens
	// are set: any of /healthz, /readyz and /metrics, for probes and
	// scrapers that carry none. Default none.
	OpenReads []string `yaml:"open_reads,omitempty"`

	// State is the file the API's changes and the version history are
	// kept in, so they survive a restart. Default "" = none: API writes
	// are refused (503), and versions live in memory only.
	State string `yaml:"state,omitempty"`

	// Cluster, "redis", keeps the API's changes and the versions in the
	// Redis of the top-level redis section instead of State, shared by
	// every node. Default "" = this node alone.
	Cluster string `yaml:"cluster,omitempty"`

	// ClusterPoll is how often a node in cluster mode checks Redis for a
	// version it missed the announcement of. Default 1s.
	ClusterPoll Duration `yaml:"cluster_poll,omitempty"`
}

// Admin token roles.
const (
	RoleRead  = "read"  // GET and HEAD
	RoleWrite = "write" // everything
)

// AdminClusterRedis is the one Admin.Cluster mode.
const AdminClusterRedis = "redis"

// AdminOpenReads are the endpoints Admin.OpenReads may name.
var AdminOpenReads = []string{"/healthz", "/readyz", "/metrics"}

// AdminToken is one named bearer token of the admin port.
type AdminToken struct {
	Name string `yaml:"name"` // required, unique; what the audit lines name
	Role string `yaml:"role"` // "read" or "write"; default "read"
	// Token is the secret itself, at least 16 characters; or TokenEnv
	// names the environment variable holding it, read at start and on
	// every reload. Exactly one of the two is set.
	Token    string `yaml:"token,omitempty"`
	TokenEnv string `yaml:"token_env,omitempty"`
}

// Secret is the token's value: Token, or the environment variable
// TokenEnv names.
func (t *AdminToken) Secret() string {
	if t.TokenEnv != "" {
		return os.Getenv(t.TokenEnv)
	}
	return t.Token
}

// minTokenLen keeps a guessable token out: 16 characters of a random
// base64 or hex string are 64 bits at the least.
const minTokenLen = 16

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
	if len(a.Hosts) == 0 && !a.Pprof && len(a.Tokens) == 0 && len(a.OpenReads) == 0 && a.State == "" && a.Cluster == "" && a.ClusterPoll == 0 {
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
	// A port without tokens beyond loopback is refused here too, so that
	// -check says so; a host name is judged once bound (admin.Listen).
	if host, _, err := net.SplitHostPort(a.Address); err == nil && len(a.Tokens) == 0 {
		ip, perr := netip.ParseAddr(strings.Trim(host, "[]"))
		if host == "" || perr == nil && !ip.IsLoopback() {
			p.add("admin", "%s is not loopback, and admin.tokens is empty: anyone who can reach it could change the config; "+
				"add a token to admin.tokens (role write for changes), or bind the admin port to 127.0.0.1", a.Address)
		}
	}
	names := map[string]bool{}
	for i, t := range a.Tokens {
		path := fmt.Sprintf("admin.tokens[%d]", i)
		switch {
		case t.Name == "":
			p.add(path+".name", "required")
		case names[t.Name]:
			p.add(path+".name", "%q is used twice", t.Name)
		}
		names[t.Name] = true
		if t.Role != RoleRead && t.Role != RoleWrite {
			p.add(path+".role", "%q: want read or write", t.Role)
		}
		switch secret := t.Secret(); {
		case t.Token != "" && t.TokenEnv != "":
			p.add(path, "set token or token_env, not both")
		case t.TokenEnv != "" && secret == "":
			p.add(path+".token_env", "the environment variable %s is unset or empty", t.TokenEnv)
		case t.TokenEnv == "" && secret == "":
			p.add(path, "token or token_env is required")
		case len(secret) < minTokenLen:
			p.add(path, "the token has %d characters; want at least %d (openssl rand -hex 16 makes one)", len(secret), minTokenLen)
		}
	}
	for i, r := range a.OpenReads {
		if !slices.Contains(AdminOpenReads, r) {
			p.add(fmt.Sprintf("admin.open_reads[%d]", i), "%q: want one of %s", r, strings.Join(AdminOpenReads, ", "))
		}
	}
	if a.Cluster != "" && a.Cluster != AdminClusterRedis {
		p.add("admin.cluster", "%q: want redis, or leave it out", a.Cluster)
	}
	// Problems with the address are reported as "admin", the shorthand's
	// path, whichever form it was written in.
	p.addr("admin", a.Address, addrRules{emptyHost: true, portZero: true})
	for _, l := range c.ClientListeners() {
		if a.Address == l.Address && !strings.HasSuffix(l.Address, ":0") { // two port 0s get two ports
			if len(c.Listeners) == 0 {
				p.add("admin", "same address as listen %q", l.Address)
			} else {
				p.add("admin", "same address as the client listener %q", l.Address)
			}
		}
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
