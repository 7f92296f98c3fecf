// The rings, the limiter and the writer: lines as they land in the file.

package accesslog

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool/loopstat"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// A full ring refuses the record and counts it; releasing makes room.
func TestRingDropsWhenFull(t *testing.T) {
	r := NewRing(3) // rounded up to 4
	if r.Len() != 4 {
		t.Fatalf("Len %d, want 4", r.Len())
	}
	for i := 0; i < 4; i++ {
		rec := r.Reserve()
		if rec == nil {
			t.Fatalf("slot %d refused", i)
		}
		rec.Status = uint16(200 + i)
		r.Commit()
	}
	if r.Reserve() != nil || r.Dropped() != 1 {
		t.Fatalf("a full ring gave a slot, or did not count the drop (%d)", r.Dropped())
	}
	if r.Pending() != 4 || r.At(0).Status != 200 || r.At(3).Status != 203 {
		t.Fatalf("Pending %d, oldest status %d: want 4 records from 200", r.Pending(), r.At(0).Status)
	}
	r.Release(1)
	if rec := r.Reserve(); rec == nil {
		t.Fatal("no slot after a release")
	} else {
		rec.Status = 204
	}
	r.Commit()
	for i, want := 0, uint16(201); want <= 204; i, want = i+1, want+1 {
		if got := r.At(i).Status; got != want {
			t.Fatalf("At(%d) status %d, want %d", i, got, want)
		}
	}
	r.Release(4)
	if r.Pending() != 0 {
		t.Fatalf("Pending %d after releasing everything", r.Pending())
	}
}

// One producer and one consumer on two goroutines: every record is either
// read once, in order, or counted as dropped (run under -race).
func TestRingConcurrent(t *testing.T) {
	r := NewRing(8)
	const n = 20000
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; i <= n; i++ {
			if rec := r.Reserve(); rec != nil {
				rec.BytesIn = int64(i)
				r.Commit()
			}
		}
	}()
	read, last := 0, int64(0)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for finished := false; ; {
		select {
		case <-done:
			finished = true
		default:
		}
		n := r.Pending() // read after done: everything published is counted
		for i := 0; i < n; i++ {
			if rec := r.At(i); rec.BytesIn <= last {
				t.Fatalf("record %d after %d: out of order or repeated", rec.BytesIn, last)
			} else {
				last = rec.BytesIn
			}
		}
		r.Release(n)
		read += n
		if finished && n == 0 {
			break
		}
	}
	if uint64(read)+r.Dropped() != n {
		t.Fatalf("read %d + dropped %d != %d", read, r.Dropped(), n)
	}
}

// Ten lines a second get through; the next allowed line reports how many
// were held back.
func TestLimiter(t *testing.T) {
	var l Limiter
	now := int64(5e9)
	for i := 0; i < ErrorLinesPerSecond; i++ {
		if ok, held := l.Allow(now); !ok || held != 0 {
			t.Fatalf("line %d: ok %v held %d", i, ok, held)
		}
	}
	for i := 0; i < 3; i++ {
		if ok, _ := l.Allow(now + 5e8); ok {
			t.Fatal("an 11th line within the second got through")
		}
	}
	if ok, held := l.Allow(now + 1e9); !ok || held != 3 {
		t.Fatalf("next second: ok %v held %d, want true 3", ok, held)
	}
	if l.Suppressed() != 3 {
		t.Fatalf("Suppressed %d, want 3", l.Suppressed())
	}
}

type namedFilter struct {
	filters.Base
}

func (namedFilter) Request(*filters.Exchange) filters.Verdict { return filters.Continue }

