// Tests for NormalizeHost and the shared host grammar, against a reference built on net/netip.

package codec

import (
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/pool/pooltest"
)

var hostCases = []struct {
	in, name string
	port     int
	ok       bool
}{
	{"", "", -1, true},
	{"Admin.Test.", "admin.test", -1, true},
	{"admin.test.:80", "admin.test", 80, true},
	{"ADMIN.test:443", "admin.test", 443, true},
	{"[::1]:8080", "[::1]", 8080, true},
	{"[::1]", "[::1]", -1, true},
	{"[FE80::A:b]", "[fe80::a:b]", -1, true},
	{"[::ffff:192.0.2.1]:1", "[::ffff:192.0.2.1]", 1, true},
	{"[1:2:3:4:5:6:7:8]", "[1:2:3:4:5:6:7:8]", -1, true},
	{"[1:2:3:4:5:6:7::]", "[1:2:3:4:5:6:7::]", -1, true},
	{"[::]", "[::]", -1, true},
	{"127.0.0.1", "127.0.0.1", -1, true},
	{"127.0.0.1:0", "127.0.0.1", 0, true},
	{"a:65535", "a", 65535, true},
	{"a:00080", "a", 80, true},
	{"under_score-x~y", "under_score-x~y", -1, true},
	{"a.b.c.d.e", "a.b.c.d.e", -1, true},
	{"x", "x", -1, true},
	{"admin.test:80:80", "", -1, false},
	{"a:", "", -1, false},
	{"a:99999", "", -1, false},
	{"a:65536", "", -1, false},
	{"a:123456", "", -1, false},
	{"a:+80", "", -1, false},
	{"a: 80", "", -1, false},
	{"a :80", "", -1, false},
	{"::1", "", -1, false},
	{":80", "", -1, false},
	{"[::1", "", -1, false},
	{"[zz]", "", -1, false},
	{"[]", "", -1, false},
	{"[::1]x", "", -1, false},
	{"[::1]:", "", -1, false},
	{"[1::2::3]", "", -1, false},
	{"[1:2:3:4:5:6:7:8:9]", "", -1, false},
	{"[1:2:3:4:5:6:7]", "", -1, false},
	{"[12345::]", "", -1, false},
	{"[1:]", "", -1, false},
	{"[:1]", "", -1, false},
	{"[::1%25eth0]", "", -1, false},
	{"[v1.x]", "", -1, false},
	{"[::1.2.3.04]", "", -1, false},
	{"[::256.1.1.1]", "", -1, false},
	{"[1.2.3.4]", "", -1, false},
	{"..", "", -1, false},
	{".", "", -1, false},
	{".a", "", -1, false},
	{"a..b", "", -1, false},
	{"a..", "", -1, false},
	{"a b", "", -1, false},
	{"a/b", "", -1, false},
	{"u@a", "", -1, false},
	{"%61dmin.test", "", -1, false},
	{"caf\xc3\xa9", "", -1, false},
	{"a]", "", -1, false},
	{"a[", "", -1, false},
}

func TestNormalizeHost(t *testing.T) {
	for _, tt := range hostCases {
		name, port, err := NormalizeHost(nil, []byte(tt.in))
		if (err == nil) != tt.ok || string(name) != tt.name || port != tt.port {
			t.Errorf("NormalizeHost(%q) = %q, %d, %v; want %q, %d, ok=%v", tt.in, name, port, err, tt.name, tt.port, tt.ok)
		}
		if err != nil && err != ErrBadHost {
			t.Errorf("NormalizeHost(%q): error %v, want ErrBadHost", tt.in, err)
		}
	}
}

// TestHostEveryPrefix checks every prefix and suffix of every case against the reference model, and that
// the request parser's Host rule (validHost) accepts exactly what NormalizeHost accepts.
func TestHostEveryPrefix(t *testing.T) {
	for _, tt := range hostCases {
		for k := 0; k <= len(tt.in); k++ {
			checkHost(t, tt.in[:k])
			checkHost(t, tt.in[k:])
		}
	}
}

