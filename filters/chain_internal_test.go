package filters

import (
	"net/netip"
	"testing"
)

// passFilter lets every request through and does nothing on the response.
type passFilter struct{ Base }

func (passFilter) Request(*Exchange) Verdict { return Continue }

// Given the reading that ended the request phases, RunResponseFrom starts
// the response phases with it and reads the clock only at their ends: the
// outermost filter's total is then exactly every filter's self time added
// up, request and response phases, with no gap between them.
func TestRunResponseFromStartsWithTheReading(t *testing.T) {
	c, err := NewChain([]Filter{
		passFilter{Base{FilterName: "a", FilterOrder: 1}},
		passFilter{Base{FilterName: "b", FilterOrder: 2}},
		passFilter{Base{FilterName: "c", FilterOrder: 3}},
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	var x Exchange
	x.Reset(nil, nil, netip.Addr{}, 0, nil)
	if v := c.RunRequest(&x); v != Continue {
		t.Fatalf("verdict %v", v)
	}
	last := &x.Timings[c.Len()-1]
	end := last.start + int64(last.Self) // the request phases' last reading
	x.Status = 200
	c.RunResponseFrom(&x, end)
	var selves int64
	for i := range c.Len() {
		selves += int64(x.Timings[i].Self)
	}
	if total := int64(x.Timings[0].Total); total != selves {
		t.Fatalf("outer total %d ns, the self times add up to %d ns", total, selves)
	}
}
