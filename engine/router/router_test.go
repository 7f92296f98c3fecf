// Tests and benchmarks for Compile and Match.

package router

import (
	"fmt"
	"sync"
	"testing"

	"github.com/loopgate/loopgate/pool/pooltest"
)

func TestMain(m *testing.M) { pooltest.Main(m) }

type request struct{ host, method, path string }

// match runs Match with a fresh scratch buffer of exactly len(path).
func match(t *Table, r request) Result {
	scratch := make([]byte, 0, len(r.path))
	return t.Match([]byte(r.host), []byte(r.method), []byte(r.path), scratch)
}

// matchIndex runs Match and returns the index, -1 for a 404, or -2 for a
// 405 or an inconsistent Result.
func matchIndex(t *Table, r request) int {
	res := match(t, r)
	switch {
	case res.Found && res.Index >= 0 && res.Allow == "":
		return res.Index
	case !res.Found && res.Index == -1 && res.Allow == "" && res.Matched == 0:
		return -1
	}
	return -2
}

func mustCompile(t testing.TB, specs []Spec) *Table {
	t.Helper()
	table, err := Compile(specs)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return table
}

func checkMatches(t *testing.T, specs []Spec, cases map[request]int) {
	t.Helper()
	table := mustCompile(t, specs)
	for r, want := range cases {
		if got := matchIndex(table, r); got != want {
			t.Errorf("Match(host %q, %s %q) = %d, want %d", r.host, r.method, r.path, got, want)
		}
	}
}

func TestClassPrecedence(t *testing.T) {
	specs := []Spec{
		{Prefix: "/"},              // 0
		{Prefix: "/api"},           // 1
		{Path: "/api/**"},          // 2
		{Path: "/api/*/items"},     // 3
		{Path: "/api/echo/items"},  // 4
		{Path: "/api/*"},           // 5
		{Prefix: "/api/v1/static"}, // 6
	}
	checkMatches(t, specs, map[request]int{
		{"", "GET", "/api/echo/items"}:  4, // exact beats everything
		{"", "GET", "/api/v2/items"}:    3, // single wildcard beats ** and prefix
		{"", "GET", "/api/v2"}:          5,
		{"", "GET", "/api/v2/other"}:    2, // ** beats prefix
		{"", "GET", "/api/v1/static/x"}: 2, // ** beats even a longer prefix
		{"", "GET", "/api"}:             1, // ** needs a segment; prefix takes it
		{"", "GET", "/other"}:           0,
		{"", "GET", "/"}:                0,
	})
}

func TestLongestPrefixWins(t *testing.T) {
	specs := []Spec{
		{Prefix: "/"},          // 0
		{Prefix: "/a/"},        // 1
		{Prefix: "/a/b/c"},     // 2
		{Prefix: "/a/b/c/d/e"}, // 3
	}
	checkMatches(t, specs, map[request]int{
		{"", "GET", "/a"}:           1,
		{"", "GET", "/a/b"}:         1,
		{"", "GET", "/a/b/c"}:       2,
		{"", "GET", "/a/b/c/d"}:     2,
		{"", "GET", "/a/b/c/d/e/f"}: 3,
		{"", "GET", "/ab"}:          0,
	})
}

func TestPrefixMatchesWholeSegments(t *testing.T) {
	for _, prefix := range []string{"/static/", "/static"} {
		checkMatches(t, []Spec{{Prefix: prefix}}, map[request]int{
			{"", "GET", "/static"}:       0,
			{"", "GET", "/static/"}:      0,
			{"", "GET", "/static/x"}:     0,
			{"", "GET", "/static/x/y/z"}: 0,
			{"", "GET", "/staticx"}:      -1,
			{"", "GET", "/stati"}:        -1,
			{"", "GET", "/"}:             -1,
		})
	}
}

func TestWildcardSegments(t *testing.T) {
	specs := []Spec{
		{Path: "/a/*/c"},    // 0
		{Path: "/files/**"}, // 1
		{Path: "/*"},        // 2
	}
	checkMatches(t, specs, map[request]int{
		{"", "GET", "/a/b/c"}:      0,
		{"", "GET", "/a/c"}:        -1, // * is exactly one segment
		{"", "GET", "/a/b/b/c"}:    -1,
		{"", "GET", "/a//c"}:       -1, // * never matches an empty segment
		{"", "GET", "/files/a"}:    1,
		{"", "GET", "/files/a/b"}:  1,
		{"", "GET", "/files/a/b/"}: 1,
		{"", "GET", "/files"}:      2, // ** needs one or more segments; "/*" takes "files"
		{"", "GET", "/files/"}:     2,
		{"", "GET", "/x"}:          2,
		{"", "GET", "/"}:           -1,
	})
}

