//go:build linux

// Closing an upstream connection: TCP_CORK lets the test upstream put its
// FIN on the segment with the response's last bytes (Linux).

package engine_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A connection whose upstream has closed its side already (the FIN came
// with the response's last bytes) is closed with a reset, which spares
// the node a TIME_WAIT socket; one whose upstream has not closed yet gets
// an orderly FIN, so an upstream still reading sees end-of-file.
func TestUpstreamThatClosedFirstIsReset(t *testing.T) {
	const resp = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"
	seen := make(chan error, 2)
	up := startRawUpstream(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		line, _ := br.ReadString('\n')
		for l := ""; l != "\r\n"; l, _ = br.ReadString('\n') {
		}
		tc := c.(*net.TCPConn)
		if strings.Contains(line, "/closed-first") {
			// Cork, so the FIN rides on the segment with the last bytes.
			cork(t, tc, 1)
			io.WriteString(c, resp)
			tc.CloseWrite()
			cork(t, tc, 0)
		} else {
			io.WriteString(c, resp)
		}
		_, err := br.ReadByte()
		seen <- err
	})
	g := startGateway(t, oneRoute, up)
	for _, tc := range []struct {
		path string
		want func(error) bool
		what string
	}{
		{"/closed-first", func(err error) bool { return errors.Is(err, syscall.ECONNRESET) }, "a reset"},
		{"/still-open", func(err error) bool { return err == io.EOF }, "end-of-file"},
	} {
		if r := fetch(g.url(tc.path)); r.err != nil || string(r.body) != "ok" {
			t.Fatalf("GET %s: %+v", tc.path, r)
		}
		select {
		case err := <-seen:
			if !tc.want(err) {
				t.Errorf("%s: the upstream read %v after the response, want %s", tc.path, err, tc.what)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the gateway never closed the upstream connection", tc.path)
		}
	}
}

// cork sets TCP_CORK on c.
func cork(t *testing.T, c *net.TCPConn, on int) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) {
		if err := syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_CORK, on); err != nil {
			t.Error(err)
		}
	})
}

// Through an upstream that closes every connection after one response,
// the Conns of closed connections serve later dials (upstream.Loop's
// spares): concurrent clients, each pipelining three requests (so the
// next request dials inside the callback whose response closed the last
// connection), each get the answers to their own requests, in order,
// whichever Conn carried them.
func TestConnectionPerRequestUpstreamAnswersEachItsOwn(t *testing.T) {
	up := startUpstream(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		io.WriteString(w, r.URL.Path)
	}))
	g := startGateway(t, "loops: 1\nupstreams:\n  - {name: b, nodes: [\"%s\"]}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n", up)
	const clients, rounds, depth = 8, 15, 3
	errs := make(chan error, clients)
	for i := range clients {
		c := g.dial(t)
		go func() {
			br := bufio.NewReader(c)
			for j := range rounds {
				var batch strings.Builder
				for k := range depth {
					fmt.Fprintf(&batch, "GET /c%d/r%d/%d HTTP/1.1\r\nHost: a\r\n\r\n", i, j, k)
				}
				if _, err := io.WriteString(c, batch.String()); err != nil {
					errs <- err
					return
				}
				for k := range depth {
					path := fmt.Sprintf("/c%d/r%d/%d", i, j, k)
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						errs <- fmt.Errorf("GET %s: %v", path, err)
						return
					}
					body, err := io.ReadAll(resp.Body)
					if err != nil || resp.StatusCode != 200 || string(body) != path {
						errs <- fmt.Errorf("GET %s: %d %q, %v", path, resp.StatusCode, body, err)
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range clients {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
