package respbody

import (
	"strings"
	"testing"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		cfg  Config
		want string // a problem's path; "" = valid
	}{
		{Config{Mask: []Mask{{Path: "$.a"}}}, ""},
		{Config{}, "response_body"},
		{Config{MaxBytes: 65 << 20, Remove: []string{"$.a"}}, "response_body.max_bytes"},
		{Config{Mask: []Mask{{Path: "a.b"}}}, "response_body.mask[0].path"},
		{Config{Mask: []Mask{{Path: "$.a", KeepLast: -1}}}, "response_body.mask[0].keep_last"},
		{Config{Remove: []string{"$[x]"}}, "response_body.remove[0]"},
		{Config{Envelope: `{"data":1}`}, "response_body.envelope"},
		{Config{Envelope: `{"data":<body>,"again":<body>}`}, "response_body.envelope"},
		{Config{Envelope: `{"data":<body>`}, "response_body.envelope"},
		{Config{Envelope: `{"code":0,"data":<body>}`}, ""},
		{Config{Replace: []Replace{{Status: []int{204}}}}, "response_body.replace[0].status"},
		{Config{Replace: []Replace{{Status: []int{500}}, {Status: []int{500}}}}, "response_body.replace[1].status"},
		{Config{Replace: []Replace{{}}}, "response_body.replace[0].status"},
		{Config{Replace: []Replace{{Status: []int{502}, ContentType: "a\r\nb"}}}, "response_body.replace[0].content_type"},
		{Config{ContentTypes: []string{"text/plain; charset=utf-8"}, Remove: []string{"$.a"}}, "response_body.content_types[0]"},
		{Config{Remove: strings.Split(strings.Repeat("$.a,", 65)[:4*65-1], ",")}, "response_body.mask"},
	}
	for i, c := range cases {
		cfg := c.cfg
		r := &Route{ResponseBody: &cfg}
		r.Provision()
		var errs []string
		r.Validate(checkInto(&errs))
		switch {
		case c.want == "" && len(errs) > 0:
			t.Errorf("case %d: %v", i, errs)
		case c.want != "" && (len(errs) == 0 || !strings.HasPrefix(errs[0], c.want+": ")):
			t.Errorf("case %d: problems %v, want one at %s", i, errs, c.want)
		}
	}
}

// TestHoldBody: the plan follows from the head alone.
func TestHoldBody(t *testing.T) {
	r := &Route{ResponseBody: &Config{Mask: []Mask{{Path: "$.a"}}, Replace: []Replace{{Status: []int{503}, Body: "{}"}}}}
	r.Provision()
	var errs []string
	r.Validate(checkInto(&errs))
	f := &filter{cfg: r.ResponseBody, counts: new(Counts).route("test", 1)}
	head := func(status int, length int64, fields ...string) *codec.Response {
		h := &codec.Response{Status: status, ContentLength: length}
		for i := 0; i < len(fields); i += 2 {
			h.Headers = append(h.Headers, codec.Header{Name: []byte(fields[i]), Value: []byte(fields[i+1])})
		}
		return h
	}
	cases := []struct {
		h    *codec.Response
		hold bool
		out  outcome
	}{
		{head(200, 10, "Content-Type", "application/json"), true, numOutcomes},
		{head(200, -1, "content-type", "Application/Vnd.API+JSON; charset=utf-8"), true, numOutcomes},
		{head(200, 10, "Content-Type", "application/jsonx"), false, outType},
		{head(200, 10), false, outType},
		{head(200, 10, "Content-Type", "application/json", "Content-Encoding", "gzip"), false, outEncoded},
		{head(200, 10, "Content-Type", "application/json", "Content-Encoding", "identity"), true, numOutcomes},
		{head(200, DefaultMaxBytes+1, "Content-Type", "application/json"), false, outOverLimit},
		{head(503, 10, "Content-Type", "text/html", "Content-Encoding", "br"), false, outReplaced},
		{head(503, 0), false, outReplaced},                                     // an empty body is replaced too
		{head(200, 0, "Content-Type", "application/json"), false, numOutcomes}, // nothing to mask, nothing counted
	}
	for i, c := range cases {
		x := &filters.Exchange{}
		before := f.counts.total(c.out % numOutcomes)
		plan := f.HoldBody(x, c.h)
		if (plan.Hold > 0) != c.hold {
			t.Errorf("case %d: plan %+v, want hold %v", i, plan, c.hold)
		}
		if c.out < numOutcomes && f.counts.total(c.out) != before+1 {
			t.Errorf("case %d: %s not counted", i, c.out)
		}
		if c.out == outReplaced && (string(plan.Replace) != "{}" || !x.RespEdits.Removes([]byte("Content-Encoding"))) {
			t.Errorf("case %d: replace plan %+v, edits %+v", i, plan, x.RespEdits)
		}
	}
}
