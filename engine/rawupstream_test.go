// A raw-TCP test upstream that records the exact bytes the gateway sends and
// misbehaves on demand: split writes, stalls, extra bytes, 101s, bytes on an
// idle connection. Use it wherever net/http would normalise away what a test
// means to see.

package engine_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// rawUpstream is a scripted upstream. Every accepted connection runs script.
type rawUpstream struct {
	addr string

	mu    sync.Mutex
	conns int          // connections accepted
	ended int          // connections whose script has returned
	reqs  []rawRequest // every request read, in arrival order
}

// rawRequest is one request as it arrived on the wire.
type rawRequest struct {
	conn int    // which upstream connection (from 0)
	seq  int    // which request on it (from 0)
	head []byte // request line and fields, final CRLF included
	body []byte // body bytes exactly as sent (chunk framing included)
	req  *http.Request
}

// upConn is one upstream connection as a script sees it.
type upConn struct {
	net.Conn
	id  int
	seq int
	br  *bufio.Reader
	up  *rawUpstream
}

func startScriptedUpstream(t testing.TB, script func(c *upConn)) *rawUpstream {
	t.Helper()
	u := &rawUpstream{}
	u.addr = startRawUpstream(t, func(nc net.Conn) {
		u.mu.Lock()
		id := u.conns
		u.conns++
		u.mu.Unlock()
		script(&upConn{Conn: nc, id: id, br: bufio.NewReader(nc), up: u})
		u.mu.Lock()
		u.ended++
		u.mu.Unlock()
	})
	return u
}

// requests returns a copy of what the upstream has received so far.
func (u *rawUpstream) requests() []rawRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]rawRequest(nil), u.reqs...)
}

// connections returns how many connections the upstream accepted.
func (u *rawUpstream) connections() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conns
}

// finished returns how many connections' scripts have returned. With
// serveEach that is the connections the gateway closed (or that failed a
// write).
func (u *rawUpstream) finished() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ended
}

// read reads one request, recording its raw bytes. The body is read by its
// framing: Content-Length bytes, or chunks up to the last one and the
// trailer section.
func (c *upConn) read() (*rawRequest, error) {
	head, err := c.readHead()
	if err != nil {
		return nil, err
	}
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
	if err != nil {
		return nil, err
	}
	var body []byte
	switch {
	case len(req.TransferEncoding) > 0:
		for {
			line, err := c.br.ReadSlice('\n')
			body = append(body, line...)
			if err != nil {
				return nil, err
			}
			size, err := strconv.ParseInt(strings.TrimRight(string(line), "\r\n"), 16, 64)
			if err != nil {
				return nil, err
			}
			if size == 0 {
				for {
					tl, err := c.br.ReadSlice('\n')
					body = append(body, tl...)
					if err != nil {
						return nil, err
					}
					if string(tl) == "\r\n" {
						break
					}
				}
				break
			}
			chunk := make([]byte, size+2)
			if _, err := io.ReadFull(c.br, chunk); err != nil {
				return nil, err
			}
			body = append(body, chunk...)
		}
	case req.ContentLength > 0:
		body = make([]byte, req.ContentLength)
		if _, err := io.ReadFull(c.br, body); err != nil {
			return nil, err
		}
	}
	r := &rawRequest{conn: c.id, seq: c.seq, head: head, body: body, req: req}
	c.seq++
	c.up.mu.Lock()
	c.up.reqs = append(c.up.reqs, *r)
	c.up.mu.Unlock()
	return r, nil
}

// readHead reads one request head, final CRLF included, and neither parses
// nor records it: a head net/http would refuse (a second Host field, say)
// still reaches the script.
func (c *upConn) readHead() ([]byte, error) { return readHead(c.br) }

// readHead reads one head, through its blank line, from br.
func readHead(br *bufio.Reader) ([]byte, error) {
	var head []byte
	for !bytes.HasSuffix(head, []byte("\r\n\r\n")) {
		line, err := br.ReadSlice('\n')
		head = append(head, line...)
		if err != nil {
			return nil, err
		}
	}
	return head, nil
}

