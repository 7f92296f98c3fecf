// The backend command: accept loop, per-connection request loop, request framing.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"net"
	"os"
	"strconv"
)

// response is the whole answer to every request: status, headers and a
// 12-byte body.
var response = []byte("HTTP/1.1 200 OK\r\n" +
	"Content-Type: text/plain\r\n" +
	"Content-Length: 12\r\n" +
	"\r\n" +
	"hello world\n")

// jsonResponse answers a GET of a path under /json: a 4 KiB JSON body (a
// user and a list of items with card numbers), for the response_body row.
var jsonResponse = func() []byte {
	body := []byte(`{"user":{"id":42,"name":"Ada Lovelace","phone":"13812345678","email":"ada@example.com"},"items":[`)
	for i := 0; len(body) < 4096-80; i++ {
		if i > 0 {
			body = append(body, ',')
		}
		body = fmt.Appendf(body, `{"id":%d,"sku":"SKU-%05d","card":"4111111111%06d","qty":%d}`, i, i, i, i%7)
	}
	body = append(body, `],"total":12345}`...)
	body = append(body, bytes.Repeat([]byte(" "), 4096-len(body))...)
	head := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	return append([]byte(head), body...)
}()

var jsonPath = []byte("GET /json")

// closeResponse is response for -close: it says the connection closes.
var closeResponse = append([]byte("HTTP/1.1 200 OK\r\nConnection: close\r\n"), response[len("HTTP/1.1 200 OK\r\n"):]...)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	printJSON := flag.Bool("print-json", false, "write the /json body to stdout and exit (for the nginx backend)")
	closeEach := flag.Bool("close", false, "close every connection after one response (Connection: close), as nginx's keepalive_requests 1")
	flag.Parse()
	if *printJSON {
		os.Stdout.Write(jsonResponse[bytes.Index(jsonResponse, []byte("\r\n\r\n"))+4:])
		return
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			log.Fatal(err)
		}
		go serve(conn, *closeEach)
	}
}

// serve answers every complete request in each read with one write, so a
// pipelining client gets its responses in order and batched. With
// closeEach it answers one request and closes.
func serve(conn net.Conn, closeEach bool) {
	defer conn.Close()
	in := make([]byte, 0, 8192)
	out := make([]byte, 0, 8*len(response))
	for {
		if len(in) == cap(in) {
			// A request whose header block does not fit is not a benchmark request.
			return
		}
		n, err := conn.Read(in[len(in):cap(in)])
		in = in[:len(in)+n]
		out = out[:0]
		closing := false
		for !closing {
			used, wantsClose, ok := nextRequest(in)
			if !ok {
				break
			}
			if closeEach {
				out = append(out, closeResponse...)
				closing = true
				break
			}
			if bytes.HasPrefix(in, jsonPath) {
				out = append(out, jsonResponse...)
			} else {
				out = append(out, response...)
			}
			in = in[:copy(in, in[used:])]
			closing = wantsClose
		}
		if len(out) > 0 {
			if _, werr := conn.Write(out); werr != nil {
				return
			}
		}
		if closing || err != nil {
			return
		}
	}
}

// nextRequest reports the length of the first complete request in buf and
// whether it asks to close the connection. ok is false while the request is
// still incomplete.
func nextRequest(buf []byte) (used int, wantsClose bool, ok bool) {
	end := bytes.Index(buf, []byte("\r\n\r\n"))
	if end < 0 {
		return 0, false, false
	}
	bodyLen := 0
	head := buf[:end]
	// Skip the request line; every following line is a header.
	if i := bytes.Index(head, []byte("\r\n")); i >= 0 {
		head = head[i+2:]
	} else {
		head = nil
	}
	for len(head) > 0 {
		line := head
		if i := bytes.Index(head, []byte("\r\n")); i >= 0 {
			line, head = head[:i], head[i+2:]
		} else {
			head = nil
		}
		name, value, found := bytes.Cut(line, []byte(":"))
		if !found {
			continue
		}
		value = bytes.TrimSpace(value)
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			bodyLen, _ = strconv.Atoi(string(value))
		case bytes.EqualFold(name, []byte("Connection")):
			wantsClose = bytes.EqualFold(value, []byte("close"))
		}
	}
	used = end + 4 + bodyLen
	if used > len(buf) {
		return 0, false, false
	}
	return used, wantsClose, true
}
