// The docs against the code: every metric family a running gateway writes
// and every admin endpoint it serves is documented in docs/operations.md,
// and every loopgate_* name the docs mention exists. The error codes have
// their own check (TestErrorStatusLinesHaveStandardReasons).

package engine_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// repoFile reads a file by its path from the repository root.
func repoFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sourceText is every non-test Go file under the given directories, joined.
func sourceText(t *testing.T, dirs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join("..", d), func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			src, err := os.ReadFile(p)
			b.Write(src)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// metricFamily turns a documented series name into its family: the
// histogram and summary suffixes are the family's samples.
func metricFamily(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := strings.CutSuffix(name, s); ok {
			return f
		}
	}
	return name
}

// TestDocsListEveryMetric: the families of a gateway that served requests
// through filters, a breaker and isolation are all in operations.md, and
// every loopgate_* name the docs give is one the code writes.
func TestDocsListEveryMetric(t *testing.T) {
	up := startUpstream(t, &countingHandler{name: "a"})
	g := startGateway(t, `
circuit_breaker: {}
upstreams:
  - {name: backend, nodes: ["%s"]}
routes:
  - id: all
    prefix: /
    upstream: backend
    request_headers: {set: {X-Doc: "1"}}
`, up)
	for range 3 {
		if r := fetch(g.url("/x")); r.err != nil || r.resp.StatusCode != 200 {
			t.Fatalf("GET /x: %v", r.err)
		}
	}
	fetch(g.url("/x%2f")) // a 400, so the rejections are touched too
	s := scrapeMetrics(t, g.srv)

	ops := repoFile(t, "docs/operations.md")
	var missing []string
	for fam := range s.types {
		if !strings.Contains(ops, "`"+fam) {
			missing = append(missing, fam)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("metric families written but not in docs/operations.md: %v", missing)
	}

	src := sourceText(t, "engine", "filters", "upstream", "cmd")
	docs := ops + repoFile(t, "docs/rate-limiting.md") + repoFile(t, "docs/resilience.md") +
		repoFile(t, "docs/filters.md") + repoFile(t, "docs/configuration.md") + repoFile(t, "README.md")
	seen := map[string]bool{}
	var stale []string
	for _, name := range regexp.MustCompile(`loopgate_[a-z0-9_]*[a-z0-9*]`).FindAllString(docs, -1) {
		if strings.HasSuffix(name, "*") {
			continue // a family of names (loopgate_ratelimit_*), not a name
		}
		fam := metricFamily(name)
		if seen[fam] {
			continue
		}
		seen[fam] = true
		if _, ok := s.types[fam]; ok || writtenBy(src, fam) {
			continue
		}
		stale = append(stale, name)
	}
	if len(stale) > 0 {
		t.Errorf("the docs name metrics the code never writes: %v", stale)
	}
}

// writtenBy reports whether the sources spell the family, whole or as the
// suffix after one of the prefixes the writers join names from.
func writtenBy(src, fam string) bool {
	if strings.Contains(src, `"`+fam+`"`) {
		return true
	}
	for _, prefix := range []string{"loopgate_route_", "loopgate_upstream_node_", "loopgate_upstream_", "loopgate_filter_", "loopgate_ratelimit_", "loopgate_"} {
		if rest, ok := strings.CutPrefix(fam, prefix); ok && (strings.Contains(src, `"`+rest+`"`) || strings.Contains(src, `"_`+rest+`"`)) {
			return true
		}
	}
	return false
}

// TestDocsListEveryAdminEndpoint: each path the admin mux registers is in
// operations.md's admin section.
func TestDocsListEveryAdminEndpoint(t *testing.T) {
	src := sourceText(t, "engine/admin")
	ops := repoFile(t, "docs/operations.md")
	paths := regexp.MustCompile(`Handle(?:Func)?\("(?:[A-Z]+ )?(/[^" ]*)"`).FindAllStringSubmatch(src, -1)
	if len(paths) < 5 {
		t.Fatalf("found only %d admin routes in engine/admin; has the registration changed?", len(paths))
	}
	var missing []string
	for _, m := range paths {
		p := strings.TrimSuffix(m[1], "{$}")
		if strings.HasPrefix(p, "/debug/pprof/") {
			p = "/debug/pprof/" // Go's own profiles, documented as one entry
		}
		if !strings.Contains(ops, "`"+p) && !strings.Contains(ops, " "+p+"`") {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		t.Errorf("admin endpoints not in docs/operations.md: %v", missing)
	}
}
