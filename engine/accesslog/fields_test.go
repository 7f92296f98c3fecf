// Chosen fields and the error log's own file and level.

package accesslog

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// keysInOrder returns the top-level keys of one JSON object line, in the
// order they appear.
func keysInOrder(t *testing.T, line []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("line %q: not an object: %v", line, err)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
	}
	return keys
}

// A format writes exactly its fields, in its order, every one on every
// line (no value: "", 0 or null), and odd paths still make valid JSON,
// byte for byte as the standard line escapes them.
func TestWriterChosenFields(t *testing.T) {
	var buf syncBuffer
	fields := []string{"status", "time", "path", "route", "upstream_us", "code", "filters", "path_truncated", "request_id"}
	w := startWriter(t, Options{Path: Stdout, Fields: fields})
	w.out = &buf
	r := w.Access(0)
	odd := []string{"/api/users/7", "/x\xff\x01\"y\\", `/},{"time":"x"}`, "/é\u2028" + string([]byte{0xe2, 0x82})}
	for i, p := range odd {
		rec := r.Reserve()
		fill(rec, testChain(t), p)
		if i > 0 {
			rec.Chain, rec.Filters, rec.Upstream, rec.Route, rec.Code = nil, 0, -1, "", 40401
		}
		r.Commit()
	}
	w.Stop()
	// The standard line, for how it writes the same paths.
	var std syncBuffer
	sw := startWriter(t, Options{Path: Stdout})
	sw.out = &std
	for _, p := range odd {
		fill(sw.Access(0).Reserve(), nil, p)
		sw.Access(0).Commit()
	}
	sw.Stop()
	stdLines := readLines(t, []byte(std.String()))
	lines := bytes.Split(bytes.TrimSuffix([]byte(buf.String()), []byte("\n")), []byte("\n"))
	if len(lines) != len(odd) {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	for i, line := range lines {
		if got := strings.Join(keysInOrder(t, line), ","); got != strings.Join(fields, ",") {
			t.Errorf("line %d keys %s, want %s", i, got, strings.Join(fields, ","))
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		if want := stdLines[i]["path"]; m["path"] != want {
			t.Errorf("path %q read back as %q", want, m["path"])
		}
	}
	var first, other map[string]any
	_ = json.Unmarshal(lines[0], &first)
	_ = json.Unmarshal(lines[1], &other)
	if first["status"] != 200.0 || first["route"] != "api" || first["upstream_us"] != 1200.0 || first["code"] != 0.0 ||
		first["request_id"] != "abc123" || first["path_truncated"] != false {
		t.Errorf("first line: %v", first)
	}
	if fs, _ := json.Marshal(first["filters"]); string(fs) != `[{"name":"request_id","self_ns":850},{"name":"auth","self_ns":3400}]` {
		t.Errorf("filters = %s", fs)
	}
	if other["upstream_us"] != nil || other["route"] != "" || other["code"] != 40401.0 || len(other["filters"].([]any)) != 0 {
		t.Errorf("line without upstream, route or filters: %v", other)
	}
}

// Chosen fields are written without allocating.
func TestWriterChosenFieldsAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	w := startWriter(t, Options{Path: filepath.Join(t.TempDir(), "a.log"), RingSize: 128, ErrorOut: &bytes.Buffer{},
		Fields: []string{"time", "request_id", "client_ip", "method", "path", "status", "route", "upstream", "duration_us", "filters"}})
	chain := testChain(t)
	if n := testing.AllocsPerRun(50, func() {
		for i := 0; i < 100; i++ {
			fill(w.Access(0).Reserve(), chain, "/api/users/7")
			w.Access(0).Commit()
		}
		w.pass()
	}); n != 0 {
		t.Errorf("a pass of 100 access lines with chosen fields allocates %v times", n)
	}
}

// The error log goes to its own file, leaves out the lines below its
// level, and is reopened at its path by Reopen (logrotate), before and
// after Start.
func TestWriterErrorLogFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "error.log")
	w, err := New(Options{Loops: 1, RingSize: 16, ErrorPath: path, ErrorLevel: LevelWarn})
	if err != nil {
		t.Fatal(err)
	}
	w.Event(Event{Level: LevelInfo, Event: "reload", Changes: "quiet"})
	w.Event(Event{Level: LevelWarn, Event: "notice", Message: "before rotation"})
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	w.Reopen() // not started: at once
	w.Event(Event{Level: LevelError, Event: "notice", Message: "after rotation"})
	w.Start()
	if err := os.Rename(path, path+".2"); err != nil {
		t.Fatal(err)
	}
	w.Reopen()
	var third []byte
	waitFor(t, func() bool {
		w.Event(Event{Level: LevelWarn, Event: "notice", Message: "third file"})
		third, _ = os.ReadFile(path)
		return bytes.Contains(third, []byte("third file"))
	})
	w.Stop()
	one, _ := os.ReadFile(path + ".1")
	two, _ := os.ReadFile(path + ".2")
	if bytes.Contains(one, []byte("quiet")) || !bytes.Contains(one, []byte(`"level":"warn","event":"notice","message":"before rotation"`)) {
		t.Errorf("first file:\n%s", one)
	}
	if !bytes.Contains(two, []byte("after rotation")) || bytes.Contains(two, []byte("before rotation")) {
		t.Errorf("second file:\n%s", two)
	}
	for _, b := range [][]byte{one, two, third} {
		readLines(t, b) // every line JSON
	}
}

// The fields a format may name are the ones config validation accepts.
func TestFieldNamesMatchConfig(t *testing.T) {
	if got, want := strings.Join(fieldNames[:], ","), strings.Join(config.AccessLogFields, ","); got != want {
		t.Fatalf("accesslog fields %s, config accepts %s", got, want)
	}
}
