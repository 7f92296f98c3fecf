// The admin endpoints over a real socket, and the Reloader's debouncing
// driven by a clock the test controls.

package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testClock hands the Reloader a window that ends when the test says so.
type testClock struct {
	windows chan chan time.Time // one per window the Reloader waits for
}

func newTestClock() *testClock { return &testClock{windows: make(chan chan time.Time, 16)} }

func (c *testClock) after(time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.windows <- ch
	return ch
}

// endWindow waits for the Reloader to start a window and ends it.
func (c *testClock) endWindow(t *testing.T) {
	t.Helper()
	select {
	case ch := <-c.windows:
		ch <- time.Now()
	case <-time.After(10 * time.Second):
		t.Fatal("the Reloader never started a window")
	}
}

func wait(t *testing.T, p *Pending) Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := p.Wait(ctx)
	if err != nil {
		t.Fatalf("waiting for the reload: %v", err)
	}
	return res
}

// Triggers within one window share one reload and its result.
func TestReloaderCoalescesABurst(t *testing.T) {
	clock := newTestClock()
	var calls atomic.Int32
	var reported []Result
	var mu sync.Mutex
	r := newReloader(func(ReloadOptions) (string, error) { return fmt.Sprintf("reload %d", calls.Add(1)), nil },
		func(res Result) { mu.Lock(); reported = append(reported, res); mu.Unlock() }, clock.after)
	defer r.Stop()

	var ps []*Pending
	for i := 0; i < 5; i++ {
		ps = append(ps, r.Trigger("SIGHUP"))
	}
	clock.endWindow(t)
	for _, p := range ps {
		if res := wait(t, p); res.Changes != "reload 1" || res.Triggers != 5 || res.Trigger != "SIGHUP" || res.Err != nil {
			t.Fatalf("result %+v, want reload 1 serving 5 SIGHUP triggers", res)
		}
	}
	if calls.Load() != 1 || len(reported) != 1 {
		t.Fatalf("%d reloads, %d reported, want 1 and 1", calls.Load(), len(reported))
	}
}

// Triggers that arrive while a reload runs share the next reload: a burst
// during a slow reload costs one more, not one each.
func TestReloaderQueuesDuringAReload(t *testing.T) {
	clock := newTestClock()
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	r := newReloader(func(ReloadOptions) (string, error) {
		n := calls.Add(1)
		if n == 1 {
			close(started)
			<-release
		}
		return fmt.Sprintf("reload %d", n), nil
	}, func(Result) {}, clock.after)
	defer r.Stop()

	first := r.Trigger("POST /reload")
	clock.endWindow(t)
	<-started
	var during []*Pending
	for i := 0; i < 3; i++ {
		during = append(during, r.Trigger("SIGHUP"))
	}
	close(release)
	if res := wait(t, first); res.Changes != "reload 1" || res.Triggers != 1 {
		t.Fatalf("first result %+v", res)
	}
	clock.endWindow(t)
	for _, p := range during {
		if res := wait(t, p); res.Changes != "reload 2" || res.Triggers != 3 {
			t.Fatalf("result %+v, want reload 2 serving 3 triggers", res)
		}
	}
	if calls.Load() != 2 {
		t.Fatalf("%d reloads, want 2", calls.Load())
	}
}

// Stop answers waiting triggers instead of leaving them hanging.
func TestReloaderStop(t *testing.T) {
	r := newReloader(func(ReloadOptions) (string, error) { return "", nil }, func(Result) {}, newTestClock().after)
	p := r.Trigger("SIGHUP")
	r.Stop()
	if res := wait(t, p); !errors.Is(res.Err, ErrStopped) {
		t.Fatalf("result %+v, want ErrStopped", res)
	}
}

// A trigger after Stop (POST /reload while the process drains) gets
// ErrStopped at once: no reload will ever serve it.
func TestReloaderTriggerAfterStop(t *testing.T) {
	r := newReloader(func(ReloadOptions) (string, error) { return "", nil }, func(Result) {}, newTestClock().after)
	r.Stop()
	if res := wait(t, r.Trigger("POST /reload")); !errors.Is(res.Err, ErrStopped) || res.Triggers != 1 {
		t.Fatalf("result %+v, want ErrStopped", res)
	}
}

type fakeGateway struct {
	ready    chan struct{}
	draining atomic.Bool
}

func (g *fakeGateway) Ready() <-chan struct{}   { return g.ready }
func (g *fakeGateway) Draining() bool           { return g.draining.Load() }
func (g *fakeGateway) WriteMetrics(w io.Writer) { io.WriteString(w, "loopgate_test_total 1\n") }

func (g *fakeGateway) UpstreamsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"upstreams":[]}`) })
}

func (g *fakeGateway) ErrorsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"lines":[]}`) })
}

func (g *fakeGateway) Summary(top int) any { return map[string]int{"top": top} }

func (g *fakeGateway) LimitsHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, `{"limits":[]}`) })
}

