// The annotated example in docs/configuration.md: it parses, it is set to
// the defaults it claims, and it shows every option there is.

package config

import (
	"cmp"
	"math"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/loopgate/loopgate/engine/policy"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/filters/ratelimit/limiter"
)

// docsExample returns the ```yaml block under "## Annotated example" in
// docs/configuration.md.
func docsExample(t *testing.T) string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, found := strings.Cut(string(doc), "\n## Annotated example\n")
	_, rest, found2 := strings.Cut(rest, "```yaml\n")
	example, _, found3 := strings.Cut(rest, "\n```\n")
	if !found || !found2 || !found3 {
		t.Fatal("no yaml block under '## Annotated example' in docs/configuration.md")
	}
	return example + "\n"
}

// TestDocsExampleParses keeps the annotated example valid and in step with
// the defaults it claims. The sections whose default is absence
// (circuit_breaker, an upstream's health_check, redis and its tls) are
// present only to show their options; each must then hold what an empty
// section gets.
func TestDocsExampleParses(t *testing.T) {
	c := mustParse(t, docsExample(t))
	d := Default()
	if c.Listen != d.Listen || c.Admin.Address != d.Admin.Address || c.Admin.Pprof != d.Admin.Pprof || len(c.Admin.Hosts) != 0 ||
		c.Loops != d.Loops || c.Pin != d.Pin || c.AllowUnderscoreHeaders != d.AllowUnderscoreHeaders {
		t.Errorf("the example's top-level values differ from Default():\n%+v\n%+v", c, d)
	}
	if l := c.Limits; l.RequestBuffer() != d.Limits.RequestBuffer() || func() bool { l.RequestBufferBytes = nil; return l != d.Limits }() {
		t.Errorf("the example's limits differ from the defaults:\n%+v\n%+v", c.Limits, d.Limits)
	}
	if c.Timeouts != d.Timeouts || c.AccessLog != d.AccessLog || c.ErrorLog != d.ErrorLog || !c.Metrics.RecordsRequests() || c.HealthChecks != d.HealthChecks {
		t.Errorf("the example's timeouts, logs, metrics or health_checks differ from the defaults:\n%+v\n%+v", c, d)
	}

	users := c.Upstreams[0]
	users.Nodes, users.Name = nil, ""
	if !users.Outlier.On() {
		t.Error("the example's outlier ejection is off")
	}
	users.Outlier.Enabled = nil
	hc := &HealthCheck{}
	applyHealthCheckDefaults(hc)
	if users.HealthCheck == nil || !reflect.DeepEqual(*users.HealthCheck, *hc) {
		t.Errorf("the example's health_check differs from an empty one's defaults:\n%+v\n%+v", users.HealthCheck, hc)
	}
	users.HealthCheck = nil
	want := Upstream{Balancer: WeightedRoundRobin, ConnectTimeout: defaultConnectTimeout, ResponseTimeout: defaultResponseTimeout,
		PoolAcquireTimeout: defaultPoolAcquireTimeout, MaxIdle: defaultMaxConns, MaxConns: defaultMaxConns, IdleTimeout: defaultIdleTimeout,
		RetryBudget: RetryBudget{Percent: policy.DefaultBudgetPercent, MinRetries: policy.DefaultBudgetMin}, Outlier: defaultOutlier,
		SlowStart: &defaultSlowStart}
	if !reflect.DeepEqual(users, want) {
		t.Errorf("the example's upstream values differ from the defaults:\n%+v\n%+v", users, want)
	}

	// Every route's effective retry, breaker and isolation: the defaults
	// (the breaker's those of an empty section, the example's top-level
	// one being there to show its options).
	wantBreaker := policy.RouteBreaker(&CircuitBreaker{}, nil)
	wantIsolation := policy.RouteIsolation(nil, nil)
	for i := range c.Routes {
		r := c.Routes[i]
		if r.Retry.Attempts != defaultRetry.Attempts || !slices.Equal(r.Retry.Methods, defaultRetry.Methods) || len(r.Retry.OnStatus) > 0 || r.Retry.PerTryTimeout != 0 {
			t.Errorf("route %s: the example's retry %+v differs from the defaults %+v", r.ID, r.Retry, defaultRetry)
		}
		b, s := *r.CircuitBreaker, *r.Isolation
		if !b.On() || !s.On() {
			t.Errorf("route %s: the example's breaker or isolation is off", r.ID)
		}
		b.Enabled, s.Enabled = nil, nil
		if !reflect.DeepEqual(b, *wantBreaker) || !reflect.DeepEqual(s, *wantIsolation) {
			t.Errorf("route %s: the example's breaker or isolation differs from the defaults:\n%+v %+v\n%+v %+v", r.ID, b, s, *wantBreaker, *wantIsolation)
		}
		for j, l := range routeConfig[*limiter.Route](r, limiter.Name).RateLimits {
			if l.Burst != max(1, int64(math.Ceil(l.Rate))) || l.OnRedisFailure != "" && l.OnRedisFailure != "shadow" ||
				l.LeaseWindow != nil && *l.LeaseWindow != Duration(100*time.Millisecond) ||
				l.MaxKeys != 0 && l.MaxKeys != documentedRateLimit().RateLimit.MaxKeys {
				t.Errorf("route %s: the example's rate_limits[%d] %+v is not at its defaults", r.ID, j, l)
			}
		}
	}

	ips := ipListsOf(c)
	if !reflect.DeepEqual(c.Filters, d.Filters) || len(c.FilterOrders)+len(c.TrustedProxies)+len(ips.Allow)+len(ips.Deny) > 0 {
		t.Errorf("the example's filter options differ from the defaults: filters %v, filter_orders %v, trusted_proxies %v, ip_allow %v, ip_deny %v",
			c.Filters, c.FilterOrders, c.TrustedProxies, ips.Allow, ips.Deny)
	}
	// The example sets these three, which have no default.
	a := *authOf(c)
	if a.JWT.HS256Secret == "" || len(a.APIKeys) == 0 || a.External.Upstream == "" {
		t.Errorf("the example no longer shows a secret, an API key and an external upstream: %+v", a)
	}
	a.JWT.HS256Secret, a.APIKeys, a.External.Upstream = "", nil, ""
	if !reflect.DeepEqual(a, *authOf(d)) {
		t.Errorf("the example's auth values differ from the defaults:\n%+v\n%+v", a, *authOf(d))
	}

	rl := *c.FilterGlobal(limiter.Name).(*limiter.Global)
	if rl.Redis == nil || len(rl.Redis.Addrs) == 0 || rl.Redis.TLS == nil {
		t.Fatalf("the example no longer shows redis, its addrs and its tls: %+v", rl.Redis)
	}
	emptyRedis := &limiter.Global{Redis: &limiter.Redis{Addrs: rl.Redis.Addrs, TLS: &limiter.TLS{}}}
	emptyRedis.Provision()
	if !reflect.DeepEqual(*rl.Redis, *emptyRedis.Redis) {
		t.Errorf("the example's redis differs from the defaults:\n%+v\n%+v", *rl.Redis, *emptyRedis.Redis)
	}
	if doc := documentedRateLimit(); rl.RateLimit != doc.RateLimit || rl.Cluster != doc.Cluster {
		t.Errorf("the example's rate_limit or cluster differs from the defaults:\n%+v %+v\n%+v %+v", rl.RateLimit, rl.Cluster, doc.RateLimit, doc.Cluster)
	}
}

