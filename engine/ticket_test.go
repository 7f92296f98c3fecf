// Tickets through real sockets: resumes from many goroutines, one doorbell
// per batch, and resumes that lose their race with a client close, the
// suspend deadline or a recycled exchange.

package engine

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand"
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
	for i := range srv.snap.Load().routes {
		srv.snap.Load().routes[i].chain = ch
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

// waitUntil polls cond for up to 10 s, for what the loops do that the test
// is not told about.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
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

// Many goroutines resume many parked requests at once, on two loops: each
// request is continued by its own ticket and gets its own answer, and no
// resume is lost or dropped.
func TestTicketResumesFromManyGoroutines(t *testing.T) {
	f := &parkingFilter{}
	srv, addr := ticketGateway(t, 2, "10s", f)
	const n, resumers = 200, 8
	var r resumes
	work := make(chan parkedRequest)
	var wg sync.WaitGroup
	for range resumers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				p.ticket.Resume(r.continueAs(p))
			}
		}()
	}
	go func() {
		defer close(work)
		for range n {
			select {
			case p := <-f.parked:
				work <- p
			case <-time.After(10 * time.Second):
				return
			}
		}
	}()
	errs := make(chan error, n)
	var clients sync.WaitGroup
	for i := range n {
		clients.Add(1)
		go func() {
			defer clients.Done()
			path := fmt.Sprintf("/c/%d", i)
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				errs <- fmt.Errorf("%s: %v", path, err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || string(b) != path+" "+path {
				errs <- fmt.Errorf("%s: %d %q", path, resp.StatusCode, b)
			}
		}()
	}
	clients.Wait()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waitUntil(t, "every exchange to end", func() bool { return f.dones.Load() == n })
	if ran, wrong, stale := r.ran.Load(), r.wrong.Load(), srv.StaleResumes(); ran != n || wrong != 0 || stale != 0 {
		t.Fatalf("resumes run %d (on the wrong request %d), stale %d; want %d, 0, 0", ran, wrong, stale, n)
	}
}

// Resumes posted while the loop is busy wait for one drain, rung by one
// Execute, however many goroutines posted them.
func TestTicketOneDoorbellPerBatch(t *testing.T) {
	f := &parkingFilter{}
	srv, addr := ticketGateway(t, 1, "10s", f)
	l := srv.loops[0]
	const n = 64
	readers := make([]*bufio.Reader, n)
	parked := make([]parkedRequest, n)
	for i := range n {
		_, readers[i] = sendGet(t, addr, fmt.Sprintf("/b/%d", i))
		parked[i] = nextParked(t, f)
	}
	release := blockLoop(t, l) // after every park: they ran on this loop, before this task
	before := l.inbox.doorbells.Load()
	var r resumes
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range parked {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			p.ticket.Resume(r.continueAs(p))
		}()
	}
	close(start)
	wg.Wait()
	rung := l.inbox.doorbells.Load() - before
	release()
	for i := range n {
		expectOwnAnswer(t, readers[i], parked[i].path)
	}
	if rung != 1 {
		t.Fatalf("%d resumes rang %d doorbells, want 1", n, rung)
	}
	if ran, wrong := r.ran.Load(), r.wrong.Load(); ran != n || wrong != 0 {
		t.Fatalf("resumes run %d (wrong %d), want %d", ran, wrong, n)
	}
}

// A ticket resumes once. A second resume, posted with the first before the
// loop drains or after the request was answered, is dropped and counted.
func TestTicketDoubleResume(t *testing.T) {
	f := &parkingFilter{}
	srv, addr := ticketGateway(t, 1, "10s", f)
	l := srv.loops[0]
	var r resumes

	// Both in one batch.
	_, br := sendGet(t, addr, "/twice")
	p := nextParked(t, f)
	release := blockLoop(t, l)
	p.ticket.Resume(r.continueAs(p))
	p.ticket.Resume(r.continueAs(p))
	release()
	expectOwnAnswer(t, br, "/twice")
	if ran, stale := r.ran.Load(), srv.StaleResumes(); ran != 1 || stale != 1 {
		t.Fatalf("run %d, stale %d; want 1 and 1", ran, stale)
	}

	// Once more, after the answer.
	p.ticket.Resume(r.continueAs(p))
	if ran, stale := r.ran.Load(), srv.StaleResumes(); ran != 1 || stale != 2 {
		t.Fatalf("run %d, stale %d; want 1 and 2", ran, stale)
	}
	var m bytes.Buffer
	srv.WriteMetrics(&m)
	if !strings.Contains(m.String(), "\nloopgate_stale_resumes_total 2\n") {
		t.Fatalf("metrics lack loopgate_stale_resumes_total 2:\n%s", m.String())
	}
}

