package admin

import (
	"net/http"
	"strings"
	"testing"
)

// The dashboard's files are served from the binary under /ui/, unframable
// and limited to their own origin, behind the same guard as every path.
func TestUIServed(t *testing.T) {
	_, base := startAdmin(t, nil, Options{})
	resp, err := client.Get(base + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors 'none'") || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("GET /ui/: %d %v", resp.StatusCode, resp.Header)
	}
	for _, f := range []string{"app.js", "style.css"} {
		if code, body := do(t, "GET", base+"/ui/"+f); code != 200 || len(body) < 100 {
			t.Errorf("GET /ui/%s: %d, %d bytes", f, code, len(body))
		}
	}
	if code, _ := do(t, "GET", base+"/ui/nosuch.js"); code != 404 {
		t.Errorf("GET /ui/nosuch.js: %d, want 404", code)
	}
	req, _ := http.NewRequest("GET", base+"/ui/", nil)
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if code, _ := send(t, req); code != 403 {
		t.Errorf("cross-site GET /ui/: %d, want 403 (the guard)", code)
	}
}

// GET /summary answers the gateway's digest for ?top (default 50), a
// top out of range is 400 code 40001, and unlike the dashboard's files
// it needs a token.
func TestSummaryServed(t *testing.T) {
	_, base := startAdmin(t, nil, Options{})
	for q, want := range map[string]string{"": `{"top":50}`, "?top=7": `{"top":7}`, "?top=1000": `{"top":1000}`} {
		if code, body := do(t, "GET", base+"/summary"+q); code != 200 || body != want {
			t.Errorf("GET /summary%s: %d %s, want 200 %s", q, code, body, want)
		}
	}
	for _, q := range []string{"?top=0", "?top=1001", "?top=x", "?top=-1"} {
		if code, body := do(t, "GET", base+"/summary"+q); code != 400 || !strings.Contains(body, `"code":40001`) || !strings.Contains(body, `"request_id"`) {
			t.Errorf("GET /summary%s: %d %s, want 400 code 40001", q, code, body)
		}
	}

	s, err := Listen("127.0.0.1:0", &fakeGateway{ready: make(chan struct{})}, nil, Options{
		Tokens: []Token{{Name: "viewer", Secret: "0123456789abcdef-read"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if code, _ := do(t, "GET", "http://"+s.Addr()+"/summary"); code != 401 {
		t.Errorf("GET /summary without a token: %d, want 401", code)
	}
	req, _ := http.NewRequest("GET", "http://"+s.Addr()+"/summary", nil)
	req.Header.Set("Authorization", "Bearer 0123456789abcdef-read")
	if code, _ := send(t, req); code != 200 {
		t.Errorf("GET /summary with a read token: %d, want 200", code)
	}
}
