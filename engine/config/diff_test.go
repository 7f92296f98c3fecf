// Tests for Compare: what a reload reports as changed, and which changes
// need a restart.

package config

import (
	"fmt"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	const base = `
listen: 127.0.0.1:8080
upstreams:
  - {name: a, nodes: ["127.0.0.1:1"]}
  - {name: b, nodes: ["127.0.0.1:2"]}
routes:
  - {id: one, prefix: /one/, upstream: a}
  - {id: two, prefix: /two/, upstream: b}
  - {id: three, prefix: /three/, upstream: b}
`
	old := mustParse(t, base)
	next := mustParse(t, `
listen: 127.0.0.1:8080
ip_deny: ["10.0.0.0/8"]
filter_orders: {forwarded: 850}
filters: [request_id, forwarded]
timeouts: {idle: 5s}
upstreams:
  - {name: b, nodes: ["127.0.0.1:2", "127.0.0.1:3"]}
  - {name: c, nodes: ["127.0.0.1:4"]}
routes:
  - {id: two, prefix: /two/, upstream: b}
  - {id: three, prefix: /three/, upstream: c}
  - {id: four, prefix: /four/, upstream: c}
`)
	d := Compare(old, next)
	want := Diff{
		Routes:    Changes{Added: []string{"four"}, Removed: []string{"one"}, Changed: []string{"three"}},
		Upstreams: Changes{Added: []string{"c"}, Removed: []string{"a"}, Changed: []string{"b"}},
		Filters:   Changes{Removed: []string{"ip_access"}, Changed: []string{"forwarded"}},
		Settings:  []string{"timeouts"},
	}
	if !reflect.DeepEqual(d, want) {
		t.Fatalf("Compare:\n got %+v\nwant %+v", d, want)
	}
	const line = "routes added [four], removed [one], changed [three]; upstreams added [c], removed [a], changed [b]; " +
		"filters removed [ip_access], changed [forwarded]; timeouts changed"
	if d.String() != line {
		t.Fatalf("String:\n got %q\nwant %q", d.String(), line)
	}
	if same := Compare(old, mustParse(t, base)); !same.Empty() || same.String() != "no changes" {
		t.Fatalf("an identical config: %+v %q", same, same.String())
	}

	// Shared filter settings: auth and the global ip lists.
	auth := Compare(old, mustParse(t, "auth: {jwt: {hs256_secret: 0123456789abcdef0123456789abcdef}}\n"+base))
	if !reflect.DeepEqual(auth.Filters, Changes{Changed: []string{"auth"}}) {
		t.Fatalf("auth keys: %+v", auth.Filters)
	}
	allow := Compare(old, mustParse(t, "ip_allow: [\"127.0.0.1\"]\n"+base))
	if !reflect.DeepEqual(allow.Filters, Changes{Changed: []string{"ip_access"}}) {
		t.Fatalf("ip_allow: %+v", allow.Filters)
	}
	// trusted_proxies is read by the engine, not by a filter's config.
	if tp := Compare(old, mustParse(t, "trusted_proxies: [10.0.0.0/8]\n"+base)); !reflect.DeepEqual(tp.Settings, []string{"trusted_proxies"}) {
		t.Fatalf("trusted_proxies: %+v", tp)
	}
}

// Only a restart changes listen, loops, pin and admin; loops 0 means one
// per CPU, so it equals the CPU count.
func TestCompareFixed(t *testing.T) {
	old := mustParse(t, "listen: 127.0.0.1:8080\nloops: 0\n")
	same := mustParse(t, fmt.Sprintf("listen: 127.0.0.1:8080\nloops: %d\n", runtime.NumCPU()))
	if d := Compare(old, same); len(d.Fixed) != 0 {
		t.Fatalf("loops 0 and the CPU count differ: %v", d.Fixed)
	}
	next := mustParse(t, fmt.Sprintf("listen: 127.0.0.1:9090\nloops: %d\npin: true\nadmin: \"off\"\nerror_log: {level: warn}\n", runtime.NumCPU()+1))
	want := []string{
		"listen 127.0.0.1:8080 -> 127.0.0.1:9090",
		fmt.Sprintf("loops %d -> %d", runtime.NumCPU(), runtime.NumCPU()+1),
		"pin false -> true",
		"admin 127.0.0.1:9901 -> off",
		"error_log.level info -> warn",
	}
	if d := Compare(old, next); !reflect.DeepEqual(d.Fixed, want) || d.Empty() {
		t.Fatalf("fixed: %q, want %q", d.Fixed, want)
	}
}

