// Tickets through real sockets: resumes from many goroutines, one doorbell
// per batch, and resumes that lose their race with a client close, the
// suspend deadline or a recycled exchange. The harness is in
// ticket_harness_test.go.

package engine

import (
	"bufio"
	"bytes"
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

	"github.com/loopgate/loopgate/filters"
)

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