func startAdmin(t *testing.T, reload func(ReloadOptions) (string, error), opts Options) (*fakeGateway, string) {
	t.Helper()
	gw := &fakeGateway{ready: make(chan struct{})}
	r := NewReloader(reload, func(Result) {})
	t.Cleanup(r.Stop)
	s, err := Listen("127.0.0.1:0", gw, r, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return gw, "http://" + s.Addr()
}

var client = &http.Client{Timeout: 10 * time.Second}

// do sends method to url as a program would: a state change carries the
// intent header.
func do(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	if method != "GET" && method != "HEAD" {
		req.Header.Set(intentHeader, "1")
	}
	return send(t, req)
}

func send(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func TestHealthReadyMetricsPprof(t *testing.T) {
	gw, base := startAdmin(t, func(ReloadOptions) (string, error) { return "", nil }, Options{Pprof: true})
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/healthz", 200, "ok"},
		{"/readyz", 503, "starting"},
		{"/metrics", 200, "loopgate_test_total 1"},
	} {
		if code, body := do(t, "GET", base+c.path); code != c.code || body != c.body {
			t.Errorf("GET %s: %d %q, want %d %q", c.path, code, body, c.code, c.body)
		}
	}
	close(gw.ready)
	if code, body := do(t, "GET", base+"/readyz"); code != 200 || body != "ready" {
		t.Errorf("/readyz once ready: %d %q", code, body)
	}
	gw.draining.Store(true)
	if code, body := do(t, "GET", base+"/readyz"); code != 503 || body != "draining" {
		t.Errorf("/readyz while draining: %d %q", code, body)
	}
	if code, body := do(t, "GET", base+"/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/: %d", code)
	}
	if code, _ := do(t, "GET", base+"/debug/pprof/heap?debug=1"); code != 200 {
		t.Errorf("/debug/pprof/heap: %d", code)
	}
}

// registerOnDefaultMux registers TestOwnMux's handler once per process:
// http.DefaultServeMux panics at a second registration (go test -count=2).
var registerOnDefaultMux sync.Once

// The admin port has its own mux: what other code registers on
// http.DefaultServeMux is not served there.
func TestOwnMux(t *testing.T) {
	registerOnDefaultMux.Do(func() {
		http.HandleFunc("/admin-test-default-mux", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "leaked") })
	})
	_, base := startAdmin(t, func(ReloadOptions) (string, error) { return "", nil }, Options{})
	if code, body := do(t, "GET", base+"/admin-test-default-mux"); code != 404 {
		t.Fatalf("a DefaultServeMux handler answered on the admin port: %d %q", code, body)
	}
}

type errorBody struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
}

// POST /reload answers with the reload's result: what changed, or why not,
// with a status that tells a bad file from a refused config.
func TestReloadEndpoint(t *testing.T) {
	var next atomic.Value
	_, base := startAdmin(t, func(ReloadOptions) (string, error) {
		f := next.Load().(func() (string, error))
		return f()
	}, Options{})
	for _, c := range []struct {
		name   string
		reload func() (string, error)
		status int
		code   int
		text   string
	}{
		// The JSON is not HTML-escaped: "->" arrives as written, not as "-\u003e".
		{"applied", func() (string, error) { return "config v2: upstream u nodes a -> b", nil }, 200, 0, `"changes":"config v2: upstream u nodes a -> b"`},
		{"bad file", func() (string, error) {
			return "", &ConfigError{errors.New("config: line 3: routes[0].upstream: unknown upstream")}
		}, 422, 42201, "line 3"},
		{"refused", func() (string, error) {
			return "", errors.New("listen 127.0.0.1:8080 -> 127.0.0.1:9090 cannot change while running")
		}, 409, 40901, `"message":"listen 127.0.0.1:8080 -> 127.0.0.1:9090 cannot change while running"`},
	} {
		next.Store(c.reload)
		code, body := do(t, "POST", base+"/reload")
		if code != c.status || !strings.Contains(body, c.text) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, code, body, c.status, c.text)
			continue
		}
		if c.code != 0 {
			var e errorBody
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Code != c.code || e.RequestID == "" {
				t.Errorf("%s: body %s, want code %d and a request_id", c.name, body, c.code)
			}
		}
	}
	if code, body := do(t, "GET", base+"/reload"); code != 405 || !strings.Contains(body, "40501") {
		t.Errorf("GET /reload: %d %s", code, body)
	}
}

// POST /reload?allow_empty=1 asks its reload to apply a config that
// empties the routes; a plain POST does not, and a value that is not a
// boolean is refused before any reload.
func TestReloadEndpointAllowEmpty(t *testing.T) {
	var asked atomic.Value
	_, base := startAdmin(t, func(o ReloadOptions) (string, error) {
		asked.Store(o)
		return "ok", nil
	}, Options{})
	for _, c := range []struct {
		query string
		want  bool
	}{{"", false}, {"?allow_empty=1", true}, {"?allow_empty=true", true}, {"?allow_empty=0", false}} {
		if code, body := do(t, "POST", base+"/reload"+c.query); code != 200 {
			t.Fatalf("POST /reload%s: %d %s", c.query, code, body)
		}
		if o := asked.Load().(ReloadOptions); o.AllowEmpty != c.want {
			t.Errorf("POST /reload%s: the reload got %+v, want AllowEmpty %v", c.query, o, c.want)
		}
	}
	asked.Store(ReloadOptions{})
	code, body := do(t, "POST", base+"/reload?allow_empty=please")
	var e errorBody
	if code != 400 || json.Unmarshal([]byte(body), &e) != nil || e.Code != 40001 || !strings.Contains(e.Message, "allow_empty") {
		t.Errorf("POST /reload?allow_empty=please: %d %s, want 400 with code 40001", code, body)
	}
}

// POST /reload while the process drains (its Reloader stopped) answers
// 503 at once instead of waiting for a reload that never comes.
func TestReloadEndpointWhileDraining(t *testing.T) {
	gw := &fakeGateway{ready: make(chan struct{})}
	r := NewReloader(func(ReloadOptions) (string, error) { return "", nil }, func(Result) {})
	s, err := Listen("127.0.0.1:0", gw, r, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	r.Stop()
	code, body := do(t, "POST", "http://"+s.Addr()+"/reload")
	var e errorBody
	if code != 503 || json.Unmarshal([]byte(body), &e) != nil || e.Code != 50301 || e.RequestID == "" {
		t.Fatalf("POST /reload after Stop: %d %s, want 503 with code 50301", code, body)
	}
}
