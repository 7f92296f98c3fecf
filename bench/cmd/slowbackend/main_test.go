// Tests for the slow backend's answer and its /delay control endpoint.
package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func do(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestDelayIsSwitchedAtRuntime(t *testing.T) {
	// An hour: the test would time out if a request waited it.
	ts := httptest.NewServer(newServer(time.Hour))
	defer ts.Close()

	if code, body := do(t, http.MethodGet, ts.URL+"/delay"); code != 200 || body != "delay 1h0m0s\n" {
		t.Fatalf("GET /delay: %d %q", code, body)
	}
	if code, body := do(t, http.MethodPost, ts.URL+"/delay?d=0s"); code != 200 || body != "delay 0s\n" {
		t.Fatalf("POST /delay?d=0s: %d %q", code, body)
	}
	if code, body := do(t, http.MethodGet, ts.URL+"/slow"); code != 200 || body != "slow\n" {
		t.Fatalf("GET /slow: %d %q", code, body)
	}
}

func TestDelayRejectsBadValues(t *testing.T) {
	ts := httptest.NewServer(newServer(0))
	defer ts.Close()

	for _, q := range []string{"", "?d=", "?d=fast", "?d=-1s"} {
		if code, _ := do(t, http.MethodPost, ts.URL+"/delay"+q); code != http.StatusBadRequest {
			t.Errorf("POST /delay%s: %d, want 400", q, code)
		}
	}
	if code, _ := do(t, http.MethodPut, ts.URL+"/delay?d=1s"); code != http.StatusMethodNotAllowed {
		t.Errorf("PUT /delay: %d, want 405", code)
	}
	if code, body := do(t, http.MethodGet, ts.URL+"/delay"); code != 200 || body != "delay 0s\n" {
		t.Errorf("after bad values: %d %q, want the delay unchanged", code, body)
	}
}

// Paths under -fast are answered at once whatever the delay.
func TestFastPrefixSkipsTheDelay(t *testing.T) {
	s := newServer(time.Hour) // the test would time out if a request waited it
	s.fast = "/fast"
	ts := httptest.NewServer(s)
	defer ts.Close()
	if code, body := do(t, http.MethodGet, ts.URL+"/fast/x"); code != 200 || body != "slow\n" {
		t.Fatalf("GET /fast/x: %d %q", code, body)
	}
}
