// Validation of the rate_limit filter's keys, and the parsed forms they
// leave for the filter: key forms, failure modes, the cluster options.

package limiter

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"net"
	"os"
	"strings"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/ratelimit"
	"github.com/loopgate/loopgate/filters/ratelimit/cluster"
)

// keyKind is what a limit counts by.
type keyKind uint8

const (
	keyGlobal keyKind = iota // one bucket for every route naming it
	keyRoute                 // one bucket for the route
	keyIP                    // x.ClientIP
	keyUser                  // x.Identity.Subject
	keyTenant                // x.Identity.Tenant, else the tenant header
	keyHeader                // a request header's value
)

var keyNames = [...]string{"global", "route", "ip", "user", "tenant", "header"}

// keyForm is a parsed key: its kind and, for keyHeader, the header name.
type keyForm struct {
	kind   keyKind
	header string
}

// headerPrefix starts the key form that counts by a header's value.
const headerPrefix = "header:"

// keyForms lists the forms a key may take, for messages.
const keyForms = `global, route, ip, user, tenant or "header:<Name>"`

func parseKey(s string) (keyForm, bool) {
	if name, ok := strings.CutPrefix(s, headerPrefix); ok {
		return keyForm{kind: keyHeader, header: name}, filters.IsToken(name)
	}
	for i, n := range keyNames[:keyHeader] {
		if s == n {
			return keyForm{kind: keyKind(i)}, true
		}
	}
	return keyForm{}, false
}

// String is the key as config and status spell it; header names in lower
// case, since they match without regard to case.
func (k keyForm) String() string {
	if k.kind == keyHeader {
		return headerPrefix + strings.ToLower(k.header)
	}
	return keyNames[k.kind]
}

// keyed reports whether the limit keeps a bucket per client value (a
// table), rather than one bucket.
func (k keyForm) keyed() bool { return k.kind >= keyIP }

// maxTableKeys bounds max_keys: 16 Mi keys is 128 MiB of slots.
const maxTableKeys = 1 << 24

// maxHotKeys bounds hot_keys: the controller walks the set every tick.
const maxHotKeys = 1 << 16

// Validate checks the top-level keys and, when redis is set, builds the
// cluster options New uses (TLS files read once, here).
func (g *Global) Validate(c *filters.Check) {
	s := &g.RateLimit
	c.HeaderName("rate_limit.tenant_header", s.TenantHeader)
	tableSize(c, "rate_limit.max_keys", s.MaxKeys)
	filters.Positive(c, "rate_limit.key_idle", s.KeyIdle)

	cl := &g.Cluster
	if strings.ContainsAny(cl.NodeID, " \t\r\n") {
		c.Add("cluster.node_id", "%q contains white space", cl.NodeID)
	}
	filters.Positive(c, "cluster.fallback_nodes", cl.FallbackNodes)
	filters.Positive(c, "cluster.min_nodes", cl.MinNodes)
	filters.Positive(c, "cluster.heartbeat", cl.Heartbeat)
	filters.Positive(c, "cluster.live_max_age", cl.LiveMaxAge)
	filters.Positive(c, "cluster.failure_threshold", cl.FailureThreshold)
	filters.Positive(c, "cluster.probe_min", cl.ProbeMin)
	if cl.MemberTTL < 2*cl.Heartbeat {
		c.Add("cluster.member_ttl", "%v is under two heartbeats (%v): live nodes would be trimmed", cl.MemberTTL, cl.Heartbeat)
	}
	if cl.ProbeMax < cl.ProbeMin {
		c.Add("cluster.probe_max", "%v is below probe_min %v", cl.ProbeMax, cl.ProbeMin)
	}
	if !(cl.RampStep > 0 && cl.RampStep <= 1) {
		c.Add("cluster.ramp_step", "must be in (0, 1], got %v", cl.RampStep)
	}

	r := g.Redis
	if r == nil {
		return
	}
	if len(r.Addrs) == 0 {
		c.Add("redis.addrs", "missing: at least one host:port")
	}
	for i, a := range r.Addrs {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			c.Add(fmt.Sprintf("redis.addrs[%d]", i), "%q is not host:port", a)
		}
	}
	filters.Positive(c, "redis.workers", r.Workers)
	filters.Positive(c, "redis.queue", r.Queue)
	filters.Positive(c, "redis.call_timeout", r.CallTimeout)
	filters.Positive(c, "redis.dial_timeout", r.DialTimeout)
	if strings.ContainsAny(r.KeyPrefix, " \t\r\n") {
		c.Add("redis.key_prefix", "%q contains white space", r.KeyPrefix)
	}
	if r.TLS != nil {
		g.tls = r.TLS.read(c)
	}
	g.opt = cluster.Options{
		Addrs: r.Addrs, MasterSet: r.SentinelMaster, Username: r.Username, Password: r.Password,
		NodeID: cl.NodeID, KeyPrefix: r.KeyPrefix,
		Workers: r.Workers, Queue: r.Queue,
		CallTimeout: time.Duration(r.CallTimeout), DialTimeout: time.Duration(r.DialTimeout),
		FailureThreshold: cl.FailureThreshold,
		ProbeMin:         time.Duration(cl.ProbeMin), ProbeMax: time.Duration(cl.ProbeMax),
		Heartbeat: time.Duration(cl.Heartbeat), MemberTTL: time.Duration(cl.MemberTTL),
		LiveMaxAge: time.Duration(cl.LiveMaxAge),
		MinNodes:   cl.MinNodes, FallbackNodes: cl.FallbackNodes,
		RampStep: cl.RampStep,
	}
}

