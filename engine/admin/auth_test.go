package admin

import (
	"net/http"
	"testing"
)

// Each token is told from the others, a prefix or an extension of one
// matches none, a read token reads but writes nothing, and open_reads
// serve GET alone without a token, as the dashboard's files are served.
func TestAuthenticate(t *testing.T) {
	s, err := Listen("127.0.0.1:0", &fakeGateway{ready: make(chan struct{})}, nil, Options{
		Tokens: []Token{
			{Name: "ops", Secret: "0123456789abcdef-write", Write: true},
			{Name: "viewer", Secret: "0123456789abcdef-read"},
		},
		OpenReads: []string{"/healthz"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct {
		method, path, auth string
		status             int
	}{
		{"GET", "/metrics", "", 401},
		{"GET", "/metrics", "Bearer 0123456789abcdef-read", 200},
		{"HEAD", "/metrics", "bearer 0123456789abcdef-read", 200},
		{"GET", "/metrics", "Bearer 0123456789abcdef-rea", 401},   // a prefix
		{"GET", "/metrics", "Bearer 0123456789abcdef-readx", 401}, // an extension
		{"GET", "/metrics", "Basic 0123456789abcdef-read", 401},
		{"GET", "/healthz", "", 200},
		{"POST", "/healthz", "", 401}, // open_reads serve reads only
		{"GET", "/ui/", "", 200},      // the dashboard's files, for the page to ask for a token
		{"GET", "/ui/app.js", "", 200},
		{"GET", "/ui/../metrics", "", 401}, // not the dashboard's
		{"POST", "/ui/", "", 401},
		{"POST", "/reload", "Bearer 0123456789abcdef-read", 403},
		{"POST", "/reload", "Bearer 0123456789abcdef-write", 503}, // authorised; no reloader here
	} {
		req, _ := http.NewRequest(c.method, "http://"+s.Addr()+c.path, nil)
		req.Header.Set("X-Loopgate-Admin", "1")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s %s with %q: %d, want %d", c.method, c.path, c.auth, resp.StatusCode, c.status)
		}
	}
}
