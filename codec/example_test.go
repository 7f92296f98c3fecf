// Runnable examples for the package documentation.

package codec_test

import (
	"fmt"

	"github.com/loopgate/loopgate/codec"
)

func ExampleParseRequest() {
	lim := codec.DefaultLimits()
	var req codec.Request
	arrived := []byte("POST /orders?id=7 HTTP/1.1\r\nHost: shop\r\nContent-Length: 2\r\n\r\nhiGET / HTTP/1.1\r\n")

	// The first read holds only part of the head: ask for more.
	n, err := codec.ParseRequest(arrived[:20], &req, &lim)
	fmt.Println(n, err)

	n, err = codec.ParseRequest(arrived, &req, &lim)
	fmt.Println(n, err, string(req.Path), string(req.Query), string(req.Host), req.ContentLength, req.KeepAlive)
	fmt.Printf("body %q, then the next request starts\n", arrived[n:n+int(req.ContentLength)])

	_, err = codec.ParseRequest([]byte("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"), &req, &lim)
	e := err.(*codec.Error)
	fmt.Println(e.Status, e.Code, e.Message)
	// Output:
	// 0 <nil>
	// 61 <nil> /orders id=7 shop 2 true
	// body "hi", then the next request starts
	// 400 40001 both Content-Length and Transfer-Encoding
}

func ExampleChunkedDecoder() {
	var dec codec.ChunkedDecoder
	dec.Reset(1 << 20)
	reads := []string{"5;ext=1\r\nhel", "lo\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\nNEXT"}
	var body []byte
	for _, r := range reads {
		src := []byte(r)
		for len(src) > 0 && !dec.Done() {
			n, data, _, err := dec.Next(src)
			if err != nil {
				fmt.Println(err)
				return
			}
			body = append(body, data...)
			src = src[n:]
		}
		if dec.Done() {
			fmt.Printf("body %q, left over %q\n", body, src)
		}
	}
	// Output:
	// body "hello world", left over "NEXT"
}

func ExampleResponse_BodyMode() {
	var resp codec.Response
	for _, head := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nContent-Length: 12\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\n",
	} {
		if _, err := codec.ParseResponse([]byte(head), &resp, nil); err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(resp.Status, resp.BodyMode(false), resp.BodyMode(true))
	}
	// Output:
	// 200 length none
	// 200 chunked none
	// 304 none none
	// 200 until-close none
}

func ExampleChunkedDecoder_InTrailers() {
	var dec codec.ChunkedDecoder
	dec.Reset(0)
	src := []byte("3\r\nabc\r\n0\r\nX-Checksum: 900150983cd2\r\nSet-Cookie: s=1\r\n\r\n")
	var body, section []byte
	for len(src) > 0 && !dec.Done() {
		inTrailers := dec.InTrailers() // ask before Next: then src[:n] is trailer section only
		n, data, _, err := dec.Next(src)
		if err != nil {
			fmt.Println(err)
			return
		}
		if inTrailers {
			section = append(section, src[:n]...)
		}
		body = append(body, data...)
		src = src[n:]
	}
	fmt.Printf("body %q\n", body)
	codec.ForEachTrailer(section, func(name, value []byte) {
		if codec.ForbiddenTrailer(name) {
			fmt.Printf("drop %s\n", name)
			return
		}
		fmt.Printf("forward %s: %s\n", name, value)
	})
	// Output:
	// body "abc"
	// forward X-Checksum: 900150983cd2
	// drop Set-Cookie
}
