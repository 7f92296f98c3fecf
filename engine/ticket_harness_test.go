// Ticket test harness: a filter that parks every request, a gateway around
// it, ways to run code on a loop or hold it, and the benchmark of an
// off-loop resume.

package engine

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/filters"
	"github.com/loopgate/loopgate/pool"
	"github.com/panjf2000/gnet/v2"
)

// parkingFilter parks every request and hands its ticket to the test. With
// resumeAtOnce it resumes the ticket itself before returning Suspend; with
// noPark it returns Suspend without parking; with ticketOnly it hands over
// the ticket alone, allocating nothing.
type parkingFilter struct {
	filters.Base
	parked                           chan parkedRequest
	resumeAtOnce, noPark, ticketOnly bool
	requests, dones, gone            atomic.Int64
}

// parkedRequest is one parked request as the filter saw it.
type parkedRequest struct {
	ticket filters.Ticket
	x      *filters.Exchange // which exchange: recycled ones repeat
	id     string            // the request's ID: which request a resume continues
	path   string
}

func (f *parkingFilter) Request(x *filters.Exchange) filters.Verdict {
	f.requests.Add(1)
	if f.noPark {
		return filters.Suspend
	}
	if f.ticketOnly {
		f.parked <- parkedRequest{ticket: x.Park()}
		return filters.Suspend
	}
	p := parkedRequest{ticket: x.Park(), x: x, id: string(x.RequestID), path: string(x.Req.Path)}
	if f.resumeAtOnce {
		p.ticket.Resume(func(x *filters.Exchange) filters.Verdict {
			x.ReqEdits.AddSet("X-Resumed-For", x.Own([]byte(p.path)))
			return filters.Continue
		})
		return filters.Suspend
	}
	f.parked <- p // buffered beyond any test's requests: the loop never waits
	return filters.Suspend
}

func (f *parkingFilter) Done(x *filters.Exchange) {
	f.dones.Add(1)
	if x.End.Reason == filters.EndClientGone {
		f.gone.Add(1)
	}
}

// resumes counts what the functions tickets were resumed with did.
type resumes struct {
	ran   atomic.Int64 // functions run
	wrong atomic.Int64 // of those, run on another request than their ticket's
}

// continueAs is the function p's ticket is resumed with: it checks that it
// continues p's request, and marks the upstream request with p's path so
// the client can check that the answer it got is its own.
func (r *resumes) continueAs(p parkedRequest) func(*filters.Exchange) filters.Verdict {
	return func(x *filters.Exchange) filters.Verdict {
		r.ran.Add(1)
		if string(x.RequestID) != p.id {
			r.wrong.Add(1)
		}
		x.ReqEdits.AddSet("X-Resumed-For", x.Own([]byte(p.path)))
		return filters.Continue
	}
}

// ticketGateway runs a gateway whose one route parks every request on f,
// in front of an upstream that answers "<path> <X-Resumed-For>".
func ticketGateway(t *testing.T, loops int, suspend string, f *parkingFilter) (*Server, string) {
	t.Helper()
	up := listen(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.URL.Path+" "+r.Header.Get("X-Resumed-For"))
	})
	srv := newTicketServer(t, loops, suspend, up, f)
	return srv, ServeForTest(t, srv)
}

// newTicketServer is a server on loops loops whose one route, to upstream
// up, parks every request on f.
func newTicketServer(t testing.TB, loops int, suspend, up string, f *parkingFilter) *Server {
	t.Helper()
	cfg, err := config.Parse([]byte(fmt.Sprintf("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: %d\ntimeouts: {suspend: %s}\nupstreams:\n  - {name: b, nodes: [\"%s\"]}\nroutes:\n  - {id: r, prefix: /, upstream: b}\n", loops, suspend, up)))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.FilterName, f.FilterOrder = "park", 1
	f.parked = make(chan parkedRequest, 4096)
	ch, err := filters.NewChain([]filters.Filter{f}, loops)
	if err != nil {
		t.Fatal(err)
	}
	for i := range srv.state.Load().snap.routes.len() {
		srv.state.Load().snap.routes.at(i).chain = ch
	}
	return srv
}