// A resume posted just before the client leaves: the close ends the park
// first, so the resume is dropped and counted, never run.
func TestTicketResumeLosesToClientClose(t *testing.T) {
	f := &parkingFilter{}
	srv, addr := ticketGateway(t, 1, "10s", f)
	l := srv.loops[0]
	c, _ := sendGet(t, addr, "/left")
	p := nextParked(t, f)
	var r resumes
	onLoop(t, l, func() {
		p.ticket.Resume(r.continueAs(p)) // claimed and queued behind this task
		closeClients(l)
	})
	waitUntil(t, "the resume to be dropped as stale", func() bool { return srv.StaleResumes() == 1 })
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("client read %v, want EOF", err)
	}
	if r.ran.Load() != 0 || f.gone.Load() != 1 {
		t.Fatalf("resume run %d times, %d exchanges ended client_gone; want 0 and 1", r.ran.Load(), f.gone.Load())
	}
}

// A resume posted just before the suspend deadline passes: the 504 ends the
// park first, so the resume is dropped and counted, never run.
func TestTicketResumeLosesToSuspendTimeout(t *testing.T) {
	f := &parkingFilter{}
	srv, addr := ticketGateway(t, 1, "30s", f)
	l := srv.loops[0]
	_, br := sendGet(t, addr, "/late")
	p := nextParked(t, f)
	var r resumes
	onLoop(t, l, func() {
		p.ticket.Resume(r.continueAs(p))
		l.wheel.Advance(time.Now().Add(31 * time.Second)) // the suspend deadline fires
	})
	expectStatus(t, br, 504, 50401)
	waitUntil(t, "the resume to be dropped as stale", func() bool { return srv.StaleResumes() == 1 })
	if r.ran.Load() != 0 {
		t.Fatalf("resume run %d times after the 504", r.ran.Load())
	}
}

