// The response_body filter end to end: a scripted upstream delivering its
// responses byte by byte, in each framing, and a raw client reading them.

package engine_test

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/loopgate/loopgate/engine"
	"github.com/loopgate/loopgate/filters/respbody"
	"github.com/loopgate/loopgate/pool"
)

const respBodyRoute = `
upstreams:
  - name: backend
    nodes: ["%s"]
routes:
  - id: plain
    prefix: /plain/
    upstream: backend
  - id: second
    prefix: /second/
    upstream: backend
    response_body: {mask: [{path: $.user.phone}]}
  - id: quiet
    prefix: /quiet/
    upstream: backend
    response_body: {mask: [{path: $.user.phone}]}
  - id: all
    prefix: /
    upstream: backend
    response_body:
      max_bytes: 256B
      mask:
        - {path: $.user.phone, keep_last: 4}
        - {path: "$.items[*].card", replacement: "****"}
      remove: [$.user.password]
      envelope: '{"code":0,"data":<body>}'
      replace:
        - {status: [500], body: '{"code":50000,"message":"upstream failed"}'}
`

const (
	userJSON   = `{"user":{"name":"ada","phone":"13812345678","password":"s3cret"},"items":[{"card":"4111"},{"id":2}]}`
	userMasked = `{"code":0,"data":{"user":{"name":"ada","phone":"*******5678"},"items":[{"card":"****"},{"id":2}]}}`
)

const lastModified = "Wed, 21 Oct 2015 07:28:00 GMT"

// bigJSON is valid JSON over the route's max_bytes, with a field a mask
// would change: it must arrive exactly as sent.
var bigJSON = `{"user":{"phone":"13812345678"},"pad":"` + strings.Repeat("x", 600) + `"}`

func chunk(s string, size int) string {
	var b strings.Builder
	for len(s) > 0 {
		n := min(size, len(s))
		fmt.Fprintf(&b, "%x;ext=1\r\n%s\r\n", n, s[:n])
		s = s[n:]
	}
	return b.String() + "0\r\n\r\n"
}

func gzipped(s string) string {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.String()
}