// tlsFiles is what the TLS files hold, read and checked by Validate. It
// keeps bytes rather than a *tls.Config, so two configs with the same
// files compare equal (config.Compare), and options builds the config.
type tlsFiles struct {
	serverName string
	insecure   bool
	ca         []byte // PEM; nil: the system roots
	cert, key  []byte // PEM; nil: no client certificate
}

// read reads the TLS files, reporting what cannot be read or parsed.
func (t *TLS) read(c *filters.Check) *tlsFiles {
	f := &tlsFiles{serverName: t.ServerName, insecure: t.InsecureSkipVerify}
	if t.CAFile != "" {
		pem, err := os.ReadFile(t.CAFile)
		switch {
		case err != nil:
			c.Add("redis.tls.ca_file", "%v", err)
		case !x509.NewCertPool().AppendCertsFromPEM(pem):
			c.Add("redis.tls.ca_file", "%s holds no PEM certificate", t.CAFile)
		default:
			f.ca = pem
		}
	}
	switch {
	case (t.CertFile == "") != (t.KeyFile == ""):
		c.Add("redis.tls", "cert_file and key_file go together; one is missing")
	case t.CertFile != "":
		cert, err := os.ReadFile(t.CertFile)
		if err != nil {
			c.Add("redis.tls.cert_file", "%v", err)
			break
		}
		key, err := os.ReadFile(t.KeyFile)
		if err != nil {
			c.Add("redis.tls.key_file", "%v", err)
			break
		}
		if _, err := tls.X509KeyPair(cert, key); err != nil {
			c.Add("redis.tls.cert_file", "%v", err)
			break
		}
		f.cert, f.key = cert, key
	}
	return f
}

// config is the client TLS config the files make; Validate checked them.
func (f *tlsFiles) config() *tls.Config {
	tc := &tls.Config{ServerName: f.serverName, InsecureSkipVerify: f.insecure, MinVersion: tls.VersionTLS12}
	if f.ca != nil {
		tc.RootCAs = x509.NewCertPool()
		tc.RootCAs.AppendCertsFromPEM(f.ca)
	}
	if f.cert != nil {
		if cert, err := tls.X509KeyPair(f.cert, f.key); err == nil {
			tc.Certificates = []tls.Certificate{cert}
		}
	}
	return tc
}

// RedisTLS is the client TLS config redis.tls makes, or nil without it:
// what every other Redis client of the gateway (the config sync) dials
// with, so it reaches Redis exactly as the rate limits do.
func (g *Global) RedisTLS() *tls.Config {
	if g.tls == nil {
		return nil
	}
	return g.tls.config()
}

// options are the cluster options Validate built, with TLS.
func (g *Global) options() cluster.Options {
	opt := g.opt
	opt.TLS = g.RedisTLS()
	return opt
}

func tableSize(c *filters.Check, key string, n int) {
	if n < 1 || n > maxTableKeys {
		c.Add(key, "must be in [1, %d], got %d", maxTableKeys, n)
	}
}

