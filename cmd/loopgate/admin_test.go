// The admin port of the built binary against what a web page can send:
// form posts, cross-site requests, rebound host names. (An admin address
// that is not loopback needs a token: configapi_test.go.)

package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// adminDo sends one request to the admin port; headers are name, value
// pairs ("Host" sets the Host header).
func adminDo(t *testing.T, method, addr, path, body string, headers ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

// The request: a form POST /reload from a cross-site page is not
// applied; neither is a POST without the header, nor a request for a
// rebound name. The same POST with the header is.
func TestAdminRefusesWebPages(t *testing.T) {
	g := startReloadable(t, okRoute, okUpstream(t))
	for _, c := range []struct {
		name    string
		method  string
		path    string
		headers []string
		status  int
		code    float64
	}{
		{"form post from a cross-site page", "POST", "/reload", []string{"Content-Type", "application/x-www-form-urlencoded",
			"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"}, 403, 40303},
		{"form post", "POST", "/reload", []string{"Content-Type", "application/x-www-form-urlencoded"}, 403, 40304},
		{"text post", "POST", "/reload", []string{"Content-Type", "text/plain"}, 403, 40304},
		{"post with no content type", "POST", "/reload", nil, 403, 40304},
		{"header but cross-origin", "POST", "/reload", []string{"X-Loopgate-Admin", "1", "Origin", "http://evil.example"}, 403, 40303},
		{"rebound name", "POST", "/reload", []string{"X-Loopgate-Admin", "1", "Host", "evil.example"}, 421, 42101},
		{"rebound name reading metrics", "GET", "/metrics", []string{"Host", "evil.example:9901"}, 421, 42101},
		{"pprof off by default", "GET", "/debug/pprof/heap", nil, 404, 40401},
	} {
		if status, body := adminDo(t, c.method, g.admin, c.path, "a=b", c.headers...); status != c.status || body["code"] != c.code {
			t.Errorf("%s: %d %v, want %d with code %v", c.name, status, body, c.status, c.code)
		}
	}
	if n := len(g.reloadLines()); n != 0 {
		t.Fatalf("%d reloads ran from refused requests; output:\n%s", n, g.logs)
	}
	if status, body := adminDo(t, "POST", g.admin, "/reload", "", "X-Loopgate-Admin", "1"); status != 200 || body["result"] != "applied" {
		t.Fatalf("POST /reload with the header: %d %v", status, body)
	}
	if status, body := adminDo(t, "POST", g.admin, "/reload", "{}", "Content-Type", "application/json"); status != 200 || body["result"] != "applied" {
		t.Fatalf("POST /reload with a JSON body: %d %v", status, body)
	}
	g.waitReloadLine(t, 2) // the log lines are written after the answers
	if n := len(g.reloadLines()); n != 2 {
		t.Fatalf("%d reload lines, want the 2 accepted; output:\n%s", n, g.logs)
	}
}