// respBodyUpstream answers by path; the response is written in pieces of
// one byte (seven for the long bodies), so the gateway meets every split.
func respBodyUpstream(t *testing.T) *rawUpstream {
	clResp := func(status, ctype, extra, body string) string {
		return "HTTP/1.1 " + status + "\r\nContent-Type: " + ctype + "\r\n" + extra + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	chunked := func(ctype, body string, size int) string {
		return "HTTP/1.1 200 OK\r\nContent-Type: " + ctype + "\r\nTransfer-Encoding: chunked\r\n\r\n" + chunk(body, size)
	}
	return startScriptedUpstream(t, func(c *upConn) {
		for {
			r, err := c.read()
			if err != nil {
				return
			}
			path := r.req.URL.Path
			var resp string
			sizes := []int{1}
			path = strings.TrimPrefix(strings.TrimPrefix(path, "/plain"), "/second")
			switch path {
			case "/cl":
				resp = clResp("200 OK", "application/json; charset=utf-8", "ETag: \"v1\"\r\nLast-Modified: "+lastModified+"\r\n", userJSON)
			case "/badetag":
				resp = clResp("200 OK", "application/json", "etag: \"v2\"\r\nLast-Modified: "+lastModified+"\r\n", `{"user":`)
			case "/nomatch":
				resp = clResp("404 Not Found", "application/json", "ETag: W/\"v3\"\r\n", `{"id":1}`)
			case "/500empty":
				resp = clResp("500 Internal Server Error", "text/plain", "ETag: \"v4\"\r\n", "")
			case "/problem":
				resp = clResp("200 OK", "application/problem+json", "", userJSON)
			case "/chunked":
				resp = chunked("application/json", userJSON, 5)
			case "/bad":
				resp = clResp("200 OK", "application/json", "", `{"user":{"phone":"13812345678"`)
			case "/badchunked":
				resp = chunked("application/json", `{"user":`, 3)
			case "/big":
				resp, sizes = chunked("application/json", bigJSON, 50), []int{7}
			case "/bigcl":
				resp, sizes = clResp("200 OK", "application/json", "", bigJSON), []int{7}
			case "/gzip":
				resp = clResp("200 OK", "application/json", "Content-Encoding: gzip\r\n", gzipped(userJSON))
			case "/text":
				resp = clResp("200 OK", "text/plain", "", userJSON)
			case "/500":
				resp = clResp("500 Internal Server Error", "text/html", "Content-Encoding: gzip\r\n", gzipped("<h1>oops</h1>"))
			case "/404":
				resp = clResp("404 Not Found", "application/json", "", userJSON)
			case "/204":
				resp = "HTTP/1.1 204 No Content\r\n\r\n"
			case "/close":
				resp = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n" + userJSON
				c.writeSplit(resp, sizes...)
				return
			case "/trunc":
				c.writeSplit("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"use", 1)
				return
			default:
				resp = clResp("404 Not Found", "text/plain", "", "no such path")
			}
			if r.req.Method == "HEAD" {
				resp = resp[:strings.Index(resp, "\r\n\r\n")+4]
			}
			if c.writeSplit(resp, sizes...) != nil {
				return
			}
		}
	})
}

// TestResponseBody: each kind of response on one keep-alive connection,
// rewritten or passed through exactly, with the framing that fits.
func TestResponseBody(t *testing.T) {
	up := respBodyUpstream(t)
	g := startGateway(t, respBodyRoute, up.addr)
	c := g.client(t)
	cases := []struct {
		path, want string
		chunked    bool // the client gets a chunked body
		header     map[string]string
	}{
		// Rewritten: the ETag named the upstream's bytes and goes; the
		// rest of the head stays.
		{path: "/cl", want: userMasked, header: map[string]string{"ETag": "", "Last-Modified": lastModified, "Content-Type": "application/json; charset=utf-8"}},
		// Held and sent as it came: every header as the upstream sent it.
		{path: "/badetag", want: `{"user":`, header: map[string]string{"ETag": `"v2"`, "Last-Modified": lastModified}},
		{path: "/nomatch", want: `{"id":1}`, header: map[string]string{"ETag": `W/"v3"`}},
		// A replaced status: an empty body is replaced too.
		{path: "/500empty", want: `{"code":50000,"message":"upstream failed"}`, header: map[string]string{"Content-Type": "application/json", "ETag": ""}},
		{path: "/second/cl", want: `{"user":{"name":"ada","phone":"***","password":"s3cret"},"items":[{"card":"4111"},{"id":2}]}`},
		{path: "/problem", want: userMasked},
		{path: "/chunked", want: userMasked},
		{path: "/bad", want: `{"user":{"phone":"13812345678"`},
		{path: "/badchunked", want: `{"user":`},
		{path: "/big", want: bigJSON, chunked: true},
		{path: "/bigcl", want: bigJSON},
		{path: "/gzip", want: gzipped(userJSON), header: map[string]string{"Content-Encoding": "gzip"}},
		{path: "/text", want: userJSON},
		{path: "/404", want: `{"user":{"name":"ada","phone":"*******5678"},"items":[{"card":"****"},{"id":2}]}`}, // masked, not wrapped
		{path: "/500", want: `{"code":50000,"message":"upstream failed"}`, header: map[string]string{"Content-Type": "application/json", "Content-Encoding": ""}},
		{path: "/plain/cl", want: userJSON, header: map[string]string{"ETag": `"v1"`}},
		{path: "/204", want: ""},
		{path: "/cl", want: userMasked}, // the connection still serves after all of them
	}
	for _, tc := range cases {
		resp, body := c.get(tc.path)
		if string(body) != tc.want {
			t.Fatalf("%s: body %q, want %q", tc.path, body, tc.want)
		}
		if chunked := len(resp.TransferEncoding) > 0; chunked != tc.chunked {
			t.Fatalf("%s: chunked %v, want %v", tc.path, chunked, tc.chunked)
		}
		if !tc.chunked && tc.path != "/204" && resp.ContentLength != int64(len(tc.want)) {
			t.Fatalf("%s: Content-Length %d, want %d", tc.path, resp.ContentLength, len(tc.want))
		}
		for k, v := range tc.header {
			if got := resp.Header.Get(k); got != v {
				t.Fatalf("%s: %s %q, want %q", tc.path, k, got, v)
			}
		}
	}
	if n := up.connections(); n != 1 {
		t.Fatalf("the upstream saw %d connections, want 1 (kept alive across rewrites)", n)
	}
	counts, _ := engine.Service[*respbody.Counts](g.srv)
	want := map[string]uint64{"rewritten": 5, "invalid_json": 3, "over_limit": 2, "encoded": 1, "type": 1, "replaced": 2, "unchanged": 1}
	var metrics bytes.Buffer
	counts.WriteMetrics(&metrics)
	page := metrics.String()
	for o, n := range want {
		line := fmt.Sprintf("loopgate_response_body_total{route=\"all\",outcome=%q} %d\n", o, n)
		if !strings.Contains(page, line) {
			t.Errorf("metrics lack %q:\n%s", line, page)
		}
	}
	// Each route counts its own; a route no body passed through has no
	// series at all, nor has one without the filter.
	if line := `loopgate_response_body_total{route="second",outcome="rewritten"} 1` + "\n"; !strings.Contains(page, line) {
		t.Errorf("metrics lack %q:\n%s", line, page)
	}
	if strings.Count(page, `{route="second"`) != 1 || strings.Contains(page, `route="quiet"`) || strings.Contains(page, `route="plain"`) {
		t.Errorf("series beyond the routes and outcomes that happened:\n%s", page)
	}
}

// TestResponseBodyHeadAndClose: a HEAD is untouched; a body delimited by
// the upstream's close is rewritten and sent with a Content-Length, so the
// client's connection stays open.
func TestResponseBodyHeadAndClose(t *testing.T) {
	up := respBodyUpstream(t)
	g := startGateway(t, respBodyRoute, up.addr)
	c := g.client(t)
	resp, body := c.exchange("HEAD /cl HTTP/1.1\r\nHost: test\r\n\r\n")
	if len(body) != 0 || resp.ContentLength != int64(len(userJSON)) || resp.Header.Get("ETag") != `"v1"` {
		t.Fatalf("HEAD: length %d, ETag %q, body %q", resp.ContentLength, resp.Header.Get("ETag"), body)
	}
	resp, body = c.get("/close")
	if string(body) != userMasked || resp.ContentLength != int64(len(userMasked)) || resp.Close {
		t.Fatalf("/close: %q, length %d, close %v", body, resp.ContentLength, resp.Close)
	}
	if _, body = c.get("/cl"); string(body) != userMasked {
		t.Fatalf("after /close: %q", body)
	}
	// An HTTP/1.0 client: a held chunked body goes out with a length; one
	// that outgrows the hold is decoded and ends with the connection. Both
	// close it, as a chunked response to HTTP/1.0 does on any route: that
	// is decided from the head, before the body is held.
	resp, body = g.client(t).exchange("GET /chunked HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	if string(body) != userMasked || resp.ContentLength != int64(len(userMasked)) {
		t.Fatalf("HTTP/1.0 /chunked: %q, length %d", body, resp.ContentLength)
	}
	resp, body = g.client(t).exchange("GET /big HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
	if string(body) != bigJSON || !resp.Close {
		t.Fatalf("HTTP/1.0 /big: %q, close %v", body, resp.Close)
	}
}

// TestResponseBodyPipelined: requests sent together are answered in order,
// rewritten, streamed and passed through alike.
func TestResponseBodyPipelined(t *testing.T) {
	up := respBodyUpstream(t)
	g := startGateway(t, respBodyRoute, up.addr)
	c := g.client(t)
	paths := []string{"/chunked", "/big", "/bad", "/cl", "/gzip", "/500"}
	want := []string{userMasked, bigJSON, `{"user":{"phone":"13812345678"`, userMasked, gzipped(userJSON), `{"code":50000,"message":"upstream failed"}`}
	var reqs strings.Builder
	for _, p := range paths {
		reqs.WriteString("GET " + p + " HTTP/1.1\r\nHost: test\r\n\r\n")
	}
	c.send(reqs.String())
	for i, p := range paths {
		_, body := readResponse(t, c.br, "GET")
		if string(body) != want[i] {
			t.Fatalf("pipelined %s: %q, want %q", p, body, want[i])
		}
	}
}

// TestResponseBodyTruncated: an upstream that breaks off a held body gets
// the client a clean 502, since nothing of the response had left.
func TestResponseBodyTruncated(t *testing.T) {
	up := respBodyUpstream(t)
	g := startGateway(t, respBodyRoute, up.addr)
	resp, body := g.client(t).get("/trunc")
	expectError(t, resp, body, 502, 50202)
}

// TestResponseBodyBudget: with the process's buffer budget spent, a body
// streams untouched (and is counted) rather than being held.
func TestResponseBodyBudget(t *testing.T) {
	up := respBodyUpstream(t)
	g := startGateway(t, "limits: {max_buffered_bytes: 16B}\n"+respBodyRoute, up.addr)
	resp, body := g.client(t).get("/chunked")
	if string(body) != userJSON || len(resp.TransferEncoding) == 0 {
		t.Fatalf("over budget: %q (chunked %v), want the body untouched", body, resp.TransferEncoding)
	}
	counts, _ := engine.Service[*respbody.Counts](g.srv)
	var metrics bytes.Buffer
	counts.WriteMetrics(&metrics)
	if !strings.Contains(metrics.String(), `loopgate_response_body_total{route="all",outcome="budget"} 1`) {
		t.Fatalf("budget not counted:\n%s", metrics.String())
	}
	if n := g.srv.BufferedBytes(); n < 0 {
		t.Fatalf("buffered bytes %d after the hold ended", n)
	}
}

// TestResponseBodyClientGone: a client that leaves while its response is
// held takes nothing with it: the held bytes leave the buffer budget, and
// the pooled buffers go back (the leak check at the end of the test).
func TestResponseBodyClientGone(t *testing.T) {
	release := make(chan struct{})
	up := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.read(); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n{\"user\":\r\n")
		<-release
	})
	defer close(release)
	g := startGateway(t, respBodyRoute, up.addr)
	c := g.client(t)
	c.send("GET /held HTTP/1.1\r\nHost: test\r\n\r\n")
	waitFor(t, "the body held", func() bool { return g.srv.BufferedBytes() >= 8 })
	c.Close()
	waitFor(t, "the hold given back", func() bool { return g.srv.BufferedBytes() == 0 })
}

// TestResponseBodyChargesReserved: a held body with a Content-Length is
// reserved whole on its first bytes (route second: max_bytes 1 MiB), and the buffer budget is charged
// that, not the few bytes a slow upstream has sent: otherwise many such
// responses would hold max_bytes each past max_buffered_bytes.
func TestResponseBodyChargesReserved(t *testing.T) {
	const declared = 512 << 10
	release := make(chan struct{})
	up := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.read(); err != nil {
			return
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"user\":", declared)
		<-release
	})
	defer close(release)
	g := startGateway(t, respBodyRoute, up.addr)
	c := g.client(t)
	c.send("GET /second/held HTTP/1.1\r\nHost: test\r\n\r\n")
	waitFor(t, "the declared body charged", func() bool { return g.srv.BufferedBytes() >= declared })
	c.Close()
	waitFor(t, "the hold given back", func() bool { return g.srv.BufferedBytes() == 0 })
}