func TestHostInRequests(t *testing.T) {
	for _, tt := range hostCases {
		if strings.ContainsAny(tt.in, " \t\xc3") {
			continue // rejected as a field value or target byte before the host rule applies
		}
		var r Request
		_, err := ParseRequest([]byte("GET / HTTP/1.1\r\nHost: "+tt.in+"\r\n\r\n"), &r, nil)
		if (err == nil) != tt.ok || (err != nil && err != ErrBadHost) {
			t.Errorf("Host: %q: %v, want ok=%v", tt.in, err, tt.ok)
		}
		if tt.in == "" || strings.ContainsAny(tt.in, "/?") {
			continue
		}
		_, err = ParseRequest([]byte("GET http://"+tt.in+"/x HTTP/1.1\r\nHost: h\r\n\r\n"), &r, nil)
		if (err == nil) != tt.ok || (err != nil && err != ErrBadTarget) {
			t.Errorf("authority %q: %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

func TestNormalizeHostAppends(t *testing.T) {
	dst := make([]byte, 2, 32)
	copy(dst, "h=")
	name, port, err := NormalizeHost(dst, []byte("API.Example.COM.:8443"))
	if err != nil || string(name) != "h=api.example.com" || port != 8443 || &name[0] != &dst[0] {
		t.Fatalf("got %q, %d, %v", name, port, err)
	}
	name, port, err = NormalizeHost(dst, []byte("a:b"))
	if err != ErrBadHost || string(name) != "h=" || port != -1 {
		t.Fatalf("on error got %q, %d, %v", name, port, err)
	}
}

func TestNormalizeHostAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	dst := make([]byte, 0, 32)
	allocs := testing.AllocsPerRun(100, func() {
		if _, _, err := NormalizeHost(dst[:0], []byte("API.Example.COM.:8443")); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per call", allocs)
	}
}

func checkHost(t testing.TB, in string) {
	t.Helper()
	name, port, err := NormalizeHost(nil, []byte(in))
	wantName, wantPort, wantOK := referenceHost(in)
	if (err == nil) != wantOK || string(name) != wantName || port != wantPort {
		t.Fatalf("NormalizeHost(%q) = %q, %d, %v; reference %q, %d, ok=%v", in, name, port, err, wantName, wantPort, wantOK)
	}
	checkParsedHost(t, in, wantName, wantPort, wantOK)
}

// checkParsedHost: a request whose Host field (and, when valid, whose
// absolute-form authority) is in parses exactly when NormalizeHost accepts
// in, and its NormalHost is NormalizeHost's answer.
func checkParsedHost(t testing.TB, in, wantName string, wantPort int, wantOK bool) {
	t.Helper()
	for i := 0; i < len(in); i++ {
		if in[i] <= ' ' || in[i] >= 0x7f {
			return // not a field value as such: the field grammar answers first
		}
	}
	heads := []string{"GET / HTTP/1.1\r\nHost: " + in + "\r\n\r\n"}
	if wantOK && in != "" {
		heads = append(heads, "GET http://"+in+"/p HTTP/1.1\r\nHost: other.test\r\n\r\n")
	}
	for _, head := range heads {
		var r Request
		_, err := ParseRequest([]byte(head), &r, nil)
		if (err == nil) != wantOK {
			t.Fatalf("ParseRequest(%q) = %v; NormalizeHost ok=%v", head, err, wantOK)
		}
		if err != nil {
			continue
		}
		name, port := r.NormalHost(nil)
		if string(name) != wantName || port != wantPort {
			t.Fatalf("ParseRequest(%q).NormalHost = %q, %d; NormalizeHost %q, %d", head, name, port, wantName, wantPort)
		}
	}
}

var (
	refRegName = regexp.MustCompile(`^([A-Za-z0-9\-_~!$&'()*+,;=]+\.)*[A-Za-z0-9\-_~!$&'()*+,;=]+\.?$`)
	refPort    = regexp.MustCompile(`^[0-9]{1,5}$`)
)

// referenceHost is a slow model of NormalizeHost built on regexp and net/netip.
func referenceHost(h string) (name string, port int, ok bool) {
	if h == "" {
		return "", -1, true
	}
	var host, rest string
	if strings.HasPrefix(h, "[") {
		end := strings.IndexByte(h, ']')
		if end < 0 {
			return "", -1, false
		}
		addr, err := netip.ParseAddr(h[1:end])
		if err != nil || !addr.Is6() || addr.Zone() != "" {
			return "", -1, false
		}
		host, rest = strings.ToLower(h[:end+1]), h[end+1:]
	} else {
		host, rest = h, ""
		if i := strings.IndexByte(h, ':'); i >= 0 {
			host, rest = h[:i], h[i:]
		}
		if !refRegName.MatchString(host) {
			return "", -1, false
		}
		host = strings.ToLower(strings.TrimSuffix(host, "."))
	}
	port = -1
	if rest != "" {
		if rest[0] != ':' || !refPort.MatchString(rest[1:]) {
			return "", -1, false
		}
		port, _ = strconv.Atoi(rest[1:])
		if port > 65535 {
			return "", -1, false
		}
	}
	return host, port, true
}