// Validate checks each limit and keeps its parsed form.
func (r *Route) Validate(c *filters.Check) {
	if len(r.RateLimits) > maxLimits {
		c.Add("rate_limits", "%d limits, at most %d per route", len(r.RateLimits), maxLimits)
	}
	var g *Global
	if p, ok := c.Env.Global(Name).(*Global); ok {
		g = p
	}
	seen := map[string]int{}
	for i := range r.RateLimits {
		l := &r.RateLimits[i]
		at := fmt.Sprintf("rate_limits[%d]", i)
		l.validate(c, at, g)
		id := l.Key + "/" + l.Scope
		if k, ok := parseKey(l.Key); ok {
			id = k.String() + "/" + l.Scope
		}
		if j, dup := seen[id]; dup {
			c.Add(at, "key %s with scope %s is also rate_limits[%d]; one limit per key and scope", l.Key, l.Scope, j)
		}
		seen[id] = i
	}
}

func (l *Limit) validate(c *filters.Check, at string, g *Global) {
	key, ok := parseKey(l.Key)
	switch {
	case l.Key == "":
		c.Add(at+".key", "missing (want %s)", keyForms)
	case !ok && strings.HasPrefix(l.Key, headerPrefix):
		c.Add(at+".key", "%q: %q is not a valid header name", l.Key, l.Key[len(headerPrefix):])
	case !ok:
		c.Add(at+".key", "unknown key %q (want %s)", l.Key, keyForms)
	}
	l.key = key
	rateOK := l.Rate > 0 && !math.IsInf(l.Rate, 0)
	if !rateOK {
		c.Add(at+".rate", "must be a positive number of requests a second, got %v", l.Rate)
	}
	if l.Burst < 1 {
		c.Add(at+".burst", "must be at least 1, got %d", l.Burst)
	}
	switch l.Scope {
	case ScopeLocal:
		l.scope = local
	case ScopeCluster:
		l.scope = clustered
	default:
		c.Add(at+".scope", "unknown scope %q (want %s or %s)", l.Scope, ScopeLocal, ScopeCluster)
	}
	mode, err := cluster.ParseFailureMode(l.OnRedisFailure)
	if err != nil {
		c.Add(at+".on_redis_failure", "unknown mode %q (want shadow, open or closed)", l.OnRedisFailure)
	}
	l.mode = mode

	if l.Scope == ScopeCluster {
		l.validateCluster(c, at, g)
	} else if l.LeaseWindow != nil {
		c.Add(at+".lease_window", "set, but leases are for scope: cluster")
	}
	switch {
	case l.MaxKeys == 0:
	case !key.keyed():
		c.Add(at+".max_keys", "set, but only an ip, user, tenant or header key keeps a table of keys")
	default:
		tableSize(c, at+".max_keys", l.MaxKeys)
	}
	switch {
	case l.HotKeys == 0:
	case !key.keyed() || l.Scope != ScopeCluster:
		c.Add(at+".hot_keys", "set, but only a cluster ip, user, tenant or header key keeps hot keys")
	case l.HotKeys < 1 || l.HotKeys > maxHotKeys:
		c.Add(at+".hot_keys", "must be in [1, %d], got %d", maxHotKeys, l.HotKeys)
	}
	if rateOK && l.Burst >= 1 {
		lim, err := ratelimit.NewLimit(l.Rate, l.Burst)
		if err != nil {
			c.Add(at, "%v", strings.TrimPrefix(err.Error(), "ratelimit: "))
		}
		l.limit = lim
	}
}

func (l *Limit) validateCluster(c *filters.Check, at string, g *Global) {
	if g == nil || g.Redis == nil {
		c.Add(at+".scope", "cluster needs the top-level redis section")
	}
	if l.Rate > 1e6 {
		c.Add(at+".rate", "%v is above 1000000, the most a cluster limit counts (whole microseconds a token)", l.Rate)
	}
	if l.LeaseWindow != nil && *l.LeaseWindow < 0 {
		c.Add(at+".lease_window", "must not be negative, got %v (0s turns leasing off)", *l.LeaseWindow)
	}
}

// spec is the cluster limit a validated cluster-scope Limit stands for.
func (l *Limit) spec(name string) cluster.LimitSpec {
	s := cluster.LimitSpec{Name: name, Rate: l.Rate, Burst: l.Burst, OnFailure: l.mode}
	if w := l.LeaseWindow; w != nil {
		s.LeaseWindow = time.Duration(*w)
		if *w == 0 {
			s.LeaseWindow = -1 // off
		}
	}
	return s
}