// benchJSON4K is the upstream's answer in the response_body benchmarks:
// the bench backend's 4 KiB JSON body.
var benchJSON4K = func() []byte {
	var body strings.Builder
	body.WriteString(`{"user":{"id":42,"name":"Ada Lovelace","phone":"13812345678","email":"ada@example.com"},"items":[`)
	for i := 0; body.Len() < 4096-80; i++ {
		if i > 0 {
			body.WriteByte(',')
		}
		fmt.Fprintf(&body, `{"id":%d,"sku":"SKU-%05d","card":"4111111111%06d","qty":%d}`, i, i, i, i%7)
	}
	body.WriteString(`],"total":12345}`)
	b := body.String() + strings.Repeat(" ", 4096-body.Len())
	return []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n" + b)
}()

const benchRespBodyRoute = `
metrics: {per_request: false}
filters: []
upstreams:
  - name: backend
    nodes: ["%s"]
routes:
  - id: all
    prefix: /
    upstream: backend
    response_body:
      mask: [{path: $.user.phone, keep_last: 4}, {path: "$.items[*].card", keep_last: 4}]
      remove: [$.user.email]
      envelope: '{"code":0,"data":<body>}'
`

// BenchmarkProxyJSON4K and BenchmarkProxyResponseBody: keep-alive round
// trips of a 4 KiB JSON response, passed through and rewritten (the bench
// rows' setup), allocations of the whole process counted.
func BenchmarkProxyJSON4K(b *testing.B) {
	benchmarkLargeProxy(b, metricsOff+"filters: []\n"+oneRoute)
}

