package engine

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
)

type probe struct {
	filters.Base
	mode       string
	secondErr  atomic.Value
	secondDone atomic.Int64
}

func (p *probe) Request(x *filters.Exchange) filters.Verdict {
	t := x.Park()
	err := x.Sub.Do(t, &filters.SubRequest{Group: 1, Method: "GET", Path: "/", Timeout: 2 * time.Second}, func(*filters.Exchange, *filters.SubResponse) filters.Verdict {
		if p.mode == "panic" {
			panic("boom in then")
		}
		return filters.Continue
	})
	if err != nil {
		return x.Reject(500, 50099, "first refused")
	}
	if p.mode == "double" {
		err2 := x.Sub.Do(t, &filters.SubRequest{Group: 2, Method: "GET", Path: "/", Timeout: 2 * time.Second}, func(*filters.Exchange, *filters.SubResponse) filters.Verdict {
			p.secondDone.Add(1)
			return filters.Continue
		})
		p.secondErr.Store(fmt.Sprint(err2))
	}
	return filters.Suspend
}

// listen runs an HTTP upstream for the test and returns its address.
func listen(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &http.Server{Handler: h}
	go s.Serve(ln)
	t.Cleanup(func() { s.Close() })
	return ln.Addr().String()
}

func run(t *testing.T, p *probe) (string, *atomic.Int64) {
	var otherHits atomic.Int64
	up := listen(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
	authSrv := listen(t, func(w http.ResponseWriter, r *http.Request) {})
	other := listen(t, func(w http.ResponseWriter, r *http.Request) { otherHits.Add(1) })
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\nupstreams:\n  - {name: b, nodes: [\"%s\"]}\n  - {name: a, nodes: [\"%s\"]}\n  - {name: o, nodes: [\"%s\"]}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n", up, authSrv, other)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.FilterName, p.FilterOrder = "probe", 1
	ch, _ := filters.NewChain([]filters.Filter{p}, 1)
	srv.state.Load().snap.routes.at(0).chain = ch
	return ServeForTest(t, srv), &otherHits
}

// dialRaw opens a client connection to addr with a deadline, closed when
// the test ends.
func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// exchangeRaw sends raw on a new connection and reads one response.
func exchangeRaw(t *testing.T, addr, raw string) (*http.Response, string, net.Conn) {
	t.Helper()
	c := dialRaw(t, addr)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), c
}

func TestSubDoSecondRefused(t *testing.T) {
	p := &probe{mode: "double"}
	addr, otherHits := run(t, p)
	resp, b, _ := exchangeRaw(t, addr, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp.StatusCode != 200 || b != "ok" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if got := p.secondErr.Load(); got != filters.ErrSubRequestActive.Error() {
		t.Fatalf("second Do: %v", got)
	}
	time.Sleep(100 * time.Millisecond)
	if otherHits.Load() != 0 || p.secondDone.Load() != 0 {
		t.Fatalf("second call touched: hits %d done %d", otherHits.Load(), p.secondDone.Load())
	}
}

func TestSubDonePanics(t *testing.T) {
	p := &probe{mode: "panic"}
	addr, _ := run(t, p)
	resp, b, _ := exchangeRaw(t, addr, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp.StatusCode != 500 || !strings.Contains(b, "50001") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	// A parked POST whose body is unread: answered and the connection closed.
	resp, b, c := exchangeRaw(t, addr, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello")
	if resp.StatusCode != 500 || !strings.Contains(b, "50001") || !resp.Close {
		t.Fatalf("%d %s close=%v", resp.StatusCode, b, resp.Close)
	}
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("connection left open: %v", err)
	}
	// Keep-alive: the same connection serves the next request after a 500.
	c2 := dialRaw(t, addr)
	br := bufio.NewReader(c2)
	for i := 0; i < 3; i++ {
		io.WriteString(c2, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		if resp.StatusCode != 500 {
			t.Fatal(resp.StatusCode)
		}
	}
}
