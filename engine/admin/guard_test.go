// The admin port's refusals and acceptances, over real sockets: the Host
// allow list, cross-site requests, state changes without intent, pprof,
// and the stacks an address binds.

package admin

import (
	"bufio"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// counting starts an admin port whose reloads are counted.
func counting(t *testing.T, opts Options) (base string, reloads *atomic.Int32) {
	t.Helper()
	reloads = new(atomic.Int32)
	_, base = startAdmin(t, func(ReloadOptions) (string, error) { reloads.Add(1); return "counted", nil }, opts)
	return base, reloads
}

// request builds a request with headers given as name, value pairs.
func request(method, url, body string, headers ...string) *http.Request {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i] == "Host" {
			req.Host = headers[i+1]
			continue
		}
		req.Header.Add(headers[i], headers[i+1])
	}
	return req
}

// refused checks a JSON error answer with status and code.
func refused(t *testing.T, what string, req *http.Request, status, code int) {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	e := errorBody{Code: code, RequestID: resp.Header.Get("X-Request-Id")} // what a HEAD answer can show
	var derr error
	if req.Method != "HEAD" {
		e = errorBody{}
		derr = json.NewDecoder(resp.Body).Decode(&e)
	}
	if resp.StatusCode != status || derr != nil || e.Code != code || e.RequestID == "" ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s: %d %q %+v (%v), want %d with JSON code %d", what, resp.StatusCode, resp.Header.Get("Content-Type"), e, derr, status, code)
	}
	if v := resp.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("%s: Access-Control-Allow-Origin %q", what, v)
	}
}

// A state change needs the intent header or a JSON body: the three
// content types a page may post cross-site without a preflight, and no
// content type at all (a fetch without a body), are refused before the
// handler runs; a preflight is refused too.
func TestStateChangeNeedsIntent(t *testing.T) {
	base, reloads := counting(t, Options{})
	for _, ct := range []string{"", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
		"text/plain", "text/plain;charset=UTF-8", "application/json-seq", "application/jsonx"} {
		req := request("POST", base+"/reload", "a=b")
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		refused(t, "POST /reload with Content-Type "+ct, req, 403, 40304)
	}
	refused(t, "PUT /reload", request("PUT", base+"/reload", ""), 403, 40304)
	refused(t, "DELETE /limits", request("DELETE", base+"/limits", ""), 403, 40304)
	refused(t, "preflight", request("OPTIONS", base+"/reload", "", "Origin", "http://evil.example",
		"Access-Control-Request-Method", "POST", "Access-Control-Request-Headers", "x-loopgate-admin"), 403, 40303)
	refused(t, "OPTIONS", request("OPTIONS", base+"/reload", ""), 403, 40304)
	if n := reloads.Load(); n != 0 {
		t.Fatalf("%d reloads ran from refused requests", n)
	}

	for _, h := range [][]string{
		{"Content-Type", "application/json"},
		{"Content-Type", "Application/JSON; charset=utf-8"},
		{"X-Loopgate-Admin", "1"},
		{"X-Loopgate-Admin", "1", "Content-Type", "application/x-www-form-urlencoded"}, // curl -d sends a form type
	} {
		if code, body := send(t, request("POST", base+"/reload", "{}", h...)); code != 200 || !strings.Contains(body, `"applied"`) {
			t.Errorf("POST /reload with %q: %d %s", h, code, body)
		}
	}
	if reloads.Load() == 0 {
		t.Fatal("no reload ran")
	}
}

