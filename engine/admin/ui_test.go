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
