// Tests for the backend's request framing and its answers over a real socket.
package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
)

func TestNextRequestFraming(t *testing.T) {
	cases := []struct {
		name      string
		in        string
		used      int
		wantClose bool
		ok        bool
	}{
		{"incomplete head", "GET / HTTP/1.1\r\nHost: a\r\n", 0, false, false},
		{"simple", "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 27, false, true},
		{"close any case", "GET / HTTP/1.1\r\nconnection:  Close \r\n\r\n", 39, true, true},
		{"body counted", "POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET", 41, false, true},
		{"body incomplete", "POST / HTTP/1.1\r\nContent-Length: 3\r\n\r\nab", 0, false, false},
		{"pipelined takes first", "GET /a HTTP/1.1\r\n\r\nGET /b HTTP/1.1\r\n\r\n", 19, false, true},
	}
	for _, c := range cases {
		used, wantClose, ok := nextRequest([]byte(c.in))
		if used != c.used || wantClose != c.wantClose || ok != c.ok {
			t.Errorf("%s: got (%d, %v, %v), want (%d, %v, %v)",
				c.name, used, wantClose, ok, c.used, c.wantClose, c.ok)
		}
	}
}

func TestServeAnswersPipelinedRequestsThenCloses(t *testing.T) {
	client, server := net.Pipe()
	go serve(server, false)

	// Two keep-alive requests, the second split across writes, then a closing one.
	go func() {
		io.WriteString(client, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHo")
		io.WriteString(client, "st: a\r\n\r\n")
		io.WriteString(client, "GET /3 HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
	}()

	r := bufio.NewReader(client)
	for i := 1; i <= 3; i++ {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("response %d body: %v", i, err)
		}
		if resp.StatusCode != 200 || string(body) != "hello world\n" {
			t.Fatalf("response %d: status %d body %q", i, resp.StatusCode, body)
		}
	}
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("after Connection: close got %v, want EOF", err)
	}
}

// With -close the backend answers one request, says Connection: close and
// closes, whatever else the client sent.
func TestServeCloseEachAnswersOneRequest(t *testing.T) {
	client, server := net.Pipe()
	go serve(server, true)
	go io.WriteString(client, "GET /1 HTTP/1.1\r\nHost: a\r\n\r\nGET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
	r := bufio.NewReader(client)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(body) != "hello world\n" || !resp.Close {
		t.Fatalf("status %d body %q close %v, want 200 hello world and Connection: close", resp.StatusCode, body, resp.Close)
	}
	if _, err := r.ReadByte(); err != io.EOF {
		t.Fatalf("after the first response: %v, want EOF", err)
	}
}