// nextParked waits for the next request f parks.
func nextParked(t *testing.T, f *parkingFilter) parkedRequest {
	t.Helper()
	select {
	case p := <-f.parked:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no request parked")
		return parkedRequest{}
	}
}

// onLoop runs fn on loop l, as a callback of its own, and waits for it.
func onLoop(t *testing.T, l *loop, fn func()) {
	t.Helper()
	done := make(chan struct{})
	err := l.eventLoop().Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		l.enter()
		fn()
		l.leave()
		close(done)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not run the task")
	}
}

// blockLoop holds loop l inside a task until the returned release is
// called, so that everything posted meanwhile waits for one drain.
func blockLoop(t *testing.T, l *loop) (release func()) {
	t.Helper()
	entered, hold := make(chan struct{}), make(chan struct{})
	err := l.eventLoop().Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		close(entered)
		<-hold
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	<-entered
	var once sync.Once
	release = func() { once.Do(func() { close(hold) }) }
	t.Cleanup(release)
	return release
}

// closeClients closes every client connection of loop l, on the loop.
func closeClients(l *loop) {
	for cc := l.clients.head.next; cc != &l.clients.head; {
		next := cc.next
		cc.close()
		cc = next
	}
}

// waitUntil polls cond for up to 30 s, for what the loops do that the test
// is not told about.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// sendGet opens a connection and sends GET path on it.
func sendGet(t *testing.T, addr, path string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c := dialRaw(t, addr)
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	return c, bufio.NewReader(c)
}

// expectOwnAnswer reads one response and checks it is the upstream's answer
// to path, continued by path's own ticket.
func expectOwnAnswer(t *testing.T, br *bufio.Reader, path string) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != path+" "+path {
		t.Fatalf("%s: %d %q, want 200 %q", path, resp.StatusCode, b, path+" "+path)
	}
}

// expectStatus reads one response and checks its status and JSON code.
func expectStatus(t *testing.T, br *bufio.Reader, status, code int) {
	t.Helper()
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status || !strings.Contains(string(b), fmt.Sprint(code)) {
		t.Fatalf("%d %s, want %d with code %d", resp.StatusCode, b, status, code)
	}
}

// BenchmarkProxyParkedOffLoop: every request parks, and another goroutine
// resumes it, as a Redis reply would: with one keep-alive client that is
// one doorbell (one EventLoop.Execute) per request, so its cost shows. The
// ticket path allocates nothing; gnet's Execute allocates its task closure
// and queue node, per doorbell.
func BenchmarkProxyParkedOffLoop(b *testing.B) {
	pool.SetLeakDetection(false)
	defer pool.SetLeakDetection(true)
	answer := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	up := listenRaw(b, answer)
	f := &parkingFilter{ticketOnly: true}
	stop := make(chan struct{})
	b.Cleanup(func() { close(stop) }) // after the server's own cleanup
	srv := newTicketServer(b, 1, "10s", up, f)
	addr := ServeForTest(b, srv)
	proceed := func(*filters.Exchange) filters.Verdict { return filters.Continue }
	go func() {
		for {
			select {
			case p := <-f.parked:
				p.ticket.Resume(proceed)
			case <-stop:
				return
			}
		}
	}()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	req := []byte("GET /p HTTP/1.1\r\nHost: a\r\n\r\n")
	buf := make([]byte, 4096)
	if _, err := c.Write(req); err != nil {
		b.Fatal(err)
	}
	size, err := c.Read(buf) // the first response tells the size of all
	if err != nil || !bytes.HasPrefix(buf, []byte("HTTP/1.1 200")) {
		b.Fatalf("first response %q: %v", buf[:size], err)
	}
	roundTrip := func() {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadAtLeast(c, buf, size); err != nil {
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

// listenRaw runs an upstream that answers every request head with answer,
// allocating nothing per request, and returns its address.
func listenRaw(t testing.TB, answer []byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				pending := 0
				for {
					n, err := c.Read(buf[pending:])
					if err != nil {
						return
					}
					pending += n
					for {
						i := bytes.Index(buf[:pending], []byte("\r\n\r\n"))
						if i < 0 {
							break
						}
						if _, err := c.Write(answer); err != nil {
							return
						}
						pending = copy(buf, buf[i+4:pending])
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}
