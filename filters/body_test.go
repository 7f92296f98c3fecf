package filters_test

import (
	"testing"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

// panickyBody is a BodyFilter whose every body method panics.
type panickyBody struct{ filters.Base }

func (panickyBody) Request(*filters.Exchange) filters.Verdict { return filters.Continue }
func (panickyBody) HoldBody(*filters.Exchange, *codec.Response) filters.BodyPlan {
	panic("hold")
}
func (panickyBody) RewriteBody(*filters.Exchange, []byte, []byte) ([]byte, bool) { panic("rewrite") }
func (panickyBody) BodyStreamed(*filters.Exchange, filters.StreamReason)         { panic("streamed") }

// TestBodyFilterPanics: a body filter that panics costs only its own
// work: the body streams, or goes out as it came.
func TestBodyFilterPanics(t *testing.T) {
	c, err := filters.NewChain([]filters.Filter{panickyBody{filters.Base{FilterName: "p", FilterOrder: 1}}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if c.Body() == nil {
		t.Fatal("the chain did not find its body filter")
	}
	x := &filters.Exchange{}
	if plan := c.HoldBody(x, &codec.Response{Status: 200}); plan.Hold != 0 || plan.Replace != nil {
		t.Fatalf("plan after a panic: %+v", plan)
	}
	if out, ok := c.RewriteBody(x, []byte("{}"), nil); ok || out != nil {
		t.Fatalf("rewrite after a panic: %q, %v", out, ok)
	}
	c.BodyStreamed(x, filters.StreamOverLimit)
}
