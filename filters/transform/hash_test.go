// Tests for the hash filter's key sources.

package transform

import (
	"testing"
)

func TestHash(t *testing.T) {
	all := &Hash{Header: "X-Tenant", Cookie: "session", User: true}
	for _, tc := range []struct {
		name    string
		cfg     *Hash
		headers []string
		subject string
		want    string // "" = nil key
	}{
		{"header", &Hash{Header: "X-Tenant"}, []string{"X-Tenant: acme"}, "", "acme"},
		{"header absent", &Hash{Header: "X-Tenant"}, nil, "", ""},
		{"header empty", &Hash{Header: "X-Tenant"}, []string{"X-Tenant:"}, "", ""},
		{"cookie", &Hash{Cookie: "session"}, []string{"Cookie: a=b; session=s123"}, "", "s123"},
		{"cookie absent", &Hash{Cookie: "session"}, []string{"Cookie: a=b"}, "", ""},
		{"user", &Hash{User: true}, nil, "user-7", "user-7"},
		{"user unauthenticated", &Hash{User: true}, nil, "", ""},
		{"header first", all, []string{"X-Tenant: acme", "Cookie: session=s1"}, "u", "acme"},
		{"cookie next", all, []string{"Cookie: session=s1"}, "u", "s1"},
		{"user last", all, []string{"Cookie: other=1"}, "u", "u"},
		{"nothing configured", &Hash{}, []string{"X-Tenant: acme"}, "u", ""},
		{"nil config", nil, []string{"X-Tenant: acme"}, "u", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, raw := request(t, append([]string{"GET / HTTP/1.1", "Host: a"}, tc.headers...)...)
			x := exchange(req, "192.0.2.1")
			if tc.subject != "" {
				x.Identity.Authenticated, x.Identity.Subject = true, []byte(tc.subject)
			}
			NewHash(700, tc.cfg).Request(x)
			scribble(raw)
			if tc.want == "" {
				if x.Upstream.HashKey != nil {
					t.Errorf("HashKey = %q, want nil", x.Upstream.HashKey)
				}
				return
			}
			if string(x.Upstream.HashKey) != tc.want {
				t.Errorf("HashKey = %q, want %q", x.Upstream.HashKey, tc.want)
			}
		})
	}
}