// A section that cannot change live is reported field by field, with the
// values as YAML spells them, not as Go prints a struct ({/path 4096}).
func TestCompareFixedSectionsAsWritten(t *testing.T) {
	dir := t.TempDir()
	old := mustParse(t, "access_log: {path: "+dir+"/a.log}\n")
	next := mustParse(t, "access_log: {path: "+dir+"/b.log, ring_size: 8192}\nhealth_checks: {max_in_flight: 5}\n")
	want := []string{
		"access_log.path " + dir + "/a.log -> " + dir + "/b.log",
		"access_log.ring_size 4096 -> 8192",
		"health_checks.max_in_flight 20 -> 5",
	}
	if d := Compare(old, next); !reflect.DeepEqual(d.Fixed, want) {
		t.Fatalf("fixed: %q, want %q", d.Fixed, want)
	}
	on := Compare(mustParse(t, "loops: 1\n"), mustParse(t, "loops: 1\naccess_log: {path: stdout}\n"))
	if want := []string{`access_log.path "" -> stdout`}; !reflect.DeepEqual(on.Fixed, want) {
		t.Fatalf("turning the access log on: %q, want %q", on.Fixed, want)
	}
}

// A config with no routes, or no upstreams, where the running one had
// some is what a file cut short reads as; Compare names what it empties.
func TestCompareEmptied(t *testing.T) {
	old := mustParse(t, `
upstreams:
  - {name: a, nodes: ["127.0.0.1:1"]}
routes:
  - {id: api, prefix: /api/, upstream: a}
  - {id: other, prefix: /, upstream: a}
`)
	cut := mustParse(t, "upstreams:\n  - {name: a, nodes: [\"127.0.0.1:1\"]}\n")
	if d := Compare(old, cut); !reflect.DeepEqual(d.Emptied, []string{"every route (api, other)"}) {
		t.Fatalf("routes cut off: %q", d.Emptied)
	}
	none := mustParse(t, "listen: 127.0.0.1:8080\n")
	if d := Compare(old, none); !reflect.DeepEqual(d.Emptied, []string{"every route (api, other)", "every upstream (a)"}) {
		t.Fatalf("everything cut off: %q", d.Emptied)
	}
	if d := Compare(none, none); d.Emptied != nil {
		t.Fatalf("no routes before either: %q", d.Emptied)
	}
	if d := Compare(old, mustParse(t, "upstreams:\n  - {name: a, nodes: [\"127.0.0.1:1\"]}\nroutes:\n  - {id: api, prefix: /api/, upstream: a}\n")); d.Emptied != nil {
		t.Fatalf("one route left: %q", d.Emptied)
	}
}

// A reload that changes every route names a bounded number of them: the
// count, the first MaxListedChanges in order, and how many it left out.
func TestChangesStringBounded(t *testing.T) {
	ids := make([]string, 30000)
	for i := range ids {
		ids[i] = "r" + strconv.Itoa(i)
	}
	c := Changes{Added: ids[:MaxListedChanges], Changed: ids}
	got := c.String()
	want := "added [" + strings.Join(ids[:MaxListedChanges], ", ") + "], changed 30000 [" +
		strings.Join(ids[:MaxListedChanges], ", ") + ", and 29980 more]"
	if got != want {
		t.Fatalf("String:\n got %q\nwant %q", got, want)
	}
	if one := (&Changes{Removed: ids[:MaxListedChanges+1]}).String(); !strings.HasPrefix(one, "removed 21 [r0, r1,") ||
		!strings.HasSuffix(one, ", r19, and 1 more]") {
		t.Fatalf("one past the bound: %q", one)
	}
}