func TestLiteralSegmentBeatsWildcardLeftToRight(t *testing.T) {
	specs := []Spec{
		{Path: "/api/*/items"}, // 0
		{Path: "/api/v1/*"},    // 1
		{Path: "/x/**"},        // 2
		{Path: "/x/*/**"},      // 3
		{Path: "/x/y/**"},      // 4
	}
	checkMatches(t, specs, map[request]int{
		{"", "GET", "/api/v1/items"}: 1,
		{"", "GET", "/api/v2/items"}: 0,
		{"", "GET", "/x/y/z"}:        4,
		{"", "GET", "/x/q/z"}:        3,
		{"", "GET", "/x/q"}:          2,
	})
}

func TestNormalisation(t *testing.T) {
	specs := []Spec{
		{Path: "/API/Echo/"}, // 0: spec normalised too
		{Path: "/"},          // 1
		{Path: "/Up/*"},      // 2
	}
	checkMatches(t, specs, map[request]int{
		{"", "GET", "/api/echo"}:   0,
		{"", "GET", "/api/echo/"}:  0,
		{"", "GET", "/API/ECHO"}:   0,
		{"", "GET", "/Api/Echo/"}:  0,
		{"", "GET", "/api/echo//"}: -1, // only one trailing slash is ignored
		{"", "GET", "/"}:           1,
		{"", "GET", "/UP/X"}:       2,
		{"", "GET", "api/echo"}:    -1, // not origin-form
		{"", "GET", ""}:            -1,
		{"", "GET", "*"}:           -1,
	})
}

func TestMatchDoesNotModifyPath(t *testing.T) {
	table := mustCompile(t, []Spec{{Path: "/api/echo"}})
	path := []byte("/API/Echo/")
	scratch := make([]byte, 0, 64)
	if !table.Match(nil, []byte("GET"), path, scratch).Found {
		t.Fatal("no match")
	}
	if string(path) != "/API/Echo/" {
		t.Fatalf("path changed to %q", path)
	}
}

func TestSmallScratchStillMatches(t *testing.T) {
	table := mustCompile(t, []Spec{{Path: "/api/echo"}})
	for _, p := range []string{"/API/ECHO", "/api;x/echo"} {
		if !table.Match(nil, []byte("GET"), []byte(p), nil).Found {
			t.Fatalf("%s with nil scratch: no match", p)
		}
	}
}

func TestHostPreferenceAndFallthrough(t *testing.T) {
	specs := []Spec{
		{Path: "/api", Host: "b.example.com"},  // 0
		{Path: "/api"},                         // 1
		{Path: "/api", Host: "A.Example.com"},  // 2: hosted beats host-less despite order
		{Path: "/only", Host: "a.example.com"}, // 3
		{Prefix: "/"},                          // 4
		{Path: "/v6", Host: "[::1]"},           // 5
		{Path: "/v6b", Host: "::1"},            // 6
	}
	checkMatches(t, specs, map[request]int{
		{"a.example.com", "GET", "/api"}:       2,
		{"A.EXAMPLE.COM:8443", "GET", "/api"}:  2,
		{"b.example.com", "GET", "/api"}:       0,
		{"c.example.com", "GET", "/api"}:       1,
		{"", "GET", "/api"}:                    1,
		{"a.example.com", "GET", "/only"}:      3,
		{"c.example.com", "GET", "/only"}:      4, // path matched, host did not: next class
		{"a.example.com.evil", "GET", "/only"}: 4,
		{"[::1]:8080", "GET", "/v6"}:           5,
		{"[::1]", "GET", "/v6b"}:               6,
	})
}

func TestMethodsAndNotAllowed(t *testing.T) {
	specs := []Spec{
		{Path: "/items", Methods: []string{"get", "HEAD"}}, // 0: uppercased at compile
		{Path: "/items", Methods: []string{"POST"}},        // 1
		{Path: "/items/*", Methods: []string{"DELETE"}},    // 2
		{Path: "/items/**"},                                // 3
		{Path: "/x/*", Methods: []string{"PUT"}},           // 4
		{Path: "/*/y"},                                     // 5
		{Prefix: "/items", Methods: []string{"PATCH"}},     // 6
		{Path: "/m"},                           // 7: any method
		{Path: "/m", Methods: []string{"GET"}}, // 8: method-restricted beats any-method
	}
	checkMatches(t, specs, map[request]int{
		{"", "GET", "/items"}:       0,
		{"", "HEAD", "/items"}:      0,
		{"", "POST", "/items"}:      1,
		{"", "DELETE", "/items/1"}:  2,
		{"", "PUT", "/x/y"}:         4,
		{"", "GET", "/m"}:           8,
		{"", "HEAD", "/m"}:          8, // GET admits HEAD, and restricted beats any-method
		{"", "POST", "/m"}:          7,
		{"", "PATCH", "/items/x/y"}: 3,
	})
	// Where a path matched only for other methods, the answer is 405 and
	// less specific routes are not tried.
	checkResults(t, specs, []resultCase{
		{request{"", "get", "/items"}, notAllowed("GET, HEAD, POST")},   // methods compare case-sensitively
		{request{"", "PATCH", "/items"}, notAllowed("GET, HEAD, POST")}, // not the PATCH prefix
		{request{"", "PUT", "/items"}, notAllowed("GET, HEAD, POST")},
		{request{"", "GET", "/items/1"}, notAllowed("DELETE")}, // not "/items/**"
		{request{"", "GET", "/x/y"}, notAllowed("PUT")},        // not "/*/y" by backtracking
	})
}

