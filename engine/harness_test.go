// Test harness: a real gateway on a free port, real upstreams, raw clients.

package engine_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/pool/pooltest"
)

func TestMain(m *testing.M) { pooltest.Main(m) }

// gateway is a running Loopgate for one test.
type gateway struct {
	srv  *engine.Server
	addr string
}

// startGateway runs a gateway on the YAML config, with listen and admin
// filled in, and two loops unless the YAML sets loops. Upstream addresses
// are substituted with fmt-style args. It is shut down (and checked for
// leaks) when the test ends: see engine.ServeForTest.
func startGateway(t testing.TB, yaml string, args ...any) *gateway {
	t.Helper()
	return startGatewayWith(t, nil, yaml, args...)
}

// startGatewayWith is startGateway with prepare run on the server before
// it serves (to redirect its error log, say); prepare may be nil.
func startGatewayWith(t testing.TB, prepare func(*engine.Server), yaml string, args ...any) *gateway {
	t.Helper()
	text := "listen: 127.0.0.1:0\nadmin: \"off\"\n" + fmt.Sprintf(yaml, args...)
	if !strings.Contains(text, "\nloops:") {
		text = "loops: 2\n" + text
	}
	cfg, err := config.Parse([]byte(text))
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	srv, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(srv)
	}
	return &gateway{srv: srv, addr: engine.ServeForTest(t, srv)}
}

// testClient is the only net/http client the tests use: a regression that
// leaves a request unanswered fails after 10s instead of hanging the package.
var testClient = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}

// fetched is the outcome of one GET made with fetch.
type fetched struct {
	resp *http.Response
	body []byte
	err  error
}

// fetch GETs url with testClient and reads the whole body. It never fails
// the test, so it is safe off the test goroutine.
func fetch(url string) fetched {
	resp, err := testClient.Get(url)
	if err != nil {
		return fetched{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return fetched{resp: resp, body: body, err: err}
}

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// url returns the gateway URL for path.
func (g *gateway) url(path string) string { return "http://" + g.addr + path }

// dial opens a raw client connection to the gateway.
func (g *gateway) dial(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", g.addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	return c
}

// startUpstream runs an HTTP upstream for one test and returns its address.
func startUpstream(t testing.TB, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// startRawUpstream runs a TCP upstream whose every connection is handled by
// fn, for upstreams that misbehave on purpose.
func startRawUpstream(t testing.TB, fn func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				fn(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// oneRoute is the config for a single prefix route "/" to one upstream node.
const oneRoute = `
upstreams:
  - name: backend
    nodes: ["%s"]
routes:
  - id: all
    prefix: /
    upstream: backend
`

// errorBody is the JSON every gateway error carries.
type errorBody struct {
	Code      int    `json:"code"`
	Message   string `json:"message"`
	RequestID string `json:"request_id"`
}

// readResponse reads one response from a raw connection.
func readResponse(t *testing.T, br *bufio.Reader, method string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("reading response: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return resp, body
}

// expectError asserts a gateway JSON error with status and code.
func expectError(t *testing.T, resp *http.Response, body []byte, status, code int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, status, body)
	}
	var e errorBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body is not JSON: %q", body)
	}
	if e.Code != code || e.Message == "" || e.RequestID == "" {
		t.Fatalf("error body %+v, want code %d with message and request_id", e, code)
	}
	if got := resp.Header.Get("X-Request-Id"); got != e.RequestID {
		t.Fatalf("X-Request-Id %q, body request_id %q", got, e.RequestID)
	}
}

// rawExchange writes raw request bytes on a new connection and reads one response.
func (g *gateway) rawExchange(t *testing.T, raw string) (*http.Response, []byte) {
	t.Helper()
	return g.client(t).exchange(raw)
}

// expectServing asserts the gateway still answers a normal request.
func (g *gateway) expectServing(t *testing.T) {
	t.Helper()
	r := fetch(g.url("/still-serving"))
	if r.err != nil {
		t.Fatalf("gateway stopped serving: %v", r.err)
	}
	if r.resp.StatusCode != 200 {
		t.Fatalf("gateway stopped serving: status %d", r.resp.StatusCode)
	}
}

// okHandler answers 200 "ok".
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