func BenchmarkProxyResponseBody(b *testing.B) { benchmarkLargeProxy(b, benchRespBodyRoute) }

func benchmarkLargeProxy(b *testing.B, config string) {
	pool.SetLeakDetection(false)
	defer pool.SetLeakDetection(true)
	up := startRawUpstream(b, func(c net.Conn) { rawBenchServe(c, benchJSON4K) })
	g := startGateway(b, config, up)
	c, err := net.Dial("tcp", g.addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	// The first response, read by its framing, tells the size of every one.
	if _, err := c.Write(benchRequest); err != nil {
		b.Fatal(err)
	}
	first, want := make([]byte, 0, 64<<10), 0
	for want == 0 || len(first) < want {
		n, err := c.Read(first[len(first):cap(first)])
		if err != nil {
			b.Fatal(err)
		}
		first = first[:len(first)+n]
		if i := bytes.Index(first, []byte("\r\n\r\n")); want == 0 && i >= 0 {
			want = i + 4 + contentLength(first[:i])
		}
	}
	if bytes.Contains(first, []byte(`"phone":"13812345678"`)) == strings.Contains(config, "response_body") {
		b.Fatalf("response %.300q to config %q", first, config)
	}
	buf := make([]byte, 64<<10)
	roundTrip := func() {
		if _, err := c.Write(benchRequest); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadAtLeast(c, buf, want); err != nil {
			b.Fatal(err)
		}
	}
	for range 1000 {
		roundTrip()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		roundTrip()
	}
}
