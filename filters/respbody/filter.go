// The filter: which responses are held, and what is done to a held body.

package respbody

import (
	"errors"

	"github.com/bytedance/sonic"
	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/filters"
)

type filter struct {
	filters.Base
	cfg    *Config
	counts *routeCounts // the route's
}

var _ filters.BodyFilter = (*filter)(nil)

func newFilter(b *filters.Build) (filters.Filter, error) {
	c := b.Config.(*Route).ResponseBody
	if c == nil {
		return nil, nil
	}
	if !c.checked {
		return nil, errors.New("respbody: the config was not validated")
	}
	counts, ok := filters.Service[*Counts](b)
	if !ok {
		counts = new(Counts) // a chain built without a server (tests)
	}
	return &filter{Base: filters.Base{FilterName: Name, FilterOrder: b.Order}, cfg: c,
		counts: counts.route(b.RouteID, b.Loops)}, nil
}

// Request does nothing: the filter works on the response alone.
func (f *filter) Request(*filters.Exchange) filters.Verdict { return filters.Continue }

// HoldBody holds a body the route rewrites when its head allows it:
// listed type, no Content-Encoding but identity, a known length within
// max_bytes or an unknown one. A replaced status is replaced whatever its
// head says, an empty body included.
func (f *filter) HoldBody(x *filters.Exchange, h *codec.Response) filters.BodyPlan {
	c := f.cfg
	if rp := c.replaceFor[h.Status]; rp != nil {
		x.RespEdits.AddSet("Content-Type", rp.ctype)
		x.RespEdits.AddRemove("Content-Encoding")
		x.RespEdits.AddRemove("ETag")
		f.counts.add(x.Loop, outReplaced)
		return filters.BodyPlan{Replace: rp.body}
	}
	if h.ContentLength == 0 && !h.Chunked || c.ed.all == 0 && (c.pre == nil || h.Status < 200 || h.Status > 299) {
		return filters.BodyPlan{} // an empty body (only a replace applies), or nothing to do for this status
	}
	var ctype, enc []byte
	for _, hd := range h.Headers {
		switch {
		case codec.EqualFold(hd.Name, "Content-Type"):
			ctype = hd.Value
		case codec.EqualFold(hd.Name, "Content-Encoding"):
			enc = hd.Value
		}
	}
	switch {
	case len(enc) > 0 && !codec.EqualFold(enc, "identity"):
		f.counts.add(x.Loop, outEncoded)
		return filters.BodyPlan{}
	case !c.listed(ctype):
		f.counts.add(x.Loop, outType)
		return filters.BodyPlan{}
	case h.ContentLength > int64(c.MaxBytes):
		f.counts.add(x.Loop, outOverLimit)
		return filters.BodyPlan{}
	}
	// The engine drops the ETag only if RewriteBody changes the body: one
	// sent as it came keeps every header the upstream gave it.
	return filters.BodyPlan{Hold: int(c.MaxBytes)}
}

// listed reports whether the media type of a Content-Type value is one
// the route rewrites.
func (c *Config) listed(v []byte) bool {
	if i := indexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	v = codec.TrimOWS(v)
	for _, t := range c.ContentTypes {
		if t[0] == '+' {
			if len(v) > len(t) && codec.EqualFold(v[len(v)-len(t):], t) {
				return true
			}
		} else if codec.EqualFold(v, t) {
			return true
		}
	}
	return false
}

func indexByte(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// RewriteBody applies the masks and removals, then the envelope (2xx
// only). A body that is not valid JSON is left as it came.
func (f *filter) RewriteBody(x *filters.Exchange, body, dst []byte) ([]byte, bool) {
	c := f.cfg
	if !sonic.Valid(body) {
		f.counts.add(x.Loop, outInvalid)
		return nil, false
	}
	wrap := c.pre != nil && x.Status >= 200 && x.Status <= 299
	if wrap {
		dst = append(dst, c.pre...)
	}
	dst, changed := c.ed.edit(body, dst)
	if wrap {
		dst = append(dst, c.post...)
	}
	if !changed && !wrap {
		f.counts.add(x.Loop, outUnchanged)
		return nil, false
	}
	f.counts.add(x.Loop, outRewritten)
	return dst, true
}

// BodyStreamed counts a held body that streamed untouched after all.
func (f *filter) BodyStreamed(x *filters.Exchange, why filters.StreamReason) {
	if why == filters.StreamBudget {
		f.counts.add(x.Loop, outBudget)
		return
	}
	f.counts.add(x.Loop, outOverLimit)
}
