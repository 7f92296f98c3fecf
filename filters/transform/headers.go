// The headers filter: static set/add/remove edits from a route's config.

package transform

import (
	"fmt"
	"slices"
	"strings"

	"github.com/loopgate/loopgate/codec"
	"github.com/loopgate/loopgate/engine/config"
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

// NewHeaders returns the "headers" filter: req's edits are queued on the
// upstream request in the request phase, resp's on the response in the
// response phase (error responses included). Either may be nil. Each list
// holds at most MaxHeaderOps entries; names must be tokens, values may not
// hold control characters other than HTAB, and the framing fields
// (Content-Length, Transfer-Encoding) and hop-by-hop fields (Connection,
// Upgrade, ...) may not be edited: the engine owns them. Safe for
// concurrent use.
func NewHeaders(order int, req, resp *config.HeaderOps) (filters.Filter, error) {
	f := &headersFilter{Base: filters.Base{FilterName: "headers", FilterOrder: order}}
	var err error
	if f.req, err = compileHeaderOps("request_headers", req); err != nil {
		return nil, err
	}
	if f.resp, err = compileHeaderOps("response_headers", resp); err != nil {
		return nil, err
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

func compileHeaderOps(where string, c *config.HeaderOps) (headerOps, error) {
	var ops headerOps
	if c == nil {
		return ops, nil
	}
	if len(c.Set) > MaxHeaderOps || len(c.Add) > MaxHeaderOps || len(c.Remove) > MaxHeaderOps {
		return ops, fmt.Errorf("transform: %s: more than %d entries in set, add or remove", where, MaxHeaderOps)
	}
	for _, name := range c.Remove {
		if err := checkHeaderName(where+".remove", name); err != nil {
			return ops, err
		}
		ops.remove = append(ops.remove, name)
	}
	var err error
	if ops.set, err = compileHeaderMap(where+".set", c.Set); err != nil {
		return ops, err
	}
	if ops.add, err = compileHeaderMap(where+".add", c.Add); err != nil {
		return ops, err
	}
	return ops, nil
}

func compileHeaderMap(where string, m map[string]string) ([]filters.Header, error) {
	var out []filters.Header
	for name, value := range m {
		if err := checkHeaderName(where, name); err != nil {
			return nil, err
		}
		for i := 0; i < len(value); i++ {
			if c := value[i]; (c < 0x20 && c != '\t') || c == 0x7f {
				return nil, fmt.Errorf("transform: %s: value of %s holds a control character", where, name)
			}
		}
		out = append(out, filters.Header{Name: name, Value: []byte(strings.Trim(value, " \t"))})
	}
	slices.SortFunc(out, func(a, b filters.Header) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func checkHeaderName(where, name string) error {
	if name == "" {
		return fmt.Errorf("transform: %s: empty header name", where)
	}
	for i := 0; i < len(name); i++ {
		if !tchar[name[i]] {
			return fmt.Errorf("transform: %s: %q is not a valid header name", where, name)
		}
	}
	if codec.IsHopByHop([]byte(name)) || strings.EqualFold(name, "Content-Length") {
		return fmt.Errorf("transform: %s: %s is managed by the gateway and cannot be edited", where, name)
	}
	return nil
}

// tchar: RFC 9110 token characters.
var tchar = func() (t [256]bool) {
	for _, c := range []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ!#$%&'*+-.^_`|~") {
		t[c] = true
	}
	return t
}()
