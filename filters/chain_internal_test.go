package filters

import (
	"net/netip"
	"testing"
	"time"
)

// passFilter lets every request through and does nothing on the response.
type passFilter struct{ Base }

func (passFilter) Request(*Exchange) Verdict { return Continue }

// hookFilter lets every request through and counts its response phases,
// a response hook (HasResponseHook).
type hookFilter struct {
	Base
	responses *int
}

func (hookFilter) Request(*Exchange) Verdict { return Continue }
func (f hookFilter) Response(*Exchange)      { *f.responses++ }
func (hookFilter) HasResponseHook() bool     { return true }

// runRequests makes a chain of fs and runs its request phases on a fresh
// exchange, which every filter lets through.
func runRequests(t *testing.T, fs ...Filter) (*Chain, *Exchange) {
	t.Helper()
	c, err := NewChain(fs, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := new(Exchange)
	x.Reset(nil, nil, netip.Addr{}, 0, nil)
	if v := c.RunRequest(x); v != Continue {
		t.Fatalf("verdict %v", v)
	}
	return c, x
}

// Given the reading that ended the request phases, RunResponseFrom starts
// the response phases with it and reads the clock only at their ends: the
// outermost filter's total is then exactly every filter's self time added
// up, request and response phases, with no gap between them.
func TestRunResponseFromStartsWithTheReading(t *testing.T) {
	var responses int
	c, x := runRequests(t,
		hookFilter{Base{FilterName: "a", FilterOrder: 1}, &responses},
		hookFilter{Base{FilterName: "b", FilterOrder: 2}, &responses},
		hookFilter{Base{FilterName: "c", FilterOrder: 3}, &responses})
	last := &x.Timings[c.Len()-1]
	end := last.start + int64(last.Self) // the request phases' last reading
	x.Status = 200
	c.RunResponseFrom(x, end)
	var selves int64
	for i := range c.Len() {
		selves += int64(x.Timings[i].Self)
	}
	if total := int64(x.Timings[0].Total); total != selves {
		t.Fatalf("outer total %d ns, the self times add up to %d ns", total, selves)
	}
	if responses != c.Len() {
		t.Fatalf("%d response phases ran, want %d", responses, c.Len())
	}
}

// A chain with no response hook reads no clock in its response phases:
// every filter's total time ends on the reading given, and the self times
// stay the request phases'. The reading is an hour ahead of the clock, so
// a fresh reading anywhere would show as a shorter total.
func TestRunResponseFromWithoutHooksReadsNoClock(t *testing.T) {
	responses := 0
	c, x := runRequests(t,
		passFilter{Base{FilterName: "a", FilterOrder: 1}},
		hookFilter{Base{FilterName: "b", FilterOrder: 2}, &responses},
		passFilter{Base{FilterName: "c", FilterOrder: 3}})
	selfs := [3]time.Duration{x.Timings[0].Self, x.Timings[1].Self, x.Timings[2].Self}
	late := nanotime() + int64(time.Hour)
	x.Status = 200
	c.RunResponseFrom(x, late)
	if responses != 1 {
		t.Fatalf("b's response phase ran %d times, want 1", responses)
	}
	// c, last, has no hook: it ends on the reading given, unchanged.
	if got, want := x.Timings[2].Total, time.Duration(late-x.Timings[2].start); got != want || x.Timings[2].Self != selfs[2] {
		t.Errorf("c: total %v self %v, want total %v self %v", got, x.Timings[2].Self, want, selfs[2])
	}
	// b has a hook: its end is a fresh reading, an hour before late.
	if x.Timings[1].Total >= time.Duration(late-x.Timings[1].start) {
		t.Errorf("b: total %v, want a fresh reading, before %v", x.Timings[1].Total, time.Duration(late-x.Timings[1].start))
	}
	// a has none: it ends where b did.
	if end, bEnd := x.Timings[0].start+int64(x.Timings[0].Total), x.Timings[1].start+int64(x.Timings[1].Total); end != bEnd || x.Timings[0].Self != selfs[0] {
		t.Errorf("a: ends at %d, self %v; want b's end %d, self %v", end, x.Timings[0].Self, bEnd, selfs[0])
	}

	// Without b's hook, no filter reads the clock: all end on late.
	c, x = runRequests(t,
		passFilter{Base{FilterName: "a", FilterOrder: 1}},
		passFilter{Base{FilterName: "c", FilterOrder: 3}})
	x.Status = 200
	c.RunResponseFrom(x, late)
	for i := range c.Len() {
		if end := x.Timings[i].start + int64(x.Timings[i].Total); end != late {
			t.Errorf("filter %d ends at %d, want the reading given, %d", i, end, late)
		}
	}
	if calls, _, _ := c.Stats(0).Totals(); calls != 1 {
		t.Errorf("a recorded %d calls, want 1", calls)
	}
}

// nowFilter records what Exchange.Now said in its request and response
// phases.
type nowFilter struct {
	Base
	req, resp *int64
}

func (f nowFilter) Request(x *Exchange) Verdict { *f.req = x.Now(); return Continue }
func (f nowFilter) Response(x *Exchange)        { *f.resp = x.Now() }
func (nowFilter) HasResponseHook() bool         { return true }

// In a phase, Exchange.Now is the reading that began it, which the chain
// took anyway; outside the phases it reads the clock.
func TestExchangeNowIsThePhaseStart(t *testing.T) {
	var req, resp int64
	c, x := runRequests(t,
		passFilter{Base{FilterName: "a", FilterOrder: 1}},
		nowFilter{Base{FilterName: "b", FilterOrder: 2}, &req, &resp})
	if req != x.Timings[1].start {
		t.Fatalf("request phase: Now %d, want the phase's start %d", req, x.Timings[1].start)
	}
	if x.now != 0 {
		t.Fatalf("after the request phases Now still answers %d", x.now)
	}
	late := nanotime() + int64(time.Hour)
	x.Status = 200
	c.RunResponseFrom(x, late)
	if resp != late {
		t.Fatalf("response phase: Now %d, want the reading it began with %d", resp, late)
	}
	if got := x.Now(); got >= late || got < req {
		t.Fatalf("outside the phases Now = %d, want a fresh reading in [%d, %d)", got, req, late)
	}
}