// The exchange of a timed-out request is recycled for the next request on
// the connection, which parks in turn, all before the first request's
// resume is drained. That resume is for an ended park: it is dropped and
// counted and never continues the next request, which waits for its own.
func TestTicketStaleResumeOfRecycledExchange(t *testing.T) {
	f := &parkingFilter{}
	srv, addr := ticketGateway(t, 1, "30s", f)
	l := srv.loops[0]
	c := dialRaw(t, addr)
	io.WriteString(c, "GET /first HTTP/1.1\r\nHost: a\r\n\r\nGET /second HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(c)
	first := nextParked(t, f)
	var r resumes
	onLoop(t, l, func() {
		first.ticket.Resume(r.continueAs(first))
		// /first's suspend deadline fires (its timer's callback, called
		// here: advancing the wheel would expire /second too). Its exchange
		// goes back to the free list, and /second, pipelined behind it,
		// takes it and parks.
		l.clients.head.next.ex.suspendExpired()
	})
	second := nextParked(t, f)
	if second.x != first.x || second.path != "/second" {
		t.Fatalf("the second request parked on another exchange (%p, %p) or path %q", first.x, second.x, second.path)
	}
	expectStatus(t, br, 504, 50401)
	waitUntil(t, "the resume to be dropped as stale", func() bool { return srv.StaleResumes() == 1 })
	if ran, wrong := r.ran.Load(), r.wrong.Load(); ran != 0 || wrong != 0 {
		t.Fatalf("the stale resume ran %d times (%d on the wrong request)", ran, wrong)
	}
	second.ticket.Resume(r.continueAs(second))
	expectOwnAnswer(t, br, "/second")
	if ran, wrong := r.ran.Load(), r.wrong.Load(); ran != 1 || wrong != 0 {
		t.Fatalf("resumes run %d (wrong %d), want 1 and 0", ran, wrong)
	}
}

// A resume that comes after its request timed out and its exchange was
// recycled for the next request, now parked in turn, is refused at once:
// it names the old park, and never continues the new request.
func TestTicketLateResumeOfRecycledExchange(t *testing.T) {
	f := &parkingFilter{}
	srv, addr := ticketGateway(t, 1, "30s", f)
	l := srv.loops[0]
	c := dialRaw(t, addr)
	io.WriteString(c, "GET /first HTTP/1.1\r\nHost: a\r\n\r\nGET /second HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(c)
	first := nextParked(t, f)
	onLoop(t, l, func() { l.clients.head.next.ex.suspendExpired() }) // /first's deadline
	second := nextParked(t, f)
	if second.x != first.x {
		t.Fatal("the second request parked on another exchange")
	}
	expectStatus(t, br, 504, 50401)
	var r resumes
	first.ticket.Resume(r.continueAs(first))
	if srv.StaleResumes() != 1 {
		t.Fatalf("stale resumes %d, want 1", srv.StaleResumes())
	}
	second.ticket.Resume(r.continueAs(second))
	expectOwnAnswer(t, br, "/second")
	if ran, wrong := r.ran.Load(), r.wrong.Load(); ran != 1 || wrong != 0 {
		t.Fatalf("resumes run %d (wrong %d), want 1 and 0", ran, wrong)
	}
}

// Resumes race client closes and the suspend deadline, from many
// goroutines: every resume either continues its own request or is counted
// stale, never both and never neither, and every exchange ends once.
func TestTicketResumesRaceClosesAndTimeouts(t *testing.T) {
	f := &parkingFilter{}
	srv, addr := ticketGateway(t, 2, "150ms", f)
	const n = 300
	var r resumes
	var tickets atomic.Int64
	stop := make(chan struct{})
	var resumers sync.WaitGroup
	resumers.Add(1)
	go func() { // one goroutine per ticket, resuming at a random moment
		defer resumers.Done()
		for {
			var p parkedRequest
			select {
			case p = <-f.parked:
			case <-stop:
				return
			}
			tickets.Add(1)
			resumers.Add(1)
			go func() {
				defer resumers.Done()
				time.Sleep(time.Duration(rand.Intn(300)) * time.Millisecond) // around the deadline, not for sync
				p.ticket.Resume(r.continueAs(p))
			}()
		}
	}()
	var clients sync.WaitGroup
	for i := range n {
		clients.Add(1)
		go func() {
			defer clients.Done()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			path := fmt.Sprintf("/r/%d", i)
			io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n")
			if i%3 == 0 {
				time.Sleep(time.Duration(rand.Intn(300)) * time.Millisecond)
				return // the client leaves, maybe before its resume
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Errorf("%s: %v", path, err)
				return
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 504 && (resp.StatusCode != 200 || string(b) != path+" "+path) {
				t.Errorf("%s: %d %q", path, resp.StatusCode, b)
			}
		}()
	}
	clients.Wait()
	// Every request that began has ended (answered, timed out or left), so
	// every ticket is in f.parked or taken.
	waitUntil(t, "every exchange to end", func() bool { return srv.Clients() == 0 && f.dones.Load() == f.requests.Load() })
	waitUntil(t, "every ticket to be taken", func() bool { return len(f.parked) == 0 })
	close(stop)
	resumers.Wait()
	waitUntil(t, "every resume to be run or dropped", func() bool { return r.ran.Load()+int64(srv.StaleResumes()) == tickets.Load() })
	if r.wrong.Load() != 0 {
		t.Fatalf("%d resumes continued another request", r.wrong.Load())
	}
	if tickets.Load() != f.requests.Load() {
		t.Fatalf("%d tickets for %d requests", tickets.Load(), f.requests.Load())
	}
	t.Logf("%d requests: %d resumes run, %d stale", f.requests.Load(), r.ran.Load(), srv.StaleResumes())
}

// A resume function may park the request again (a second async step): the
// chain waits for the new ticket, and the old one no longer resumes it.
func TestTicketParkAgainFromResume(t *testing.T) {
	f := &parkingFilter{}
	srv, addr := ticketGateway(t, 1, "10s", f)
	_, br := sendGet(t, addr, "/twice-parked")
	p := nextParked(t, f)
	again := make(chan filters.Ticket, 1)
	p.ticket.Resume(func(x *filters.Exchange) filters.Verdict {
		again <- x.Park()
		return filters.Suspend
	})
	var second filters.Ticket
	select {
	case second = <-again:
	case <-time.After(10 * time.Second):
		t.Fatal("the resume function did not run")
	}
	if second == p.ticket {
		t.Fatal("parking again gave the old ticket")
	}
	var r resumes
	p.ticket.Resume(r.continueAs(p)) // the first park is over: dropped
	if srv.StaleResumes() != 1 {
		t.Fatalf("stale resumes %d, want 1", srv.StaleResumes())
	}
	second.Resume(r.continueAs(p))
	expectOwnAnswer(t, br, "/twice-parked")
	if r.ran.Load() != 1 {
		t.Fatalf("resumes run %d, want 1", r.ran.Load())
	}
}

// A filter may resume its own ticket before it returns Suspend: the resume
// waits in the inbox and continues the request once it is parked.
func TestTicketResumedBeforeSuspend(t *testing.T) {
	f := &parkingFilter{resumeAtOnce: true}
	srv, addr := ticketGateway(t, 1, "10s", f)
	c, br := sendGet(t, addr, "/at-once")
	expectOwnAnswer(t, br, "/at-once")
	// Keep-alive: the next request on the connection is served the same way.
	io.WriteString(c, "GET /again HTTP/1.1\r\nHost: a\r\n\r\n")
	expectOwnAnswer(t, br, "/again")
	if srv.StaleResumes() != 0 {
		t.Fatalf("stale resumes %d", srv.StaleResumes())
	}
}

// Suspend without a ticket could never be resumed: it is answered at once
// with a 500, not held until the suspend deadline.
func TestSuspendWithoutParkIsAnError(t *testing.T) {
	f := &parkingFilter{noPark: true}
	_, addr := ticketGateway(t, 1, "10s", f)
	_, br := sendGet(t, addr, "/x")
	expectStatus(t, br, 500, 50001)
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