func TestEmptyTable(t *testing.T) {
	table := mustCompile(t, nil)
	if table.Len() != 0 || matchIndex(table, request{"", "GET", "/"}) != -1 {
		t.Fatal("empty table must match nothing")
	}
}

func TestLen(t *testing.T) {
	if n := mustCompile(t, []Spec{{Path: "/a"}, {Path: "/b/*"}, {Prefix: "/"}}).Len(); n != 3 {
		t.Fatalf("Len() = %d, want 3", n)
	}
}

func TestCompileErrors(t *testing.T) {
	cases := []struct {
		specs []Spec
		want  string
	}{
		{[]Spec{{}}, "router: spec[0]: one of path or prefix must be set"},
		{[]Spec{{Path: "/a"}, {Path: "/b", Prefix: "/b"}}, "router: spec[1]: path and prefix are mutually exclusive"},
		{[]Spec{{Path: "api"}}, `router: spec[0].path: "api" must start with '/'`},
		{[]Spec{{Prefix: "static/"}}, `router: spec[0].prefix: "static/" must start with '/'`},
		{[]Spec{{Path: "/a b"}}, `router: spec[0].path: "/a b" contains ' ', which cannot appear in a request path`},
		{[]Spec{{Path: "/a?b=1"}}, `router: spec[0].path: "/a?b=1" contains '?', which cannot appear in a request path`},
		{[]Spec{{Path: "/a*b"}}, `router: spec[0].path: "/a*b": '*' must be a whole segment ("*" or "**"), not part of "a*b"`},
		{[]Spec{{Path: "/a/***"}}, `router: spec[0].path: "/a/***": '*' must be a whole segment ("*" or "**"), not part of "***"`},
		{[]Spec{{Path: "/a/**/b"}}, `router: spec[0].path: "/a/**/b": "**" must be the last segment`},
		{[]Spec{{Prefix: "/a/*"}}, `router: spec[0].prefix: "/a/*": wildcards are only allowed in path, not prefix`},
		{[]Spec{{Path: "/a", Host: "a.com:80"}}, `router: spec[0].host: "a.com:80" must not include a port`},
		{[]Spec{{Path: "/a", Host: "*.a.com"}}, `router: spec[0].host: "*.a.com" contains '*'; only letters, digits, '-', '.' and '_' are allowed`},
		{[]Spec{{Path: "/a", Methods: []string{"GET", ""}}}, `router: spec[0].methods: [1] "" is not a valid HTTP method`},
		{[]Spec{{Path: "/a", Methods: []string{"GE T"}}}, `router: spec[0].methods: [0] "GE T" is not a valid HTTP method`},
		{[]Spec{{Path: "/a"}, {Path: "/b"}, {Path: "/A/"}}, "router: spec[2]: duplicates spec[0] (same path or prefix, host and methods)"},
		{[]Spec{{Path: "/a", Host: "x.com", Methods: []string{"GET", "POST"}}, {Path: "/a", Host: "X.COM", Methods: []string{"post", "GET", "GET"}}},
			"router: spec[1]: duplicates spec[0] (same path or prefix, host and methods)"},
		{[]Spec{{Prefix: "/s/"}, {Prefix: "/s"}}, "router: spec[1]: duplicates spec[0] (same path or prefix, host and methods)"},
	}
	for _, c := range cases {
		_, err := Compile(c.specs)
		if err == nil || err.Error() != c.want {
			t.Errorf("Compile(%+v)\n got: %v\nwant: %s", c.specs, err, c.want)
			continue
		}
		if _, ok := err.(*SpecError); !ok {
			t.Errorf("Compile(%+v): error is %T, want *SpecError", c.specs, err)
		}
	}
}