func testChain(t testing.TB) *filters.Chain {
	t.Helper()
	c, err := filters.NewChain([]filters.Filter{
		namedFilter{filters.Base{FilterName: "request_id", FilterOrder: 10}},
		namedFilter{filters.Base{FilterName: "auth", FilterOrder: 20}},
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fill makes rec a served request through chain.
func fill(rec *Record, chain *filters.Chain, path string) {
	*rec = Record{Start: loopstat.Now(), Duration: 1500e3, Upstream: 1200e3, BytesIn: 80, BytesOut: 120,
		Status: 200, Retries: 1, End: "served", Route: "api", Node: "10.0.0.1:80",
		Client: netip.MustParseAddr("192.0.2.7")}
	rec.Req.Set([]byte("GET"), []byte(path))
	rec.SetRequestID([]byte("abc123"))
	var tm [filters.MaxChain]filters.Timing
	tm[0].Self, tm[1].Self = 850, 3400
	rec.SetFilters(chain, &tm)
}

func startWriter(t *testing.T, o Options) *Writer {
	t.Helper()
	o.Loops = max(o.Loops, 1)
	o.RingSize = max(o.RingSize, 16)
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

func readLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// An access record becomes one JSON line with every field, in the file.
func TestWriterAccessLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	w := startWriter(t, Options{Path: path})
	r := w.Access(0)
	rec := r.Reserve()
	fill(rec, testChain(t), "/api/users/7")
	r.Commit()
	w.Stop()

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, data)
	if len(lines) != 1 {
		t.Fatalf("%d lines, want 1:\n%s", len(lines), data)
	}
	got := lines[0]
	want := map[string]any{"request_id": "abc123", "client_ip": "192.0.2.7", "method": "GET",
		"path": "/api/users/7", "status": 200.0, "route": "api", "upstream": "10.0.0.1:80",
		"bytes_in": 80.0, "bytes_out": 120.0, "duration_us": 1500.0, "upstream_us": 1200.0,
		"retries": 1.0, "end": "served"}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["code"]; ok {
		t.Errorf("a served request has a code: %v", got["code"])
	}
	ts, err := time.Parse(time.RFC3339Nano, got["time"].(string))
	if err != nil || time.Since(ts).Abs() > time.Minute {
		t.Errorf("time %v: %v", got["time"], err)
	}
	fs, _ := json.Marshal(got["filters"])
	if string(fs) != `[{"name":"request_id","self_ns":850},{"name":"auth","self_ns":3400}]` {
		t.Errorf("filters = %s", fs)
	}
}

// A long path is cut at MaxPath and flagged; invalid UTF-8 and control
// bytes still make valid JSON, and a path that looks like the boundary
// between two lines of a batch does not split its line.
func TestWriterOddPaths(t *testing.T) {
	var buf syncBuffer
	w := startWriter(t, Options{Path: Stdout})
	w.out = &buf
	r := w.Access(0)
	for _, p := range []string{"/" + strings.Repeat("a", 300), "/x\xff\x01\"y", `/a"},{"b\\",[`, `/},{"time":"x"}`} {
		rec := r.Reserve()
		fill(rec, nil, p)
		r.Commit()
	}
	w.Stop()
	lines := readLines(t, []byte(buf.String()))
	if len(lines) != 4 {
		t.Fatalf("%d lines:\n%s", len(lines), buf.String())
	}
	if p := lines[2]["path"].(string); p != `/a"},{"b\\",[` {
		t.Errorf("boundary-like path read back as %q", p)
	}
	if p := lines[3]["path"].(string); p != `/},{"time":"x"}` {
		t.Errorf("boundary-like path read back as %q", p)
	}
	if p := lines[0]["path"].(string); len(p) != MaxPath || lines[0]["path_truncated"] != true {
		t.Errorf("long path: %d bytes, path_truncated %v", len(p), lines[0]["path_truncated"])
	}
	if p := lines[1]["path"].(string); p != "/x\ufffd\x01\"y" {
		t.Errorf("odd path read back as %q", p)
	}
	if _, ok := lines[1]["filters"]; ok {
		t.Error("a route without filters logs a filters field")
	}
}

// Error records go to the error output even with the access log off, and
// name connect failures as such.
func TestWriterErrorLines(t *testing.T) {
	var errOut syncBuffer
	w := startWriter(t, Options{ErrorOut: &errOut})
	if w.Access(0) != nil {
		t.Fatal("an access ring with the access log off")
	}
	r := w.Errors(0)
	rec := r.Reserve()
	fill(rec, nil, "/down")
	rec.Status, rec.Code, rec.Message, rec.Suppressed = 502, 50201, "upstream connect failed", 4
	r.Commit()
	w.Event(Event{Level: LevelError, Event: "reload", Trigger: "SIGHUP", Triggers: 2, Error: "config: line 3: bad"})
	w.Stop()
	lines := readLines(t, []byte(errOut.String()))
	if len(lines) != 2 {
		t.Fatalf("%d lines:\n%s", len(lines), errOut.String())
	}
	var gw, reload map[string]any
	for _, l := range lines {
		if l["event"] == "reload" {
			reload = l
		} else {
			gw = l
		}
	}
	if gw["event"] != EventUpstreamConnectFailed || gw["status"] != 502.0 || gw["code"] != 50201.0 ||
		gw["upstream"] != "10.0.0.1:80" || gw["path"] != "/down" || gw["suppressed"] != 4.0 || gw["level"] != "error" {
		t.Errorf("gateway error line: %v", gw)
	}
	if reload["trigger"] != "SIGHUP" || reload["triggers"] != 2.0 || reload["error"] != "config: line 3: bad" || reload["time"] == nil {
		t.Errorf("reload line: %v", reload)
	}
}

// An idle writer sleeps (no ticker) once a pass finds every ring empty,
// and a loop's next record, access or error, wakes it: the line is written
// without anything else happening.
func TestWriterSleepsWhenIdleAndWakes(t *testing.T) {
	var buf, errOut syncBuffer
	w := startWriter(t, Options{Path: Stdout, ErrorOut: &errOut})
	w.out = &buf
	w.Start()
	for _, ring := range []*Ring{w.Access(0), w.Errors(0)} {
		waitFor(t, w.wake.sleeping.Load) // the writer sleeps
		rec := ring.Reserve()
		fill(rec, nil, "/after-idle")
		rec.Status, rec.Code, rec.Message = 502, 50201, "upstream connect failed"
		ring.Commit()
		out := &buf
		if ring == w.Errors(0) {
			out = &errOut
		}
		waitFor(t, func() bool { return strings.Contains(out.String(), "/after-idle") })
	}
	w.Stop()
}

// Reopen moves the lines to a new file at the same path, as logrotate
// needs after renaming the old one.
func TestWriterReopen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	w := startWriter(t, Options{Path: path})
	w.Start()
	put := func(p string) {
		r := w.Access(0)
		rec := r.Reserve()
		fill(rec, nil, p)
		r.Commit()
	}
	put("/before")
	waitFor(t, func() bool { b, _ := os.ReadFile(path); return bytes.Contains(b, []byte("/before")) })
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	w.Reopen()
	waitFor(t, func() bool { _, err := os.Stat(path); return err == nil })
	put("/after")
	w.Stop()
	old, _ := os.ReadFile(path + ".1")
	cur, _ := os.ReadFile(path)
	if !bytes.Contains(old, []byte("/before")) || bytes.Contains(old, []byte("/after")) || !bytes.Contains(cur, []byte("/after")) {
		t.Fatalf("after reopen: old file %q, new file %q", old, cur)
	}
}

// A reopen that cannot open the path keeps the lines going to the old
// file, and the error log says why.
func TestWriterReopenFails(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "access.log")
	var errOut syncBuffer
	w := startWriter(t, Options{Path: path, ErrorOut: &errOut})
	w.Start()
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(path, 0o755); err != nil { // a directory: no file opens there, even as root
		t.Fatal(err)
	}
	w.Reopen()
	waitFor(t, func() bool { return strings.Contains(errOut.String(), `"access_log_reopen"`) })
	r := w.Access(0)
	rec := r.Reserve()
	fill(rec, nil, "/after")
	r.Commit()
	w.Stop()
	if old, _ := os.ReadFile(path + ".1"); !bytes.Contains(old, []byte("/after")) {
		t.Fatalf("after a failed reopen the old file has %q, want the /after line", old)
	}
	line := readLines(t, []byte(errOut.String()))[0]
	if msg, _ := line["error"].(string); line["level"] != "error" || !strings.Contains(msg, "access_log") {
		t.Errorf("reopen error line: %v", line)
	}
}

