// Body integrity: random bodies of every size and framing cross the proxy
// byte for byte in both directions, checked by SHA-256 at each end.

package engine_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Headers the echo upstreams report what they received in.
const (
	pxHashHeader    = "X-Body-Sha256" // SHA-256 of the request body as received
	pxFramingHeader = "X-Req-Framing" // "chunked", or "length N", or "none"
)

// pxRandom returns n random bytes from a fixed seed.
func pxRandom(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func pxSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// pxFraming describes how a request body arrived at the upstream.
func pxFraming(r *http.Request) string {
	switch {
	case len(r.TransferEncoding) > 0:
		return strings.Join(r.TransferEncoding, ",")
	case r.Header.Get("Content-Length") != "":
		return "length " + r.Header.Get("Content-Length")
	}
	return "none"
}

// pxPieces splits b into random pieces of 1 byte to 96 KiB.
func pxPieces(b []byte, rng *rand.Rand) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		n := 1 + rng.Intn(96<<10)
		if rng.Intn(8) == 0 {
			n = 1 + rng.Intn(16) // some tiny ones
		}
		n = min(n, len(b))
		out = append(out, b[:n])
		b = b[n:]
	}
	return out
}

// echoLengthHandler echoes the body with a Content-Length.
var echoLengthHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	w.Header().Set(pxHashHeader, pxSum(body))
	w.Header().Set(pxFramingHeader, pxFraming(r))
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
})

// echoChunkedHandler echoes the body in flushed random pieces without a
// length, so net/http sends it chunked.
var echoChunkedHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	w.Header().Set(pxHashHeader, pxSum(body))
	w.Header().Set(pxFramingHeader, pxFraming(r))
	f := w.(http.Flusher)
	f.Flush() // headers out now: chunked even for an empty body
	for _, p := range pxPieces(body, rand.New(rand.NewSource(int64(len(body))))) {
		w.Write(p)
		f.Flush()
	}
})

// echoUntilClose echoes the body with neither length nor chunking, in
// random pieces, and ends it by closing the connection.
func echoUntilClose(c net.Conn) {
	br := bufio.NewReader(c)
	r, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	head := "HTTP/1.1 200 OK\r\n" + pxHashHeader + ": " + pxSum(body) + "\r\n" +
		pxFramingHeader + ": " + pxFraming(r) + "\r\nContent-Type: application/octet-stream\r\n\r\n"
	if _, err := io.WriteString(c, head); err != nil {
		return
	}
	for _, p := range pxPieces(body, rand.New(rand.NewSource(int64(len(body))))) {
		if _, err := c.Write(p); err != nil {
			return
		}
	}
	// The caller closes c: an orderly FIN ends the body.
}

// writeChunked writes body as a chunked request body with random chunk
// sizes, some chunks with extensions and upper-case hex.
func writeChunked(w io.Writer, body []byte, seed int64) error {
	rng := rand.New(rand.NewSource(seed))
	for _, p := range pxPieces(body, rng) {
		size := strconv.FormatInt(int64(len(p)), 16)
		if rng.Intn(2) == 0 {
			size = strings.ToUpper(size)
		}
		if rng.Intn(5) == 0 {
			size += ";ext=v"
		}
		if _, err := io.WriteString(w, size+"\r\n"); err != nil {
			return err
		}
		if _, err := w.Write(p); err != nil {
			return err
		}
		if _, err := io.WriteString(w, "\r\n"); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "0\r\n\r\n")
	return err
}

// integrityCase is one direction of framing for the test matrix.
type integrityCase struct {
	name        string
	prefix      string // route to the matching upstream
	chunkedReq  bool   // send the request body chunked
	wantChunked bool   // the client must get the response chunked
	wantLength  bool   // the client must get a Content-Length
}

func TestProxyBodyIntegrity(t *testing.T) {
	lengthUp := startUpstream(t, echoLengthHandler)
	chunkedUp := startUpstream(t, echoChunkedHandler)
	closeUp := startRawUpstream(t, echoUntilClose)
	g := startGateway(t, `
upstreams:
  - name: length
    nodes: ["%s"]
  - name: chunked
    nodes: ["%s"]
  - name: close
    nodes: ["%s"]
routes:
  - prefix: /length/
    upstream: length
  - prefix: /chunked/
    upstream: chunked
  - prefix: /close/
    upstream: close
`, lengthUp, chunkedUp, closeUp)

	cases := []integrityCase{
		{name: "length", prefix: "/length/", wantLength: true},
		{name: "chunked", prefix: "/chunked/", chunkedReq: true, wantChunked: true},
		{name: "close-delimited/length-req", prefix: "/close/", wantChunked: true},
		{name: "close-delimited/chunked-req", prefix: "/close/", chunkedReq: true, wantChunked: true},
	}
	sizes := []struct {
		name string
		n    int
	}{{"0B", 0}, {"1KiB", 1 << 10}, {"1MiB", 1 << 20}, {"10MiB", 10 << 20}}

	for ci, tc := range cases {
		for si, size := range sizes {
			t.Run(tc.name+"/"+size.name, func(t *testing.T) {
				seed := int64(ci*100 + si + 1)
				body := pxRandom(size.n, seed)
				c := g.client(t)
				checkEcho(t, c, tc, tc.prefix+"echo", body, seed)
				// The connection stays in sync for another exchange.
				checkEcho(t, c, tc, tc.prefix+"again", []byte("second request"), seed+1)
			})
		}
	}
}

