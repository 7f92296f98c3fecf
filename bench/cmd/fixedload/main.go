package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "gateway address")
	n := flag.Int("n", 2000, "requests per connection")
	c := flag.Int("c", 4, "connections")
	hdr := flag.String("H", "", "an extra request header line, as 'Name: value'")
	closeEach := flag.Bool("close", false, "one request per connection, with Connection: close; the gateway must close it")
	flag.Parse()
	if err := run(*addr, *n, *c, *hdr, *closeEach); err != nil {
		fmt.Fprintln(os.Stderr, "fixedload:", err)
		os.Exit(1)
	}
}

// run sends n requests on each of c connections to addr and reports the
// first failure. With closeEach each request has a connection of its
// own and asks to close it: c clients, n connections each.
func run(addr string, n, c int, hdr string, closeEach bool) error {
	req := "GET / HTTP/1.1\r\nHost: bench\r\nUser-Agent: fixedload\r\nAccept: */*\r\n"
	if hdr != "" {
		req += hdr + "\r\n"
	}
	if closeEach {
		req += "Connection: close\r\n"
	}
	req = req + "\r\n"
	errs := make([]error, c)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if closeEach {
				errs[i] = closing(addr, []byte(req), n)
			} else {
				errs[i] = serial(addr, []byte(req), n)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// serial sends req n times on one connection, each after the previous
// response ended.
func serial(addr string, req []byte, n int) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	for j := 0; j < n; j++ {
		if _, err := conn.Write(req); err != nil {
			return err
		}
		if err := readResponse(br); err != nil {
			return fmt.Errorf("response %d: %w", j+1, err)
		}
	}
	return nil
}

// closing sends req n times, each on a new connection, and checks the
// gateway closes the connection after the response.
func closing(addr string, req []byte, n int) error {
	for j := 0; j < n; j++ {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		br := bufio.NewReader(conn)
		if _, err = conn.Write(req); err == nil {
			err = readResponse(br)
		}
		if err == nil {
			if _, rerr := br.ReadByte(); rerr != io.EOF {
				err = fmt.Errorf("after the response: %v, want the connection closed", rerr)
			}
		}
		conn.Close()
		if err != nil {
			return fmt.Errorf("connection %d: %w", j+1, err)
		}
	}
	return nil
}

// readResponse reads one response with a Content-Length body and checks
// its status is 200.
func readResponse(br *bufio.Reader) error {
	status, err := br.ReadSlice('\n')
	if err != nil {
		return err
	}
	ok := bytes.HasPrefix(status, []byte("HTTP/1.1 200 "))
	length := -1
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(line)) == 0 {
			break
		}
		if k := bytes.IndexByte(line, ':'); k > 0 && bytes.EqualFold(line[:k], []byte("content-length")) {
			if length, err = strconv.Atoi(string(bytes.TrimSpace(line[k+1:]))); err != nil {
				return fmt.Errorf("bad Content-Length %q", line)
			}
		}
	}
	if length < 0 {
		return errors.New("no Content-Length")
	}
	if _, err := io.CopyN(io.Discard, br, int64(length)); err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("status %q", bytes.TrimSpace(status))
	}
	return nil
}
