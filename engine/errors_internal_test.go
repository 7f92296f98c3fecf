// The JSON error body: escaping, and a Content-Length that matches it.

package engine

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/filters"
)

// No socket path puts a quote or a backslash in an error body today (the
// messages are constants and request_id keeps only [A-Za-z0-9._-]), so the
// escaping is checked here directly.
func TestErrorBodyIsValidJSON(t *testing.T) {
	for _, tc := range []struct{ msg, id string }{
		{"plain", "0123abcd"},
		{`say "no"`, `id"quoted"`},
		{`back\slash \"both\"`, `a\b`},
		{"controls \x00\x01\x1f\t\r\n end", "id"},
		{"utf-8 é ✓ and DEL \x7f", "ü"},
		{"", ""},
	} {
		out := appendError(nil, 502, 50202, tc.msg, []byte(tc.id), true, false, nil, nil, nil)
		resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
		if err != nil {
			t.Fatalf("%q: %v\n%s", tc.msg, err, out)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		// The body is exactly Content-Length bytes: nothing after it.
		if rest := out[bytes.Index(out, []byte("\r\n\r\n"))+4:]; !bytes.Equal(rest, body) {
			t.Fatalf("%q: Content-Length %d but %d body bytes: %q", tc.msg, resp.ContentLength, len(rest), rest)
		}
		var e struct {
			Code      int    `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			t.Fatalf("%q: body is not JSON: %v\n%s", tc.msg, err, body)
		}
		if e.Code != 50202 || e.Message != tc.msg || e.RequestID != tc.id {
			t.Fatalf("decoded %+v, want message %q and request_id %q", e, tc.msg, tc.id)
		}
		if resp.StatusCode != 502 || !resp.Close || resp.Header.Get("Content-Type") != "application/json" {
			t.Fatalf("%q: status %d, close %v, type %q", tc.msg, resp.StatusCode, resp.Close, resp.Header.Get("Content-Type"))
		}
	}
}

func TestErrorHeadOnlyAndExtraHeader(t *testing.T) {
	var rej filters.Rejection
	rej.AddHeader("WWW-Authenticate", []byte(`Bearer realm="api"`))
	rej.AddHeader("Retry-After", []byte("7"))
	edits := &filters.HeaderEdits{
		Set:    []filters.Header{{Name: "X-Frame-Options", Value: []byte("deny")}, {Name: "Content-Type", Value: []byte("text/html")}},
		Append: []filters.Header{{Name: "X-Via", Value: []byte("gw")}},
	}
	out := appendError(nil, 401, 40101, `need "a" token`, []byte("id1"), false, true, rej.Headers(), edits, nil)
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), &http.Request{Method: "HEAD"})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasSuffix(out, []byte("\r\n\r\n")) {
		t.Fatalf("a HEAD error carries a body:\n%s", out)
	}
	want := int64(len(`{"code":40101,"message":"need \"a\" token","request_id":"id1"}`))
	if resp.ContentLength != want || resp.Close || resp.Header.Get("WWW-Authenticate") != `Bearer realm="api"` || resp.Header.Get("X-Request-Id") != "id1" {
		t.Fatalf("head: length %d (want %d), close %v, headers %v", resp.ContentLength, want, resp.Close, resp.Header)
	}
	// Every rejection header, and the route's edits, except a second
	// Content-Type: the error frames itself.
	h := resp.Header
	if h.Get("Retry-After") != "7" || h.Get("X-Frame-Options") != "deny" || h.Get("X-Via") != "gw" || len(h.Values("Content-Type")) != 1 || h.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", h)
	}
}

// Every status the gateway answers with has its standard reason phrase in
// the status line. The statuses come from the error code table in
// docs/operations.md and from every place in the module's sources that
// makes an error (codec.Error and upstream.Error values, auth failures, a
// filter's Reject, the engine's respond), and each code made there must be
// in the table.
func TestErrorStatusLinesHaveStandardReasons(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[int]int{} // code -> status
	documented := map[int]bool{}
	for _, r := range regexp.MustCompile(`(?m)^\| ([0-9]{5}) \| ([0-9]{3}) \|`).FindAllSubmatch(doc, -1) {
		code, _ := strconv.Atoi(string(r[1]))
		statuses[code], _ = strconv.Atoi(string(r[2]))
		documented[code] = true
	}
	if len(documented) < 20 {
		t.Fatalf("found %d rows in the error code table; has its layout changed?", len(documented))
	}
	made := regexp.MustCompile(`(?:Status: *|Reject\(|respond\(|Failure\{)([0-9]{3}), *(?:Code: *)?([0-9]{5})`)
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		for _, r := range made.FindAllSubmatch(src, -1) {
			status, _ := strconv.Atoi(string(r[1]))
			code, _ := strconv.Atoi(string(r[2]))
			if !documented[code] {
				t.Errorf("%s makes code %d (status %d), which the table in docs/operations.md lacks", path, code, status)
			}
			statuses[code] = status
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for code, status := range statuses {
		want := http.StatusText(status)
		if want == "" {
			t.Errorf("code %d: status %d has no standard reason phrase", code, status)
			continue
		}
		out := appendError(nil, status, code, "m", []byte("id"), false, false, nil, nil, nil)
		line, _, _ := bytes.Cut(out, []byte("\r\n"))
		if got := fmt.Sprintf("HTTP/1.1 %d %s", status, want); string(line) != got {
			t.Errorf("code %d: status line %q, want %q", code, line, got)
		}
	}
	// A status without a standard phrase (a filter may reject with any)
	// gets an empty one, never a made-up word.
	if line, _, _ := bytes.Cut(appendError(nil, 599, 59901, "m", nil, false, false, nil, nil, nil), []byte("\r\n")); string(line) != "HTTP/1.1 599 " {
		t.Errorf("status line %q for 599", line)
	}
}
