// Tests for NormalizePath: the required table, a slow reference model, every prefix, and allocation.

package codec

import (
	"strings"
	"testing"

	"github.com/loopgate/loopgate/pool/pooltest"
)

var pathCases = []struct {
	in, want string
	flags    PathFlags
	err      error
}{
	{"/", "/", 0, nil},
	{"*", "*", 0, nil},
	{"//admin/x", "/admin/x", 0, nil},
	{"/./admin/x", "/admin/x", 0, nil},
	{"/pub/../admin/x", "/admin/x", 0, nil},
	{"/%61dmin/x", "/admin/x", 0, nil},
	{"/admin%2fx", "/admin%2Fx", PathEscapedSlash, nil},
	{"/admin%5cx", "/admin%5Cx", PathEscapedSlash, nil},
	{"/\\admin/x", "/%5Cadmin/x", PathBackslash, nil},
	{"/a\\%2F", "/a%5C%2F", PathBackslash | PathEscapedSlash, nil},
	{"/a/%2e%2e/b", "/b", 0, nil},
	{"/a/.%2E/b", "/b", 0, nil},
	{"/a/%2e/b", "/a/b", 0, nil},
	{"/..", "", 0, ErrPathAboveRoot},
	{"/../a", "", 0, ErrPathAboveRoot},
	{"/a/../..", "", 0, ErrPathAboveRoot},
	{"/a/./../../b", "", 0, ErrPathAboveRoot},
	{"//..", "", 0, ErrPathAboveRoot},
	{"/%2e%2e", "", 0, ErrPathAboveRoot},
	{"/a%00", "", 0, ErrNulInPath},
	{"/a%zz", "", 0, ErrBadPercent},
	{"/a%4", "", 0, ErrBadPercent},
	{"/a%", "", 0, ErrBadPercent},
	{"/a%4g/b", "", 0, ErrBadPercent},
	{"/a%%41", "", 0, ErrBadPercent},
	{"/a/b/", "/a/b/", 0, nil},
	{"/a/.", "/a/", 0, nil},
	{"/a/b/..", "/a/", 0, nil},
	{"/a/b/../", "/a/", 0, nil},
	{"/a/./b/.", "/a/b/", 0, nil},
	{"/%7euser", "/~user", 0, nil},
	{"/a%20b", "/a%20b", 0, nil},
	{"/a%c3%a9", "/a%C3%A9", 0, nil},
	{"/a%25", "/a%25", 0, nil},
	{"/%2541", "/%2541", 0, nil},
	{"/a;b=c/..;/d", "/a;b=c/..;/d", 0, nil},
	{"/caf\xc3\xa9", "/caf\xc3\xa9", 0, nil},
	{"/...", "/...", 0, nil},
	{"/.a/..b/a..", "/.a/..b/a..", 0, nil},
	{"///a////b///", "/a/b/", 0, nil},
	{"/a/b/c/../../d", "/a/d", 0, nil},
	{"/a//../b", "/b", 0, nil},
	{"/.", "/", 0, nil},
	{"/./", "/", 0, nil},
	{"/a/..", "/", 0, nil},
	{"/%41%42%2D%2e%5F%7E%30", "/AB-._~0", 0, nil},
	{"/%3a%3F%23%40", "/%3A%3F%23%40", 0, nil},
	{"", "", 0, ErrBadTarget},
	{"a/b", "", 0, ErrBadTarget},
	{"**", "", 0, ErrBadTarget},
}

func TestNormalizePath(t *testing.T) {
	for _, tt := range pathCases {
		got, flags, err := NormalizePath(nil, []byte(tt.in))
		if err != tt.err || string(got) != tt.want || flags != tt.flags {
			t.Errorf("NormalizePath(%q) = %q, %v, %v; want %q, %v, %v", tt.in, got, flags, err, tt.want, tt.flags, tt.err)
		}
		if err != nil {
			if e := err.(*Error); e.Status != 400 || e.Code != 40001 {
				t.Errorf("%q: %d/%d, want 400/40001", tt.in, e.Status, e.Code)
			}
			continue
		}
		again, _, err := NormalizePath(nil, got)
		if err != nil || string(again) != string(got) {
			t.Errorf("NormalizePath(%q) is not idempotent: %q, %v", got, again, err)
		}
	}
}

// TestNormalizePathEveryPrefix checks every prefix of every case against the reference model, so each
// rule is exercised with the input cut at every offset (mid-escape, mid-dot-segment, after a slash).
func TestNormalizePathEveryPrefix(t *testing.T) {
	for _, tt := range pathCases {
		for k := 0; k <= len(tt.in); k++ {
			checkAgainstReference(t, tt.in[:k])
			checkAgainstReference(t, "/"+tt.in[k:])
		}
	}
}