func TestNotDuplicates(t *testing.T) {
	// Same path but different host, methods or kind are distinct routes.
	mustCompile(t, []Spec{
		{Path: "/a"}, {Path: "/a", Host: "x.com"}, {Path: "/a", Methods: []string{"GET"}},
		{Prefix: "/a"}, {Path: "/a/*"}, {Path: "/a/**"},
	})
}

func TestSpecErrorDescribe(t *testing.T) {
	e := &SpecError{Index: 1, Field: "path", Reason: "bad"}
	if got := e.Describe("routes"); got != "routes[1].path: bad" {
		t.Fatalf("Describe = %q", got)
	}
	d := &SpecError{Index: 3, Duplicate: true, Of: 1}
	if got := d.Describe("routes"); got != "routes[3]: duplicates routes[1] (same path or prefix, host and methods)" {
		t.Fatalf("Describe = %q", got)
	}
}

func TestConcurrentMatch(t *testing.T) {
	table := mustCompile(t, benchSpecs())
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scratch := make([]byte, 0, 256)
			for i := range 500 {
				n := (i + g) % 100
				path := fmt.Sprintf("/Svc%d/API/v1/resource%d", n, n)
				if got := table.Match(nil, []byte("GET"), []byte(path), scratch); !got.Found || got.Index != n {
					t.Errorf("Match(%q) = %+v; want index %d", path, got, n)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// benchSpecs is a 200-route table: 100 exact, 40 single-wildcard,
// 30 multi-wildcard and 30 prefix routes, spec index = position.
func benchSpecs() []Spec {
	var specs []Spec
	for i := range 100 {
		specs = append(specs, Spec{Path: fmt.Sprintf("/svc%d/api/v1/resource%d", i, i)})
	}
	for i := range 40 {
		specs = append(specs, Spec{Path: fmt.Sprintf("/svc%d/api/*/items/*", i), Methods: []string{"GET", "POST"}})
	}
	for i := range 30 {
		specs = append(specs, Spec{Path: fmt.Sprintf("/files%d/**", i)})
	}
	for i := range 30 {
		specs = append(specs, Spec{Prefix: fmt.Sprintf("/static%d/assets/", i)})
	}
	return specs
}

// benchMatch times Match on the 200-route benchSpecs table after checking
// it returns want.
func benchMatch(b *testing.B, method, path string, want Result) {
	table := mustCompile(b, benchSpecs())
	host, m, p := []byte("api.example.com:8080"), []byte(method), []byte(path)
	scratch := make([]byte, 0, 256)
	if got := table.Match(host, m, p, scratch); got != want {
		b.Fatalf("Match(%s %q) = %+v; want %+v", method, path, got, want)
	}
	b.ReportAllocs()
	for b.Loop() {
		table.Match(host, m, p, scratch)
	}
}

func foundAt(index, matched int) Result { return Result{Index: index, Found: true, Matched: matched} }

func BenchmarkMatchExact(b *testing.B) {
	benchMatch(b, "GET", "/svc42/api/v1/resource42", foundAt(42, 24))
}

func BenchmarkMatchExactMixedCase(b *testing.B) {
	benchMatch(b, "GET", "/Svc42/API/v1/Resource42/", foundAt(42, 25))
}

func BenchmarkMatchExactParams(b *testing.B) {
	benchMatch(b, "GET", "/svc42/api;v=1/v1/resource42;jsessionid=AB12", foundAt(42, 44))
}

func BenchmarkMatchWildcard(b *testing.B) {
	benchMatch(b, "POST", "/svc17/api/v2/items/9", foundAt(117, 21))
}

func BenchmarkMatchMultiWildcard(b *testing.B) {
	benchMatch(b, "GET", "/files7/a/b/c.txt", foundAt(147, 17))
}

func BenchmarkMatchPrefix(b *testing.B) {
	benchMatch(b, "GET", "/static3/assets/css/site.css", foundAt(173, 15))
}

func BenchmarkMatchMethodNotAllowed(b *testing.B) {
	benchMatch(b, "DELETE", "/svc17/api/v2/items/9", Result{Index: -1, Allow: "GET, HEAD, POST"})
}

func BenchmarkMatchMiss(b *testing.B) {
	benchMatch(b, "GET", "/nowhere/at/all", Result{Index: -1})
}

// BenchmarkCompile30k compiles 30,000 exact paths and one prefix, the
// table of a large gateway (every reload's and -check's).
func BenchmarkCompile30k(b *testing.B) {
	specs := make([]Spec, 0, 30001)
	for i := range 30000 {
		specs = append(specs, Spec{Path: fmt.Sprintf("/r%d", i)})
	}
	specs = append(specs, Spec{Prefix: "/"})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(specs); err != nil {
			b.Fatal(err)
		}
	}
}
