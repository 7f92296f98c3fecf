// Tests of parking without an engine: Chain.Resume, and tickets that
// resume nothing.

package filters_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters"
)

// step is a filter whose request phase returns its verdict and counts its
// response phases.
type step struct {
	filters.Base
	verdict   filters.Verdict
	responses int
}

func (s *step) Request(*filters.Exchange) filters.Verdict { return s.verdict }
func (s *step) Response(*filters.Exchange)                { s.responses++ }
func (s *step) HasResponseHook() bool                     { return true }

// parkedChain is two filters, the first suspending, with the exchange
// parked after it.
func parkedChain(t *testing.T) (*filters.Chain, *filters.Exchange, *step, *step) {
	t.Helper()
	first := &step{Base: filters.Base{FilterName: "first", FilterOrder: 1}, verdict: filters.Suspend}
	second := &step{Base: filters.Base{FilterName: "second", FilterOrder: 2}, verdict: filters.Continue}
	c, err := filters.NewChain([]filters.Filter{first, second}, 1)
	if err != nil {
		t.Fatal(err)
	}
	x := new(filters.Exchange)
	x.Reset(parse(t, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"), []byte("id"), netip.MustParseAddr("127.0.0.1"), 0, nil)
	if v := c.RunRequest(x); v != filters.Suspend {
		t.Fatalf("verdict %v", v)
	}
	return c, x, first, second
}

// The resume function finishes the parked filter's request phase: its time
// is the filter's self time, and Continue runs the filters after it.
func TestChainResumeContinues(t *testing.T) {
	c, x, _, _ := parkedChain(t)
	before := x.Timings[0].Self
	v := c.Resume(x, func(x *filters.Exchange) filters.Verdict {
		time.Sleep(time.Millisecond) // stands for work; a lower bound, so the check below cannot flake
		return filters.Continue
	})
	if v != filters.Continue || x.Timings[1].Self <= 0 {
		t.Fatalf("verdict %v, second filter's self time %v: the chain did not continue", v, x.Timings[1].Self)
	}
	if got := x.Timings[0].Self - before; got < time.Millisecond {
		t.Fatalf("the resume function's %v is not in the parked filter's self time (%v added)", time.Millisecond, got)
	}
	// A nil function is Continue.
	c, x, _, _ = parkedChain(t)
	if v := c.Resume(x, nil); v != filters.Continue {
		t.Fatalf("nil resume: %v", v)
	}
}

// A panic in the resume function is a 500 like one in a request phase, and
// the parked filter's response phase still runs.
func TestChainResumePanics(t *testing.T) {
	c, x, first, second := parkedChain(t)
	v := c.Resume(x, func(*filters.Exchange) filters.Verdict { panic("boom") })
	if v != filters.Respond || x.Rejection.Status != 500 || x.Rejection.Code != 50001 {
		t.Fatalf("%v %+v", v, x.Rejection)
	}
	x.Status = 500
	c.RunResponse(x)
	if first.responses != 1 || second.responses != 0 {
		t.Fatalf("response phases: first %d, second %d; want 1 and 0", first.responses, second.responses)
	}
}

// Without an engine nothing can park: Park gives the zero Ticket, whose
// Resume does nothing.
func TestTicketWithoutEngine(t *testing.T) {
	x := new(filters.Exchange)
	x.Reset(parse(t, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"), nil, netip.MustParseAddr("127.0.0.1"), 0, nil)
	tk := x.Park()
	if tk != (filters.Ticket{}) {
		t.Fatalf("ticket %+v", tk)
	}
	tk.Resume(func(*filters.Exchange) filters.Verdict { t.Fatal("ran"); return filters.Continue })
}