func TestNormalizePathAppends(t *testing.T) {
	dst := make([]byte, 3, 64)
	copy(dst, "abc")
	out, _, err := NormalizePath(dst, []byte("/x/../y%2e"))
	if err != nil || string(out) != "abc/y." || &out[0] != &dst[0] {
		t.Fatalf("got %q, %v (or reallocated)", out, err)
	}
	out, _, err = NormalizePath(dst, []byte("/x/../.."))
	if err != ErrPathAboveRoot || string(out) != "abc" {
		t.Fatalf("on error got %q, %v; want dst unchanged", out, err)
	}
	// ".." must not climb into what dst already held.
	out, _, err = NormalizePath([]byte("/a/b"), []byte("/.."))
	if err != ErrPathAboveRoot || string(out) != "/a/b" {
		t.Fatalf("climbed into dst: %q, %v", out, err)
	}
}

func TestNormalizePathAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	path := []byte("/api//v1/./users/%7Ejohn/../42%2fx\\y/")
	dst := make([]byte, 0, 3*len(path))
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := NormalizePath(dst[:0], path); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per call", allocs)
	}
}

func TestNormalizePathLinear(t *testing.T) {
	// Deep paths and long ".." runs stay linear: each byte is copied once and removed at most once.
	deep := strings.Repeat("/a", 50000) + strings.Repeat("/..", 50000) + "/end"
	out, _, err := NormalizePath(nil, []byte(deep))
	if err != nil || string(out) != "/end" {
		t.Fatalf("got %.20q, %v", out, err)
	}
	slashes := "/" + strings.Repeat("/", 100000) + "x"
	if out, _, err := NormalizePath(nil, []byte(slashes)); err != nil || string(out) != "/x" {
		t.Fatalf("got %.20q, %v", out, err)
	}
}

func TestPathFlagsString(t *testing.T) {
	want := map[PathFlags]string{0: "0", PathEscapedSlash: "PathEscapedSlash", PathBackslash: "PathBackslash",
		PathEscapedSlash | PathBackslash: "PathEscapedSlash|PathBackslash", 4: "PathFlags(?)"}
	for f, s := range want {
		if f.String() != s {
			t.Errorf("%d.String() = %q, want %q", f, f.String(), s)
		}
	}
}

// checkAgainstReference compares NormalizePath with referenceNormalizePath on in.
func checkAgainstReference(t testing.TB, in string) {
	t.Helper()
	got, flags, err := NormalizePath(nil, []byte(in))
	want, wantFlags, wantErr := referenceNormalizePath(in)
	if err != wantErr || (err == nil && (string(got) != want || flags != wantFlags)) {
		t.Fatalf("NormalizePath(%q) = %q, %v, %v; reference %q, %v, %v", in, got, flags, err, want, wantFlags, wantErr)
	}
}

// referenceNormalizePath is a slow, literal model of the rules: three separate passes (decode, merge
// slashes, RFC 3986 5.2.4 remove_dot_segments), with "output buffer empty at a ..-step" as the climb
// above the root.
func referenceNormalizePath(in string) (string, PathFlags, error) {
	if in == "*" {
		return in, 0, nil
	}
	if !strings.HasPrefix(in, "/") {
		return "", 0, ErrBadTarget
	}
	const hex = "0123456789ABCDEF"
	var flags PathFlags
	var dec strings.Builder
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '\\':
			flags |= PathBackslash
			dec.WriteString("%5C")
		case c != '%':
			dec.WriteByte(c)
		case i+2 >= len(in) || strings.IndexByte(hex, upper(in[i+1])) < 0 || strings.IndexByte(hex, upper(in[i+2])) < 0:
			return "", 0, ErrBadPercent
		default:
			v := byte(strings.IndexByte(hex, upper(in[i+1]))<<4 | strings.IndexByte(hex, upper(in[i+2])))
			switch {
			case v == 0:
				return "", 0, ErrNulInPath
			case 'a' <= v && v <= 'z' || 'A' <= v && v <= 'Z' || '0' <= v && v <= '9' || strings.IndexByte("-._~", v) >= 0:
				dec.WriteByte(v)
			default:
				if v == '/' || v == '\\' {
					flags |= PathEscapedSlash
				}
				dec.WriteString("%" + strings.ToUpper(in[i+1:i+3]))
			}
			i += 2
		}
	}
	merged := dec.String()
	for strings.Contains(merged, "//") {
		merged = strings.ReplaceAll(merged, "//", "/")
	}
	// RFC 3986 5.2.4, step by step.
	input, output := merged, ""
	for input != "" {
		switch {
		case strings.HasPrefix(input, "../"):
			input = input[3:]
		case strings.HasPrefix(input, "./"):
			input = input[2:]
		case strings.HasPrefix(input, "/./"):
			input = input[2:]
		case input == "/.":
			input = "/"
		case strings.HasPrefix(input, "/../") || input == "/..":
			if output == "" {
				return "", 0, ErrPathAboveRoot
			}
			input = "/" + input[min(len(input), 4):]
			output = output[:strings.LastIndexByte(output, '/')]
		case input == "." || input == "..":
			input = ""
		default:
			end := strings.IndexByte(input[1:], '/') + 1
			if end == 0 {
				end = len(input)
			}
			output += input[:end]
			input = input[end:]
		}
	}
	return output, flags, nil
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}