// hostLines returns the value of every Host field line in a raw head. Only
// the raw bytes can show a duplicate: net/http's Header never holds Host,
// and its parser refuses a second one.
func hostLines(head []byte) []string {
	var hosts []string
	for _, line := range strings.Split(string(head), "\r\n")[1:] {
		name, value, ok := strings.Cut(line, ":")
		if ok && strings.EqualFold(name, "Host") {
			hosts = append(hosts, strings.TrimSpace(value))
		}
	}
	return hosts
}

// writeSplit writes s in pieces of the given sizes (the last size repeats),
// pausing between them so each piece leaves as its own TCP segment and the
// gateway sees the response split exactly there.
func (c *upConn) writeSplit(s string, sizes ...int) error {
	if len(sizes) == 0 {
		sizes = []int{0}
	}
	for i := 0; len(s) > 0; i++ {
		n := sizes[min(i, len(sizes)-1)]
		if n > len(s) || n <= 0 {
			n = len(s)
		}
		if _, err := io.WriteString(c, s[:n]); err != nil {
			return err
		}
		s = s[n:]
		if len(s) > 0 {
			pause()
		}
	}
	return nil
}

// pause lets a written piece leave as its own TCP segment before the next,
// so the gateway reads it separately. It simulates the network; it is not
// used to wait for the gateway.
func pause() { time.Sleep(2 * time.Millisecond) }

// serveEach answers every request on the connection with respond's
// response, written in pieces of sizes (nil = one write).
func serveEach(respond func(r *rawRequest) string, sizes ...int) func(c *upConn) {
	if len(sizes) == 0 {
		sizes = []int{0}
	}
	return func(c *upConn) {
		for {
			r, err := c.read()
			if err != nil {
				return
			}
			if c.writeSplit(respond(r), sizes...) != nil {
				return
			}
		}
	}
}

// serveHeads is serveEach for bodiless requests taken as raw heads, never
// parsed: respond sees even a head net/http would refuse.
func serveHeads(respond func(head []byte) string) func(c *upConn) {
	return func(c *upConn) {
		for {
			head, err := c.readHead()
			if err != nil {
				return
			}
			if c.writeSplit(respond(head)) != nil {
				return
			}
		}
	}
}

// rawClient is a raw client connection to the gateway with its reader.
type rawClient struct {
	net.Conn
	br *bufio.Reader
	t  *testing.T
}

func (g *gateway) client(t *testing.T) *rawClient {
	c := g.dial(t)
	return &rawClient{Conn: c, br: bufio.NewReader(c), t: t}
}

// send writes raw bytes.
func (c *rawClient) send(s string) {
	c.t.Helper()
	if _, err := io.WriteString(c, s); err != nil {
		c.t.Fatalf("client write: %v", err)
	}
}

// get sends a GET for path and reads the response.
func (c *rawClient) get(path string) (*http.Response, []byte) {
	c.t.Helper()
	return c.exchange("GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n")
}

// exchange sends raw, a whole request, and reads one response (bodiless
// when raw is a HEAD).
func (c *rawClient) exchange(raw string) (*http.Response, []byte) {
	c.t.Helper()
	c.send(raw)
	method := "GET"
	if strings.HasPrefix(raw, "HEAD ") {
		method = "HEAD"
	}
	return readResponse(c.t, c.br, method)
}

// rawResponse reads one response and returns its exact bytes on the wire:
// the head, then the body by its framing, so tests can compare byte for
// byte. method is the request's method (HEAD has no body).
func (c *rawClient) rawResponse(method string) []byte {
	c.t.Helper()
	var out bytes.Buffer
	tee := bufio.NewReader(io.TeeReader(c.br, &out))
	resp, err := http.ReadResponse(tee, &http.Request{Method: method})
	if err != nil {
		c.t.Fatalf("reading response: %v (read %q)", err, out.Bytes())
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		c.t.Fatalf("reading body: %v (read %q)", err, out.Bytes())
	}
	resp.Body.Close()
	// The tee read ahead into tee's buffer; what it holds beyond this
	// response belongs to the next one, and goes back to c.br's reader.
	rest := out.Len() - tee.Buffered()
	extra := append([]byte(nil), out.Bytes()[rest:]...)
	c.br = bufio.NewReader(io.MultiReader(bytes.NewReader(extra), c.br))
	return out.Bytes()[:rest]
}
