// Diff: what changed from one config to the next, for the line a reload
// logs, and which changes only a restart can make.

package config

import (
	"crypto/sha256"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/loopgate/loopgate/filters"
)

// Diff is what changed from one config to the next.
type Diff struct {
	Routes    Changes // by route id
	Upstreams Changes // by upstream name
	// Filters are added to or removed from the global filters list, or
	// changed in what they share across routes: their order or their
	// top-level config (auth and auth.external, the global ip_allow and
	// ip_deny lists). A change to one route's own filter options is a
	// change of that route.
	Filters Changes
	// Settings are the other sections that changed: limits, timeouts,
	// allow_underscore_headers, trusted_proxies, metrics, websocket. They
	// apply live (websocket to tunnels opened afterwards).
	Settings []string
	// Fixed are the settings that cannot change while the gateway runs
	// (listen, loops, pin, pid, admin, access_log, error_log, health_checks), each with
	// its old and new value. A
	// reload that changes one is refused. A section names the field that
	// changed, as written in YAML: "access_log.path \"\" -> /var/log/gw.log".
	Fixed []string
	// Emptied is set when next has no routes, or no upstreams, where old
	// had some: "every route (api, other)", "every upstream (backend)".
	// That is what a file cut short before routes: reads as, so a reload
	// refuses it unless told to allow it.
	Emptied []string
}

// Changes lists names added, removed and changed, in config order.
type Changes struct {
	Added, Removed, Changed []string
}

func (c *Changes) empty() bool { return len(c.Added)+len(c.Removed)+len(c.Changed) == 0 }

// Compare returns what changed from old to next. Both must be valid, as
// Parse returns them.
func Compare(old, next *Config) Diff {
	var d Diff
	// A route WithRoutes kept is one parse's route in both (SameRoute):
	// equal without the deep comparison, which at 30,000 routes took
	// most of a reload.
	d.Routes = compareByName(old.Routes, next.Routes, routeID,
		func(a, b **Route) bool { return (*a).SameRoute(*b) }, func(a, b **Route) bool { return routesDiffer(*a, *b) })
	d.Upstreams = compareByName(old.Upstreams, next.Upstreams, func(u *Upstream) string { return u.Name }, nil, nil)
	d.Filters = compareFilters(old, next)
	for _, s := range []struct {
		name      string
		old, next any
	}{
		{"limits", old.Limits, next.Limits},
		{"timeouts", old.Timeouts, next.Timeouts},
		{"allow_underscore_headers", old.AllowUnderscoreHeaders, next.AllowUnderscoreHeaders},
		{"trusted_proxies", old.TrustedProxies, next.TrustedProxies},
		{"metrics", old.Metrics, next.Metrics},
		{"websocket", old.WebSocket, next.WebSocket},
		{"alerts", old.Alerts, next.Alerts},
	} {
		if !reflect.DeepEqual(s.old, s.next) {
			d.Settings = append(d.Settings, s.name)
		}
	}
	d.Fixed = FixedChanges(old, next)
	if len(old.Routes) > 0 && len(next.Routes) == 0 {
		d.Emptied = append(d.Emptied, "every route ("+strings.Join(names(old.Routes, routeID), ", ")+")")
	}
	if len(old.Upstreams) > 0 && len(next.Upstreams) == 0 {
		d.Emptied = append(d.Emptied, "every upstream ("+strings.Join(names(old.Upstreams, func(u *Upstream) string { return u.Name }), ", ")+")")
	}
	return d
}

// FixedChanges is Compare's Fixed alone: the settings that cannot change
// while the gateway runs, without comparing every route (which costs a
// second at 30,000 routes).
func FixedChanges(old, next *Config) []string {
	var out []string
	fixed := func(name string, o, n any) {
		out = appendFixed(out, name, reflect.ValueOf(o), reflect.ValueOf(n))
	}
	fixed("listen", old.Listen, next.Listen)
	out = append(out, fixedListeners(old, next)...)
	fixed("loops", old.EventLoops(), next.EventLoops())
	fixed("pin", old.Pin, next.Pin)
	fixed("pid", old.Pid, next.Pid) // written at start
	fixed("admin", old.Admin.Address, next.Admin.Address)
	fixed("admin.hosts", fmt.Sprint(old.Admin.Hosts), fmt.Sprint(next.Admin.Hosts))
	fixed("admin.pprof", old.Admin.Pprof, next.Admin.Pprof)
	fixed("admin.tokens", tokenSummary(old.Admin.Tokens), tokenSummary(next.Admin.Tokens))
	fixed("admin.open_reads", fmt.Sprint(old.Admin.OpenReads), fmt.Sprint(next.Admin.OpenReads))
	fixed("admin.state", old.Admin.State, next.Admin.State)
	fixed("admin.cluster", old.Admin.Cluster, next.Admin.Cluster)
	fixed("admin.cluster_poll", old.Admin.ClusterPoll, next.Admin.ClusterPoll)
	fixed("access_log", old.AccessLog, next.AccessLog)          // its rings and file are made at start
	fixed("error_log", old.ErrorLog, next.ErrorLog)             // its file is opened at start
	fixed("health_checks", old.HealthChecks, next.HealthChecks) // the prober's bounds, set at start
	fixed("tls", old.TLS, next.TLS)                             // the handshake runner's bounds, set at start: named field by field
	return out
}