// A request a browser marks as cross-site or cross-origin is refused on
// every path, even with the intent header; a typed URL and the admin
// port's own origin are served.
func TestCrossSiteRefused(t *testing.T) {
	base, reloads := counting(t, Options{})
	self := strings.TrimPrefix(base, "http://")
	_, port, _ := net.SplitHostPort(self)
	for _, h := range [][]string{
		{"Origin", "http://evil.example"},
		{"Origin", "null"},
		{"Origin", "http://127.0.0.1:1"},       // another port: another origin
		{"Origin", "https://" + self},          // another scheme
		{"Origin", "http://localhost:" + port}, // another host, though it is this machine
		{"Origin", "http://" + self, "Origin", "http://evil.example"},
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"}, // a page on another port of this host
		{"Sec-Fetch-Site", "same-origin", "Origin", "http://evil.example"},
	} {
		refused(t, "POST /reload with "+strings.Join(h, ": "), request("POST", base+"/reload", "", append(h, "X-Loopgate-Admin", "1")...), 403, 40303)
		refused(t, "POST /reload JSON with "+strings.Join(h, ": "), request("POST", base+"/reload", "{}", append(h, "Content-Type", "application/json")...), 403, 40303)
	}
	refused(t, "GET /metrics cross-site", request("GET", base+"/metrics", "", "Sec-Fetch-Site", "cross-site"), 403, 40303)
	refused(t, "GET /healthz from another origin", request("GET", base+"/healthz", "", "Origin", "http://evil.example"), 403, 40303)
	if n := reloads.Load(); n != 0 {
		t.Fatalf("%d reloads ran from refused requests", n)
	}

	for _, h := range [][]string{
		{"Origin", "http://" + self, "Sec-Fetch-Site", "same-origin"},
		{"Origin", "http://" + strings.ToUpper(self)},
		{"Sec-Fetch-Site", "none"},
	} {
		if code, body := send(t, request("POST", base+"/reload", "", append(h, "X-Loopgate-Admin", "1")...)); code != 200 {
			t.Errorf("POST /reload with %q: %d %s", h, code, body)
		}
	}
	if code, _ := send(t, request("GET", base+"/metrics", "", "Sec-Fetch-Site", "none")); code != 200 {
		t.Errorf("GET /metrics typed in the address bar: %d", code)
	}
}

// Only loopback, the connection's own address and the configured names
// are served, on every path: a page rebound to 127.0.0.1 sends its own
// name. The port is not compared.
func TestHostAllowList(t *testing.T) {
	base, reloads := counting(t, Options{Hosts: []string{"gw-admin.internal", "10.9.8.7", "[FD00::5]", "Admin.Example."}, Pprof: true})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	for _, host := range []string{"evil.example", "evil.example:" + port, "127.0.0.1.nip.io", "localhost.evil.example",
		"0.0.0.0:" + port, "10.9.8.70", "gw-admin.internal.evil.example", "[fd00::6]", "[::]", "example."} {
		for _, path := range []string{"/healthz", "/readyz", "/metrics", "/limits", "/upstreams", "/debug/pprof/", "/debug/pprof/heap"} {
			refused(t, "GET "+path+" Host "+host, request("GET", base+path, "", "Host", host), 421, 42101)
		}
		refused(t, "POST /reload Host "+host, request("POST", base+"/reload", "", "Host", host, "X-Loopgate-Admin", "1"), 421, 42101)
	}
	if n := reloads.Load(); n != 0 {
		t.Fatalf("%d reloads ran from refused requests", n)
	}

	for _, host := range []string{"localhost", "LocalHost.:" + port, "127.0.0.1:" + port, "127.9.9.9", "[::1]:" + port,
		"[::ffff:127.0.0.1]", "gw-admin.internal", "GW-Admin.Internal.:9901", "10.9.8.7", "[fd00::5]:1", "admin.example"} {
		if code, body := send(t, request("GET", base+"/metrics", "", "Host", host)); code != 200 {
			t.Errorf("GET /metrics Host %s: %d %s", host, code, body)
		}
	}

	// HTTP/1.0 without a Host (HAProxy's default httpchk): no browser sends
	// one, so it is served.
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET /healthz HTTP/1.0\r\n\r\n"))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("HTTP/1.0 without Host: %v %v", resp, err)
	}
}

// podListener reports each connection as arriving on a pod's address, as
// a kernel does for a socket bound to 0.0.0.0 that a kubelet probes.
type podListener struct {
	net.Listener
	addr *net.TCPAddr
}

func (l podListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return podConn{c, l.addr}, nil
}