// checkEcho sends body as a POST on c and checks the echoed response.
func checkEcho(t *testing.T, c *rawClient, tc integrityCase, path string, body []byte, seed int64) {
	t.Helper()
	want := pxSum(body)
	wrote := make(chan error, 1)
	go func() { // write while the response streams back
		var err error
		if tc.chunkedReq {
			_, err = io.WriteString(c, "POST "+path+" HTTP/1.1\r\nHost: test\r\nTransfer-Encoding: chunked\r\n\r\n")
			if err == nil {
				err = writeChunked(c, body, seed)
			}
		} else {
			_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: test\r\nContent-Length: %d\r\n\r\n", path, len(body))
			if err == nil {
				_, err = c.Write(body)
			}
		}
		wrote <- err
	}()

	resp, err := http.ReadResponse(c.br, &http.Request{Method: "POST"})
	if err != nil {
		t.Fatalf("reading response: %v (request write: %v)", err, drainErr(wrote))
	}
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		t.Fatalf("status %d: %s (request write: %v)", resp.StatusCode, msg, drainErr(wrote))
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading body after %d bytes: %v (request write: %v)", n, err, drainErr(wrote))
	}
	if err := <-wrote; err != nil {
		t.Fatalf("writing request: %v", err)
	}
	if got := resp.Header.Get(pxHashHeader); got != want {
		t.Fatalf("upstream received a different body: sha %s, want %s", got, want)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != want || n != int64(len(body)) {
		t.Fatalf("client received %d bytes sha %s, want %d bytes sha %s", n, got, len(body), want)
	}
	// A chunked body within request_buffer_bytes (64KiB) is held whole and
	// sent with a Content-Length, as nginx does; a longer one streams
	// chunked.
	wantFraming := "length " + strconv.Itoa(len(body))
	if tc.chunkedReq && len(body) > 64<<10 {
		wantFraming = "chunked"
	}
	if got := resp.Header.Get(pxFramingHeader); got != wantFraming {
		t.Fatalf("upstream got the body framed as %q, want %q", got, wantFraming)
	}
	chunked := len(resp.TransferEncoding) == 1 && resp.TransferEncoding[0] == "chunked"
	switch {
	case tc.wantChunked && !chunked:
		t.Fatalf("response framing %q, length %d; want chunked", resp.TransferEncoding, resp.ContentLength)
	case tc.wantLength && resp.ContentLength != int64(len(body)):
		t.Fatalf("response Content-Length %d, want %d", resp.ContentLength, len(body))
	}
	if resp.Close {
		t.Fatalf("gateway closes the client connection after a %s response", tc.name)
	}
}

// drainErr returns the writer's result if it has finished, for messages.
func drainErr(ch chan error) error {
	select {
	case err := <-ch:
		return err
	default:
		return fmt.Errorf("still writing")
	}
}

// TestProxyLargeDownload sends large responses to a client reading as fast
// as it can: responses have no size limit, so none may be cut. The small
// max_conn_buffer makes a missing backpressure show every time rather than
// only when the upstream outpaces the client by 4 MiB; a client that reads
// must never be mistaken for one that does not.
func TestProxyLargeDownload(t *testing.T) {
	const size = 24 << 20
	body := pxRandom(size, 99)
	want := pxSum(body)
	serve := func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/small" {
			io.WriteString(w, "small")
			return
		}
		if r.URL.Path == "/length" {
			w.Header().Set("Content-Length", strconv.Itoa(size))
		}
		for _, p := range pxPieces(body, rand.New(rand.NewSource(7))) {
			if _, err := w.Write(p); err != nil {
				return
			}
		}
	}
	up := startUpstream(t, http.HandlerFunc(serve))
	closeUp := startScriptedUpstream(t, func(c *upConn) {
		if _, err := c.read(); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
		c.Write(body)
	})
	g := startGateway(t, `
limits:
  max_conn_buffer: 64KiB
upstreams:
  - name: up
    nodes: ["%s"]
  - name: close
    nodes: ["%s"]
routes:
  - prefix: /close
    upstream: close
  - prefix: /
    upstream: up
`, up, closeUp.addr)
	for _, path := range []string{"/length", "/chunked", "/close"} {
		t.Run(path[1:], func(t *testing.T) {
			c := g.client(t)
			c.send("GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n")
			resp, err := http.ReadResponse(c.br, &http.Request{Method: "GET"})
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			n, err := io.Copy(h, resp.Body)
			resp.Body.Close()
			if err != nil || n != size || hex.EncodeToString(h.Sum(nil)) != want {
				t.Fatalf("status %d: got %d of %d bytes (err %v), sha match %v", resp.StatusCode, n, size, err, hex.EncodeToString(h.Sum(nil)) == want)
			}
			if resp, body := c.get("/small"); resp.StatusCode != 200 || string(body) != "small" {
				t.Fatalf("second request: %d %q", resp.StatusCode, body)
			}
		})
	}
}