// TestDocsExampleShowsEveryOption holds the example to its claim that every
// option is shown: every yaml key of Config, of the types it holds (nested
// structs, slices' and pointers' elements) and of each registered filter's
// top-level and route configs must appear as a key in the example, under
// its parent section. A section type used in several places (the global
// and a route's circuit_breaker or isolation, request_headers and
// response_headers) shows its keys in one of them; the document's and a
// route's own keys, the filters' included, are checked where they are
// written. A new option therefore fails this test until it is documented.
func TestDocsExampleShowsEveryOption(t *testing.T) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(docsExample(t)), &doc); err != nil {
		t.Fatal(err)
	}
	shown := map[string]bool{}
	examplePaths(doc.Content[0], "", shown)

	o := &options{sites: map[string][]string{}, keys: map[string][]string{}}
	o.walk(t, configType, "", true)
	if len(filters.Registered()) == 0 {
		t.Fatal("no filters registered: their options would go unchecked")
	}
	for _, reg := range filters.Registered() {
		if reg.Global != nil {
			o.walk(t, reflect.TypeOf(reg.Global()), "", true)
		}
		if reg.Route != nil {
			o.walk(t, reflect.TypeOf(reg.Route()), "routes[]", true)
		}
	}

	// The walk must reach deep into the gateway's and the filters' types,
	// or an empty walk would pass.
	reached := map[string]bool{}
	for id, sites := range o.sites {
		for _, key := range o.keys[id] {
			for _, s := range sites {
				reached[join(s, key)] = true
			}
		}
	}
	for _, p := range []string{"upstreams[].health_check.panic_threshold", "upstreams[].nodes[].weight", "routes[].isolation.queue",
		"redis.tls.ca_file", "cluster.ramp_step", "routes[].rate_limits[].lease_window", "auth.external.fail_open", "routes[].gray.cookie"} {
		if !reached[p] {
			t.Errorf("the walk of the config types never reached %s", p)
		}
	}

	ids := make([]string, 0, len(o.sites))
	for id := range o.sites {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		sites := o.sites[id]
		for _, key := range o.keys[id] {
			if !slices.ContainsFunc(sites, func(s string) bool { return shown[join(s, key)] }) {
				at := make([]string, len(sites))
				for i, s := range sites {
					at[i] = join(s, key)
				}
				t.Errorf("docs/configuration.md's annotated example does not show %s (%s); add it, set to its default, with a comment", strings.Join(at, " or "), id)
			}
		}
	}
}

