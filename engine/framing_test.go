// Upstream response framing: heads split across reads, desync attempts,
// canonical chunks, 502 instead of silence, interim responses.

package engine_test

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// splitSizes are the piece sizes a real network produces: one byte at a
// time, then small odd pieces.
var splitSizes = [][]int{{1}, {3}, {13}}

func TestResponseSplitAcrossReads(t *testing.T) {
	cases := []struct {
		name, method, resp, body string
	}{
		{"content-length", "GET", "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nX-A: 1\r\n\r\nhello world", "hello world"},
		{"chunked", "GET", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", "hello world"},
		{"not-modified", "GET", "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n", ""},
		{"head", "HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\n", ""},
		{"until-close", "GET", "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nhello world", "hello world"},
	}
	// One upstream for every case: the path names the response and the
	// piece size it is written in.
	type script struct {
		resp  string
		sizes []int
	}
	scripts := map[string]script{}
	for _, sizes := range splitSizes {
		for _, tc := range cases {
			scripts[fmt.Sprintf("/%s/%d", tc.name, sizes[0])] = script{tc.resp, sizes}
		}
	}
	up := startScriptedUpstream(t, func(c *upConn) {
		for {
			r, err := c.read()
			if err != nil {
				return
			}
			sc := scripts[r.req.URL.Path]
			if c.writeSplit(sc.resp, sc.sizes...) != nil || strings.Contains(sc.resp, "Connection: close") {
				return
			}
		}
	})
	g := startGateway(t, oneRoute, up.addr)
	for _, sizes := range splitSizes {
		for _, tc := range cases {
			path := fmt.Sprintf("/%s/%d", tc.name, sizes[0])
			t.Run(path[1:], func(t *testing.T) {
				c := g.client(t)
				for i := 0; i < 2; i++ { // the second reuses a pooled connection
					c.send(tc.method + " " + path + " HTTP/1.1\r\nHost: test\r\n\r\n")
					resp, body := readResponse(t, c.br, tc.method)
					want := 200
					if tc.name == "not-modified" {
						want = 304
					}
					if resp.StatusCode != want || string(body) != tc.body {
						t.Fatalf("request %d: status %d body %q, want %d %q", i, resp.StatusCode, body, want, tc.body)
					}
				}
			})
		}
	}
}

// A header value that looks like a status line, and a body that is itself a
// complete response: if the head were misparsed across reads, the client
// would get a 204 and the next request the body as its response.
const desyncBody = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nSMUGGL"

var desyncResponse = fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nX-R: HTTP/1.1 204 No Content\r\n\r\n%s", len(desyncBody), desyncBody)

// TestResponseSplitAtEveryOffsetNoDesync writes desyncResponse in two
// pieces cut at every offset, and in three at a sample of cut pairs, each
// followed by another client's request on the pooled connection.
func TestResponseSplitAtEveryOffsetNoDesync(t *testing.T) {
	var splits [][]int // cut points, in order
	for a := 1; a < len(desyncResponse); a++ {
		splits = append(splits, []int{a})
	}
	for a := 1; a < 60; a += 7 {
		for b := a + 1; b < 90; b += 11 {
			splits = append(splits, []int{a, b})
		}
	}
	// /split/A[/B] is answered with desyncResponse cut at A (and B);
	// anything else with "next".
	up := startScriptedUpstream(t, func(c *upConn) {
		for {
			r, err := c.read()
			if err != nil {
				return
			}
			resp, cuts := "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nnext", []int(nil)
			if rest, ok := strings.CutPrefix(r.req.URL.Path, "/split/"); ok {
				resp = desyncResponse
				for _, f := range strings.Split(rest, "/") {
					n, _ := strconv.Atoi(f)
					cuts = append(cuts, n)
				}
			}
			from := 0
			for _, cut := range append(cuts, len(resp)) {
				if from > 0 {
					pause()
				}
				if cut > len(resp) {
					cut = len(resp)
				}
				if _, err := c.Write([]byte(resp[from:cut])); err != nil {
					return
				}
				from = cut
			}
		}
	})
	g := startGateway(t, "loops: 1\n"+oneRoute, up.addr)
	// Two clients on the one loop share the pooled upstream connection: the
	// second must get its own response, never the first one's leftovers.
	c, c2 := g.client(t), g.client(t)
	for _, cuts := range splits {
		path := "/split"
		for _, cut := range cuts {
			path += "/" + strconv.Itoa(cut)
		}
		c.send("GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n")
		got := c.rawResponse("GET")
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(got, []byte(desyncBody)) || !bytes.Contains(got, []byte("X-R: HTTP/1.1 204 No Content\r\n")) {
			t.Fatalf("split %v: client got %q", cuts, got)
		}
		if resp, body := c2.get("/next"); resp.StatusCode != 200 || string(body) != "next" {
			t.Fatalf("split %v: the next request got %d %q", cuts, resp.StatusCode, body)
		}
	}
	if n := up.connections(); n != 1 {
		t.Fatalf("%d upstream connections, want the one pooled connection throughout", n)
	}
}

func TestResponseChunkedIsCanonical(t *testing.T) {
	ugly := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"5;name=value\r\nhello\r\n0006;a=\"q;x\"\r\n world\r\n0;last\r\nX-Checksum: abc\r\nContent-Length: 9\r\n\r\n"
	// /N is answered in pieces of N bytes (0: one write).
	up := startScriptedUpstream(t, func(c *upConn) {
		for {
			r, err := c.read()
			if err != nil {
				return
			}
			size, _ := strconv.Atoi(r.req.URL.Path[1:])
			if c.writeSplit(ugly, size) != nil {
				return
			}
		}
	})
	g := startGateway(t, oneRoute, up.addr)
	for _, size := range []int{0, 7, 1} {
		path := "/" + strconv.Itoa(size)
		c := g.client(t)
		c.send("GET " + path + " HTTP/1.1\r\nHost: test\r\n\r\n")
		payload, trailers := canonicalChunks(t, c.rawResponse("GET"))
		if payload != "hello world" || trailers != "" {
			t.Fatalf("split %d: payload %q trailers %q", size, payload, trailers)
		}
		// A client that accepts trailers gets them, minus forbidden fields.
		c.send("GET " + path + " HTTP/1.1\r\nHost: test\r\nTE: trailers\r\n\r\n")
		payload, trailers = canonicalChunks(t, c.rawResponse("GET"))
		if payload != "hello world" || trailers != "X-Checksum: abc\r\n" {
			t.Fatalf("split %d with TE: trailers: payload %q trailers %q", size, payload, trailers)
		}
	}
}

// canonicalChunks checks that a chunked response's body is in canonical
// form (bare lower-case hex sizes without leading zeros, no extensions) and
// returns its payload and trailer section.
func canonicalChunks(t *testing.T, resp []byte) (payload, trailers string) {
	t.Helper()
	s := string(resp)
	i := strings.Index(s, "\r\n\r\n")
	if !strings.Contains(s[:i+2], "\r\nTransfer-Encoding: chunked\r\n") {
		t.Fatalf("not chunked: %q", s)
	}
	body := s[i+4:]
	var p strings.Builder
	for {
		nl := strings.Index(body, "\r\n")
		line := body[:nl]
		size, err := strconv.ParseUint(line, 16, 32)
		if err != nil || line != strconv.FormatUint(size, 16) {
			t.Fatalf("size line %q is not canonical in %q", line, s)
		}
		body = body[nl+2:]
		if size == 0 {
			if !strings.HasSuffix(body, "\r\n") {
				t.Fatalf("no final CRLF: %q", s)
			}
			return p.String(), body[:len(body)-2]
		}
		p.WriteString(body[:size])
		if body[size:size+2] != "\r\n" {
			t.Fatalf("no CRLF after chunk data in %q", s)
		}
		body = body[size+2:]
	}
}

func TestResponseBadChunkBecomes502(t *testing.T) {
	firstLines := []string{"zz\r\n", "ffffffffffffffffff\r\n", "2 junk\r\n", "5\nhello\n", "25  \r\n", "2;\r\n", "5;a=\"abc;x\r\n"}
	// /N is answered with the N-th bad first chunk line.
	up := startScriptedUpstream(t, serveEach(func(r *rawRequest) string {
		i, _ := strconv.Atoi(r.req.URL.Path[1:])
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + firstLines[i] + "hello\r\n0\r\n\r\n"
	}))
	g := startGateway(t, oneRoute, up.addr)
	for i, firstLine := range firstLines {
		t.Run(strings.TrimSpace(firstLine), func(t *testing.T) {
			resp, body := g.client(t).get("/" + strconv.Itoa(i))
			expectError(t, resp, body, 502, 50202)
		})
	}
}

func TestResponseInterimForwarded(t *testing.T) {
	up := startScriptedUpstream(t, serveEach(func(r *rawRequest) string {
		return "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n" +
			"HTTP/1.1 102 Processing\r\n\r\n" +
			"\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	}, 5))
	g := startGateway(t, oneRoute, up.addr)

	c := g.client(t)
	c.send("GET /x HTTP/1.1\r\nHost: test\r\n\r\n")
	var all bytes.Buffer
	for i := 0; i < 3; i++ {
		line, err := c.br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		all.WriteString(line)
		for line != "\r\n" {
			if line, err = c.br.ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			all.WriteString(line)
		}
	}
	got := all.String()
	want := "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 200 OK\r\n"
	if !strings.HasPrefix(got, want) {
		t.Fatalf("client got %q, want it to start with %q", got, want)
	}

	// HTTP/1.0 clients never see interim responses.
	c10 := g.client(t)
	c10.send("GET /x HTTP/1.0\r\nHost: test\r\n\r\n")
	got10 := string(c10.rawResponse("GET"))
	if !strings.HasPrefix(got10, "HTTP/1.1 200 OK\r\n") {
		t.Fatalf("HTTP/1.0 client got %q", got10)
	}
	resp, _ := http.ReadResponse(c10.br, nil)
	if resp != nil {
		t.Fatalf("HTTP/1.0 client got a second response %d", resp.StatusCode)
	}
}