// The cached per-second prefix and the hand-made microseconds read the
// same as time's own formatting.
func TestFormatterTime(t *testing.T) {
	var f formatter
	var buf [40]byte
	for _, ns := range []int64{0, 999, 1000, 1_700_000_000_000_001_000, 1_700_000_000_999_999_999, 1_700_000_001_000_000_000, 1_700_000_001_050_000_000} {
		want := time.Unix(0, ns).UTC().Format(timeLayout)
		if got := f.time(&buf, ns); got != want {
			t.Errorf("time(%d) = %q, want %q", ns, got, want)
		}
	}
}

// A pass that formats and writes a hundred access lines allocates once
// (one sonic call for the batch); an error line costs one.
// The first pass of a new writer, one access and one error line, does
// not compile sonic's encoders (thousands of allocations) while the
// gateway serves: New did.
func TestWriterFirstPassAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	w := startWriter(t, Options{Path: filepath.Join(t.TempDir(), "a.log"), ErrorOut: &bytes.Buffer{}})
	for _, r := range []*Ring{w.Access(0), w.Errors(0)} {
		rec := r.Reserve()
		fill(rec, nil, "/first")
		rec.Status, rec.Code = 502, 50201
		r.Commit()
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	w.pass()
	runtime.ReadMemStats(&after)
	if n := after.Mallocs - before.Mallocs; n > 100 {
		t.Fatalf("the first pass allocated %d times: the line encoders were compiled in it", n)
	}
}

