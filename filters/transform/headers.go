// The headers filter: static set/add/remove edits from a route's config.

package transform

import (
	"errors"

	"github.com/loopgate/loopgate/filters"
)

// MaxHeaderOps bounds each of a route's set, add and remove lists, leaving
// room in the exchange's edit lists for the other filters' edits.
const MaxHeaderOps = 16

type headersFilter struct {
	filters.Base
	req, resp headerOps
}

// headerOps are one head's edits, prepared once: names validated, values
// as bytes, in name order so runs are reproducible.
type headerOps struct {
	remove []string
	set    []filters.Header
	add    []filters.Header
}

var _ filters.Filter = (*headersFilter)(nil)

// NewHeaders returns the "headers" filter for a route config Validate
// accepted: the request edits are queued on the upstream request in the
// request phase, the response edits on the response in the response phase
// (error responses included). Either list may be nil. Validate has checked
// the names and values (HeaderOps) and prepared them, so this only copies;
// it fails when cfg was not validated. Safe for concurrent use.
func NewHeaders(order int, cfg *HeadersRoute) (filters.Filter, error) {
	f := &headersFilter{Base: filters.Base{FilterName: NameHeaders, FilterOrder: order}}
	for _, side := range []struct {
		cfg *HeaderOps
		ops *headerOps
	}{{cfg.Request, &f.req}, {cfg.Response, &f.resp}} {
		switch {
		case side.cfg == nil:
		case !side.cfg.checked:
			return nil, errors.New("transform: headers: the config was not validated")
		default:
			*side.ops = side.cfg.ops
		}
	}
	return f, nil
}

// Request queues the request edits. It does not allocate once the edit
// lists have grown.
func (f *headersFilter) Request(x *filters.Exchange) filters.Verdict {
	f.req.queue(&x.ReqEdits)
	return filters.Continue
}

// Response queues the response edits.
func (f *headersFilter) Response(x *filters.Exchange) { f.resp.queue(&x.RespEdits) }

// HasResponseHook reports whether the route has response edits: a
// request-only headers filter has no response work to time.
func (f *headersFilter) HasResponseHook() bool {
	return len(f.resp.remove)+len(f.resp.set)+len(f.resp.add) > 0
}

func (ops *headerOps) queue(e *filters.HeaderEdits) {
	for _, name := range ops.remove {
		e.AddRemove(name)
	}
	for _, h := range ops.set {
		e.AddSet(h.Name, h.Value)
	}
	for _, h := range ops.add {
		e.AddAppend(h.Name, h.Value)
	}
}