// tokenSummary names the tokens and their roles, and says whether a
// secret is set, never what it is: the line a refused reload logs must not
// carry one.
func tokenSummary(tokens []AdminToken) string {
	parts := make([]string, len(tokens))
	for i, t := range tokens {
		sum := sha256.Sum256([]byte(t.Secret()))
		// A changed secret shows as a changed fingerprint, 4 bytes of its
		// hash: enough to see that it changed, too little to guess it.
		parts[i] = fmt.Sprintf("%s(%s,%x)", t.Name, t.Role, sum[:4])
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// appendFixed appends "name old -> new" when o and n differ, with the
// values as YAML spells them. A section (a struct) is compared field by
// field, each named by its path: "access_log.ring_size 4096 -> 8192",
// never as Go prints a struct.
func appendFixed(out []string, name string, o, n reflect.Value) []string {
	if o.Kind() == reflect.Struct {
		for i := range o.NumField() {
			key, _, _ := strings.Cut(o.Type().Field(i).Tag.Get("yaml"), ",")
			if key != "" && key != "-" {
				out = appendFixed(out, name+"."+key, o.Field(i), n.Field(i))
			}
		}
		return out
	}
	if o.Kind() == reflect.Pointer {
		// An optional setting: unset (its default) or a value, compared by
		// value, not by address.
		if !o.IsNil() && !n.IsNil() {
			return appendFixed(out, name, o.Elem(), n.Elem())
		}
		if o.IsNil() && n.IsNil() {
			return out
		}
	} else if o.Equal(n) {
		return out
	}
	return append(out, name+" "+yamlScalar(o)+" -> "+yamlScalar(n))
}

// yamlScalar shows a setting's value as an operator writes it: a string
// bare, an empty one as "".
func yamlScalar(v reflect.Value) string {
	switch {
	case v.Kind() == reflect.String && v.String() == "":
		return `""`
	case v.Kind() == reflect.Pointer && v.IsNil():
		return "(default)"
	case v.Kind() == reflect.Pointer:
		v = v.Elem()
	}
	return fmt.Sprint(v.Interface())
}

// names lists the items' names in config order.
func names[T any](items []T, name func(*T) string) []string {
	out := make([]string, len(items))
	for i := range items {
		out[i] = name(&items[i])
	}
	return out
}

// EventLoops is the number of event loops c runs: loops, where 0 means
// one per CPU (so 0 and the CPU count are the same setting).
func (c *Config) EventLoops() int {
	if c.Loops <= 0 {
		return runtime.NumCPU()
	}
	return c.Loops
}

// routeID names a route for compareByName and names.
func routeID(r **Route) string { return (*r).ID }

// routesDiffer reports that two routes differ in what most edits change,
// without reflect.DeepEqual, which took most of comparing 30,000 changed
// routes (their filter configs are maps it walks by reflection). false
// leaves the question to it.
func routesDiffer(a, b *Route) bool {
	return a.Path != b.Path || a.Prefix != b.Prefix || a.Host != b.Host || a.Upstream != b.Upstream ||
		a.TLS != b.TLS || a.EscapedSlashes != b.EscapedSlashes || !slices.Equal(a.Methods, b.Methods)
}

// compareByName matches old and next items by name: a name only in next
// was added, only in old removed, in both with different settings changed.
// same, when not nil, vouches for two items being equal without comparing
// them field by field; differ, when not nil, for two being different.
func compareByName[T any](old, next []T, name func(*T) string, same, differ func(a, b *T) bool) Changes {
	var c Changes
	changed := func(o, n *T) bool {
		switch {
		case same != nil && same(o, n):
			return false
		case differ != nil && differ(o, n):
			return true
		}
		return !reflect.DeepEqual(*o, *n)
	}
	// The head and tail that keep their places are compared place by
	// place: the maps of every name are made only for the stretch between
	// them (at 30,000 routes they cost a reload 15 ms and 5 MB).
	head := 0
	for head < len(old) && head < len(next) && name(&old[head]) == name(&next[head]) {
		head++
	}
	tail := 0
	for tail < len(old)-head && tail < len(next)-head && name(&old[len(old)-1-tail]) == name(&next[len(next)-1-tail]) {
		tail++
	}
	for i := 0; i < head; i++ {
		if changed(&old[i], &next[i]) {
			c.Changed = append(c.Changed, name(&next[i]))
		}
	}
	midOld, midNext := old[head:len(old)-tail], next[head:len(next)-tail]
	before := make(map[string]*T, len(midOld))
	for i := range midOld {
		before[name(&midOld[i])] = &midOld[i]
	}
	after := make(map[string]bool, len(midNext))
	for i := range midNext {
		n := name(&midNext[i])
		after[n] = true
		switch o, ok := before[n]; {
		case !ok:
			c.Added = append(c.Added, n)
		case changed(o, &midNext[i]):
			c.Changed = append(c.Changed, n)
		}
	}
	for i := len(old) - tail; i < len(old); i++ {
		if changed(&old[i], &next[i-len(old)+len(next)]) {
			c.Changed = append(c.Changed, name(&next[i-len(old)+len(next)]))
		}
	}
	for i := range midOld {
		if n := name(&midOld[i]); !after[n] {
			c.Removed = append(c.Removed, n)
		}
	}
	return c
}

// compareFilters finds the filters added to or removed from the global
// list, and those whose shared settings changed.
func compareFilters(old, next *Config) Changes {
	var c Changes
	in := func(list []string, name string) bool {
		for _, n := range list {
			if n == name {
				return true
			}
		}
		return false
	}
	for _, n := range next.Filters {
		if !in(old.Filters, n) {
			c.Added = append(c.Added, n)
		}
	}
	for _, n := range old.Filters {
		if !in(next.Filters, n) {
			c.Removed = append(c.Removed, n)
		}
	}
	for _, f := range filters.Registered() {
		name := f.Name
		if in(c.Added, name) || in(c.Removed, name) {
			continue
		}
		o, _ := old.FilterOrder(name)
		n, _ := next.FilterOrder(name)
		// Each filter's top-level config is its shared settings (auth's
		// keys, ip_access's lists, forwarded's trusted proxies).
		if o != n || !reflect.DeepEqual(old.FilterGlobal(name), next.FilterGlobal(name)) {
			c.Changed = append(c.Changed, name)
		}
	}
	return c
}

// Empty reports whether nothing changed.
func (d *Diff) Empty() bool {
	return d.Routes.empty() && d.Upstreams.empty() && d.Filters.empty() && len(d.Settings) == 0 && len(d.Fixed) == 0
}

// String is the diff on one line, for the reload log, e.g.
//
//	routes added [b], removed [a]; upstreams added [u2]; filters changed [ip_access]; limits changed
//
// or "no changes". Fixed settings are not in it: a reload that changes one
// is refused, and its error names them.
func (d *Diff) String() string {
	var parts []string
	for _, c := range []struct {
		what string
		c    *Changes
	}{{"routes", &d.Routes}, {"upstreams", &d.Upstreams}, {"filters", &d.Filters}} {
		if s := c.c.String(); s != "" {
			parts = append(parts, c.what+" "+s)
		}
	}
	if len(d.Settings) > 0 {
		parts = append(parts, strings.Join(d.Settings, ", ")+" changed")
	}
	if len(parts) == 0 {
		return "no changes"
	}
	return strings.Join(parts, "; ")
}

// MaxListedChanges is the most names a diff's line lists for each of
// added, removed and changed. A reload of a rewritten file changes every
// route, and its answer and log line would otherwise name all 30,000 (about
// 400 KB of one log line); past the bound the list says how many it left
// out, and the version's changes (GET /config/versions/N) have them all.
const MaxListedChanges = 20

// String is "added [a, b], removed [c], changed [d]", leaving out the
// empty lists; "" when nothing changed. A list of more than
// MaxListedChanges names is "changed 30000 [r0, r1, (18 more names), r19,
// and 29980 more]":
// the count, the first MaxListedChanges names in their order, and the rest
// counted.
func (c *Changes) String() string {
	var b strings.Builder
	for _, l := range []struct {
		what  string
		names []string
	}{{"added", c.Added}, {"removed", c.Removed}, {"changed", c.Changed}} {
		if len(l.names) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		b.WriteString(l.what)
		shown := l.names
		if len(shown) > MaxListedChanges {
			shown = shown[:MaxListedChanges]
			b.WriteString(" " + strconv.Itoa(len(l.names)))
		}
		b.WriteString(" [" + strings.Join(shown, ", "))
		if more := len(l.names) - len(shown); more > 0 {
			b.WriteString(", and " + strconv.Itoa(more) + " more")
		}
		b.WriteString("]")
	}
	return b.String()
}
