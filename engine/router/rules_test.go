// Tests for 405 answers, HEAD, path parameters, Matched, hosts and the
// shared case rule.

package router

import (
	"strings"
	"testing"

	"github.com/loopgate/loopgate/pool/pooltest"
)

type resultCase struct {
	req  request
	want Result
}

func notAllowed(allow string) Result { return Result{Index: -1, Allow: allow} }

var notFound = Result{Index: -1}

// checkResults compares whole Results and checks that a found route's
// Matched leaves a remainder that is empty or starts with '/'.
func checkResults(t *testing.T, specs []Spec, cases []resultCase) {
	t.Helper()
	table := mustCompile(t, specs)
	for _, c := range cases {
		got := match(table, c.req)
		if got != c.want {
			t.Errorf("Match(host %q, %s %q) = %+v, want %+v", c.req.host, c.req.method, c.req.path, got, c.want)
			continue
		}
		if got.Found {
			if rest := c.req.path[got.Matched:]; rest != "" && rest[0] != '/' {
				t.Errorf("Match(%s %q): path[Matched:] = %q", c.req.method, c.req.path, rest)
			}
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	specs := []Spec{
		{Path: "/m/secret", Methods: []string{"GET", "POST"}}, // 0
		{Prefix: "/"}, // 1
		{Path: "/h", Host: "a.test", Methods: []string{"GET"}}, // 2
	}
	checkResults(t, specs, []resultCase{
		{request{"", "PUT", "/m/secret"}, notAllowed("GET, HEAD, POST")}, // not the catch-all
		{request{"", "DELETE", "/M/Secret/"}, notAllowed("GET, HEAD, POST")},
		{request{"", "HEAD", "/m/secret"}, foundAt(0, 9)},
		{request{"", "GET", "/m/secret"}, foundAt(0, 9)},
		{request{"", "POST", "/M/Secret/"}, foundAt(0, 10)},
		{request{"", "PUT", "/m/other"}, foundAt(1, 0)},
		{request{"a.test", "PUT", "/h"}, notAllowed("GET, HEAD")},
		{request{"A.TEST:8080", "GET", "/h"}, foundAt(2, 2)},
		{request{"b.test", "PUT", "/h"}, foundAt(1, 0)}, // a route for another host is no path match
		{request{"b.test", "GET", "/h"}, foundAt(1, 0)},
		{request{"", "PUT", "/h"}, foundAt(1, 0)},
	})
}

func TestAllowIsTheUnionForTheRequestHost(t *testing.T) {
	specs := []Spec{
		{Path: "/u", Host: "a.test", Methods: []string{"DELETE"}}, // 0
		{Path: "/u", Methods: []string{"GET"}},                    // 1
		{Path: "/u", Host: "b.test", Methods: []string{"put"}},    // 2
		{Path: "/u", Host: "c.test"},                              // 3: any method
		{Prefix: "/"},                                             // 4
	}
	checkResults(t, specs, []resultCase{
		{request{"a.test", "PATCH", "/u"}, notAllowed("DELETE, GET, HEAD")},
		{request{"b.test", "PATCH", "/u"}, notAllowed("GET, HEAD, PUT")},
		{request{"x.test", "PATCH", "/u"}, notAllowed("GET, HEAD")},
		{request{"", "PATCH", "/u"}, notAllowed("GET, HEAD")},
		{request{"c.test", "PATCH", "/u"}, foundAt(3, 2)},
		{request{"a.test", "DELETE", "/u"}, foundAt(0, 2)},
		{request{"a.test", "GET", "/u"}, foundAt(1, 2)},
		{request{"b.test", "DELETE", "/u"}, notAllowed("GET, HEAD, PUT")},
	})
}

func TestMethodNotAllowedAtEachLevel(t *testing.T) {
	specs := []Spec{
		{Path: "/e", Methods: []string{"GET"}},                  // 0
		{Path: "/e2", Host: "a.test", Methods: []string{"GET"}}, // 1
		{Path: "/*"}, // 2
		{Path: "/w/*/x", Methods: []string{"POST"}}, // 3
		{Path: "/w/**"}, // 4
		{Path: "/f/**", Methods: []string{"GET"}}, // 5
		{Prefix: "/"}, // 6
		{Prefix: "/api/", Methods: []string{"GET"}},                         // 7
		{Prefix: "/api/v1/", Host: "other.test", Methods: []string{"POST"}}, // 8
		{Path: "/t/*", Host: "a.test", Methods: []string{"PUT"}},            // 9
		{Path: "/*/y"}, // 10
	}
	checkResults(t, specs, []resultCase{
		// exact
		{request{"", "POST", "/e"}, notAllowed("GET, HEAD")}, // not "/*"
		{request{"b.test", "POST", "/e2"}, foundAt(2, 3)},    // other host: next level
		{request{"a.test", "POST", "/e2"}, notAllowed("GET, HEAD")},
		// single wildcard
		{request{"", "GET", "/w/a/x"}, notAllowed("POST")}, // not "/w/**"
		{request{"", "POST", "/w/a/x"}, foundAt(3, 6)},
		{request{"", "GET", "/w/a/y"}, foundAt(4, 6)},
		{request{"a.test", "GET", "/t/y"}, notAllowed("PUT")}, // no backtracking to "/*/y"
		{request{"b.test", "GET", "/t/y"}, foundAt(10, 4)},    // other host: backtracks
		// multi wildcard
		{request{"", "POST", "/f/a/b"}, notAllowed("GET, HEAD")}, // not prefix "/"
		{request{"", "HEAD", "/f/a/b"}, foundAt(5, 6)},
		// prefix: the longest prefix with routes for the host decides
		{request{"", "POST", "/api/x"}, notAllowed("GET, HEAD")}, // not prefix "/"
		{request{"mine.test", "POST", "/api/v1/x"}, notAllowed("GET, HEAD")},
		{request{"other.test", "POST", "/api/v1/x"}, foundAt(8, 7)},
		{request{"other.test", "GET", "/api/v1/x"}, notAllowed("POST")},
		{request{"mine.test", "GET", "/api/v1/x"}, foundAt(7, 4)},
		{request{"", "POST", "/other/x"}, foundAt(6, 0)},
	})
}

func TestGetAdmitsHead(t *testing.T) {
	specs := []Spec{
		{Path: "/g", Methods: []string{"GET"}},  // 0
		{Path: "/h", Methods: []string{"HEAD"}}, // 1: HEAD does not admit GET
		{Path: "/g/*"},                          // 2
	}
	checkResults(t, specs, []resultCase{
		{request{"", "HEAD", "/g"}, foundAt(0, 2)},
		{request{"", "POST", "/g"}, notAllowed("GET, HEAD")},
		{request{"", "GET", "/h"}, notAllowed("HEAD")},
	})
	_, err := Compile([]Spec{{Path: "/g", Methods: []string{"GET"}}, {Path: "/g", Methods: []string{"HEAD", "GET"}}})
	if se, ok := err.(*SpecError); !ok || !se.Duplicate || se.Of != 0 {
		t.Fatalf("GET and GET+HEAD on one path: err = %v, want a duplicate of spec[0]", err)
	}
}

func TestPathParametersAreIgnored(t *testing.T) {
	specs := []Spec{
		{Prefix: "/admin/"},  // 0
		{Prefix: "/"},        // 1
		{Path: "/a/b"},       // 2
		{Path: "/w/*/c"},     // 3
		{Path: "/public/**"}, // 4
	}
	checkResults(t, specs, []resultCase{
		{request{"", "GET", "/admin;x/y"}, foundAt(0, 8)},
		{request{"", "GET", "/ADMIN;JSESSIONID=AB/y"}, foundAt(0, 20)},
		{request{"", "GET", "/admin;x"}, foundAt(0, 8)},
		{request{"", "GET", "/admin;x/"}, foundAt(0, 8)},
		{request{"", "GET", "/admin;"}, foundAt(0, 7)},
		{request{"", "GET", "/adm;in/x"}, foundAt(1, 0)},
		{request{"", "GET", "/a;p/b;q=1"}, foundAt(2, 10)},
		{request{"", "GET", "/w/x;1/c"}, foundAt(3, 8)},
		{request{"", "GET", "/w/;1/c"}, foundAt(1, 0)}, // "*" needs a non-empty segment
		// After stripping, empty, "." and ".." segments are resolved as a
		// servlet container resolves them, so these reach /admin there.
		{request{"", "GET", "/;x/admin/y"}, foundAt(0, 9)},
		{request{"", "GET", "/public/..;/admin/x"}, foundAt(0, 17)},
		{request{"", "GET", "/..;/..;/Admin"}, foundAt(0, 14)},
		{request{"", "GET", "/public/.;/x"}, foundAt(4, 12)},
		{request{"", "GET", "/public/x/..;/..;"}, foundAt(1, 0)},
	})
	_, err := Compile([]Spec{{Path: "/a;b"}})
	if want := `router: spec[0].path: "/a;b" contains ';': path parameters are ignored when matching, so it could never match`; err == nil || err.Error() != want {
		t.Fatalf("Compile(/a;b) = %v, want %s", err, want)
	}
}

func TestMatchedForPrefixes(t *testing.T) {
	specs := []Spec{
		{Prefix: "/rw/"},   // 0
		{Prefix: "/"},      // 1
		{Prefix: "/a/b/c"}, // 2
		{Path: "/x/**"},    // 3
	}
	checkResults(t, specs, []resultCase{
		{request{"", "GET", "/RW/v1/users"}, foundAt(0, 3)},
		{request{"", "GET", "/rw"}, foundAt(0, 3)},
		{request{"", "GET", "/rw/"}, foundAt(0, 3)},
		{request{"", "GET", "/rw//x"}, foundAt(0, 3)},
		{request{"", "GET", "/anything/else"}, foundAt(1, 0)},
		{request{"", "GET", "/"}, foundAt(1, 0)},
		{request{"", "GET", "/a/B/c/d/"}, foundAt(2, 6)},
		{request{"", "GET", "/a/b"}, foundAt(1, 0)},
		{request{"", "GET", "/x/y/z/"}, foundAt(3, 7)}, // whole path for patterns
	})
}

func TestSameCaseRuleForEveryKind(t *testing.T) {
	kinds := []Spec{
		{Path: "/admin/x"}, {Path: "/admin/*"}, {Path: "/admin/**"}, {Prefix: "/admin/"},
		{Path: "/ADMIN/X"}, {Path: "/Admin/*"}, {Path: "/ADMIN/**"}, {Prefix: "/ADMIN"},
	}
	for _, spec := range kinds {
		table := mustCompile(t, []Spec{spec})
		for _, path := range []string{"/admin/x", "/ADMIN/x", "/admin/X", "/Admin/X/", "/ADMIN;P/X"} {
			got := match(table, request{"", "GET", path})
			if !got.Found || got.Index != 0 {
				t.Errorf("%+v: Match(%q) = %+v, want a match", spec, path, got)
			}
		}
		for _, path := range []string{"/ADMINX/x", "/x/ADMIN/x", "/ADMIN"} {
			if got := match(table, request{"", "GET", path}); got.Found != (path == "/ADMIN" && spec.Prefix != "") {
				t.Errorf("%+v: Match(%q) = %+v", spec, path, got)
			}
		}
		deep := spec.Prefix != "" || strings.HasSuffix(spec.Path, "**")
		if got := match(table, request{"", "GET", "/ADMIN/X/Y"}); got.Found != deep {
			t.Errorf("%+v: Match(/ADMIN/X/Y) = %+v", spec, got)
		}
	}
}

func TestHosts(t *testing.T) {
	specs := []Spec{
		{Path: "/d", Host: "Admin.Test."}, // 0: trailing dot dropped at compile
		{Path: "/v6", Host: "::1"},        // 1
		{Path: "/v6b", Host: "[::1]"},     // 2
		{Path: "/v6c", Host: "[FE80::1]"}, // 3
		{Prefix: "/"},                     // 4
	}
	checkMatches(t, specs, map[request]int{
		{"admin.test", "GET", "/d"}:      0,
		{"admin.test.", "GET", "/d"}:     0,
		{"ADMIN.TEST:443", "GET", "/d"}:  0,
		{"admin.test.:443", "GET", "/d"}: 0,
		{"admin.tes", "GET", "/d"}:       4,
		{"evil.admin.test", "GET", "/d"}: 4,
		{"admin.test.evil", "GET", "/d"}: 4,
		{"[::1]", "GET", "/v6"}:          1,
		{"[::1]:8080", "GET", "/v6"}:     1,
		{"::1", "GET", "/v6"}:            1, // bare literal tolerated, not cut at its last ':'
		{"[::2]", "GET", "/v6"}:          4,
		{"[::1", "GET", "/v6"}:           4,
		{"::", "GET", "/v6"}:             4,
		{"[::1]", "GET", "/v6b"}:         2,
		{"[::1]:80", "GET", "/v6b"}:      2,
		{"[fe80::1]", "GET", "/v6c"}:     3,
	})
	for _, host := range []string{".", "a.test:80", "[::1]:80"} {
		if _, err := Compile([]Spec{{Path: "/", Host: host}}); err == nil {
			t.Errorf("host %q compiled", host)
		}
	}
}

func TestMatchAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	table := mustCompile(t, benchSpecs())
	scratch := make([]byte, 0, 256)
	for _, r := range []request{
		{"api.example.com:8080", "GET", "/Svc42/API/v1/Resource42/"},
		{"api.example.com", "GET", "/svc42/api;v=1/v1/resource42;x"},
		{"[::1]:8080", "DELETE", "/svc17/api/v2/items/9"},
		{"", "GET", "/STATIC3/assets;x/css/site.css"},
		{"", "GET", "/nowhere/at/all"},
	} {
		host, method, path := []byte(r.host), []byte(r.method), []byte(r.path)
		if n := testing.AllocsPerRun(100, func() { table.Match(host, method, path, scratch) }); n != 0 {
			t.Errorf("Match(%s %q) allocates %v times", r.method, r.path, n)
		}
	}
}

// lowerBytes lowercases ASCII letters byte by byte (strings.Map would
// rewrite invalid UTF-8).
func lowerBytes(s string) string {
	b := []byte(s)
	for i := range b {
		b[i] = lower(b[i])
	}
	return string(b)
}

// refNormalise is normalisePath written plainly, for FuzzNormalise.
func refNormalise(path string) string {
	if !strings.Contains(path, ";") {
		if len(path) > 1 && strings.HasSuffix(path, "/") {
			path = path[:len(path)-1]
		}
		return lowerBytes(path)
	}
	var out []string
	for _, seg := range strings.Split(path[1:], "/") {
		seg, _, _ = strings.Cut(seg, ";")
		switch seg {
		case "", ".":
		case "..":
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		default:
			out = append(out, lowerBytes(seg))
		}
	}
	return "/" + strings.Join(out, "/")
}

func FuzzNormalise(f *testing.F) {
	for _, seed := range []string{"/", "/a/b/", "/A;x/B", "/public/..;/admin/x", "/;/;/", "/..;/../a;", "/a//b;c/./d/"} {
		f.Add(seed)
	}
	table := mustCompile(f, []Spec{{Prefix: "/a"}, {Prefix: "/a/b/c"}, {Prefix: "/"}})
	f.Fuzz(func(t *testing.T, path string) {
		if path == "" || path[0] != '/' {
			return
		}
		got, params := normalisePath([]byte(path), make([]byte, 0, len(path)))
		if want := refNormalise(path); string(got) != want {
			t.Fatalf("normalisePath(%q) = %q, want %q", path, got, want)
		}
		// segmentEnd maps each normalised segment back to the input
		// segment it came from.
		segs := strings.Split(string(got[1:]), "/")
		for depth := 1; depth <= len(segs) && len(got) > 1; depth++ {
			end := segmentEnd([]byte(path), depth, params)
			if rest := path[end:]; rest != "" && rest[0] != '/' {
				t.Fatalf("segmentEnd(%q, %d) = %d, rest %q", path, depth, end, rest)
			}
			start := strings.LastIndexByte(path[:end], '/') + 1
			name, _, _ := strings.Cut(path[start:end], ";")
			if lowerBytes(name) != segs[depth-1] {
				t.Fatalf("segmentEnd(%q, %d) = %d: input segment %q, normalised %q", path, depth, end, name, segs[depth-1])
			}
		}
		r := table.Match(nil, []byte("GET"), []byte(path), nil)
		if !r.Found || r.Matched > len(path) || r.Matched > 0 && path[r.Matched:] != "" && path[r.Matched] != '/' {
			t.Fatalf("Match(%q) = %+v", path, r)
		}
	})
}