type podConn struct {
	net.Conn
	addr *net.TCPAddr
}

func (c podConn) LocalAddr() net.Addr { return c.addr }

// The address a connection arrived on is served as a Host without being
// listed: a probe or scraper using the pod IP works with admin on 0.0.0.0.
func TestHostOfTheConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := serve(podListener{ln, &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 9901}}, &fakeGateway{ready: make(chan struct{})}, nil, Options{}, nil)
	t.Cleanup(func() { s.Close() })
	base := "http://" + ln.Addr().String()
	if code, body := send(t, request("GET", base+"/healthz", "", "Host", "10.1.2.3:9901")); code != 200 {
		t.Errorf("Host of the connection's address: %d %s", code, body)
	}
	refused(t, "Host of another address", request("GET", base+"/healthz", "", "Host", "10.1.2.4:9901"), 421, 42101)
}

// pprof is off unless enabled; on, a CPU profile or trace needs the
// intent header, whatever the method.
func TestPprofGuards(t *testing.T) {
	off, _ := counting(t, Options{})
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=0.01", "/debug/pprof/cmdline"} {
		refused(t, "pprof off: GET "+path, request("GET", off+path, ""), 404, 40401)
	}

	on, _ := counting(t, Options{Pprof: true})
	for _, path := range []string{"/debug/pprof/profile?seconds=1", "/debug/pprof/trace?seconds=0.01"} {
		refused(t, "GET "+path, request("GET", on+path, ""), 403, 40304)
		refused(t, "HEAD "+path, request("HEAD", on+path, ""), 403, 40304)
		refused(t, "GET "+path+" form", request("GET", on+path, "", "Content-Type", "text/plain"), 403, 40304)
	}
	if code, _ := send(t, request("GET", on+"/debug/pprof/trace?seconds=0.01", "", "X-Loopgate-Admin", "1")); code != 200 {
		t.Errorf("trace with the intent header: %d", code)
	}
	if code, _ := send(t, request("GET", on+"/debug/pprof/heap", "")); code != 200 {
		t.Errorf("heap: %d", code)
	}
}

// An address is bound as written: 0.0.0.0 on IPv4 only, [::] on IPv6
// only. Neither is loopback, so each warns; 127.0.0.1 and [::1] do not.
func TestListenBindsWhatIsWritten(t *testing.T) {
	for _, c := range []struct {
		addr     string
		serves   string // a loopback host that reaches it
		not      string // one that must not; "" for none
		loopback bool   // Listen serves it without tokens
	}{
		{"0.0.0.0:0", "127.0.0.1", "::1", false},
		{"[::]:0", "::1", "127.0.0.1", false},
		{"127.0.0.1:0", "127.0.0.1", "::1", true},
		{"[::1]:0", "::1", "127.0.0.1", true},
	} {
		s, err := Listen(c.addr, &fakeGateway{ready: make(chan struct{})}, nil, Options{})
		if !c.loopback {
			// Beyond loopback with no token: refused, saying why.
			if err == nil || !strings.Contains(err.Error(), "which is not loopback, and admin.tokens is empty") {
				t.Errorf("%s without tokens: %v, want the refusal", c.addr, err)
			}
			if s != nil {
				s.Close()
			}
			tok := Token{Name: "ops", Secret: "0123456789abcdef"}
			if s, err = Listen(c.addr, &fakeGateway{ready: make(chan struct{})}, nil, Options{Tokens: []Token{tok}, OpenReads: []string{"/healthz"}}); err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
		_, port, _ := net.SplitHostPort(s.Addr())
		if code, body := do(t, "GET", "http://"+net.JoinHostPort(c.serves, port)+"/healthz"); code != 200 {
			t.Errorf("%s via %s: %d %s", c.addr, c.serves, code, body)
		}
		if conn, err := net.Dial("tcp", net.JoinHostPort(c.not, port)); err == nil {
			conn.Close()
			t.Errorf("%s accepted a connection on %s", c.addr, c.not)
		}
		s.Close()
	}
}