// options is what the walk of the config types found: for each section
// type, the paths it appears at and its keys.
type options struct {
	sites map[string][]string // section id -> paths
	keys  map[string][]string // section id -> its keys
}

// walk records the keys of struct type t (through pointers and slices),
// appearing at path, and walks the types of its fields. A root (the
// document, a route, a filter's config of either) is identified by its
// path too, so its keys are checked where each is written; a nested
// section type by its type alone.
func (o *options) walk(t *testing.T, typ reflect.Type, path string, root bool) {
	for {
		switch typ.Kind() {
		case reflect.Pointer:
			typ = typ.Elem()
			continue
		case reflect.Slice, reflect.Array:
			typ, path = typ.Elem(), path+"[]"
			continue
		}
		break
	}
	if typ.Kind() != reflect.Struct {
		return // a scalar, or a map whose keys are the user's (filter_orders, set)
	}
	id := typ.String()
	if root {
		id = cmp.Or(path, "top level") + " " + id
	}
	if slices.Contains(o.sites[id], path) {
		return
	}
	first := len(o.sites[id]) == 0
	o.sites[id] = append(o.sites[id], path)
	for _, f := range reflect.VisibleFields(typ) {
		if !f.IsExported() {
			continue
		}
		key, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case key == "-":
			continue
		case key == "" || strings.Contains(opts, "inline"):
			t.Errorf("%s.%s has no yaml key: name it, so that it can be documented", typ, f.Name)
			continue
		}
		if first {
			o.keys[id] = append(o.keys[id], key)
		}
		o.walk(t, f.Type, join(path, key), false)
	}
}

// examplePaths records in shown the path of every mapping key under n:
// "upstreams[].health_check.path" for a key of a mapping in a list.
func examplePaths(n *yaml.Node, path string, shown map[string]bool) {
	n = resolve(n)
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := join(path, n.Content[i].Value)
			shown[p] = true
			examplePaths(n.Content[i+1], p, shown)
		}
	case yaml.SequenceNode:
		for _, item := range n.Content {
			examplePaths(item, path+"[]", shown)
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