func TestWriterPassAllocs(t *testing.T) {
	pooltest.SkipAllocsUnderRace(t)
	w := startWriter(t, Options{Path: filepath.Join(t.TempDir(), "a.log"), RingSize: 128, ErrorOut: &bytes.Buffer{}})
	chain := testChain(t)
	put := func(r *Ring, n int) {
		for i := 0; i < n; i++ {
			fill(r.Reserve(), chain, "/api/users/7")
			r.Commit()
		}
	}
	if n := testing.AllocsPerRun(50, func() { put(w.Access(0), 100); w.pass() }); n > 1 {
		t.Errorf("a pass of 100 access lines allocates %v times, want at most 1", n)
	}
	if n := testing.AllocsPerRun(50, func() { put(w.Errors(0), 1); w.pass() }); n > 1 {
		t.Errorf("a pass with one error line allocates %v times, want at most 1", n)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestMain(m *testing.M) { pooltest.Main(m) }

// BenchmarkRecord is what a loop pays per request with the access log on:
// reserve a slot, fill it as the engine does, publish it (the consumer
// side only releases).
func BenchmarkRecord(b *testing.B) {
	r := NewRing(1024)
	chain := testChain(b)
	var req Request
	req.Set([]byte("GET"), []byte("/api/users/7"))
	var tm [filters.MaxChain]filters.Timing
	id := []byte("6a1f0c2e9b3d000000000007")
	client := netip.MustParseAddr("192.0.2.7")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		rec := r.Reserve()
		rec.Start, rec.Duration, rec.Upstream = 1, 2, 3
		rec.BytesIn, rec.BytesOut = 80, 120
		rec.Status, rec.Retries, rec.Code, rec.Suppressed = 200, 0, 0, 0
		rec.End, rec.Node, rec.Message, rec.Route = "served", "10.0.0.1:80", "", "api"
		rec.Req = req
		rec.SetRequestID(id)
		rec.Client = client
		rec.SetFilters(chain, &tm)
		r.Commit()
		r.Release(1)
	}
}

// BenchmarkWriterLine is what the writer goroutine pays per access line:
// formatting in batches and writing to a file.
func BenchmarkWriterLine(b *testing.B) {
	w, err := New(Options{Path: filepath.Join(b.TempDir(), "a.log"), Loops: 1, RingSize: 1024})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	chain := testChain(b)
	r := w.Access(0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += 256 {
		for j := 0; j < 256; j++ {
			fill(r.Reserve(), chain, "/api/users/7")
			r.Commit()
		}
		w.pass()
	}
}
