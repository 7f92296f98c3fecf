// Counts: what happened to the bodies of each route running the filter,
// for loopgate_response_body_total{route,outcome}.

package respbody

import (
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// outcome is what the filter did with one response body.
type outcome uint8

const (
	outRewritten outcome = iota // masked, trimmed or wrapped
	outUnchanged                // held, valid JSON, nothing matched: sent as it came
	outReplaced                 // the status's fixed body was sent
	outInvalid                  // held, not valid JSON: sent as it came
	outOverLimit                // longer than max_bytes: streamed untouched
	outType                     // a type not listed: streamed untouched
	outEncoded                  // a Content-Encoding other than identity: streamed untouched
	outBudget                   // max_buffered_bytes reached: streamed untouched
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"rewritten", "unchanged", "replaced", "invalid_json", "over_limit", "type", "encoded", "budget"}

func (o outcome) String() string { return outcomeNames[o] }

// maxRoutes bounds the routes counted apart. Counters outlive reloads (a
// route keeps its counts across versions), so route ids a reload removed
// stay; past the bound, a route new to the filter counts under
// otherRoute.
const (
	maxRoutes  = 1 << 16
	otherRoute = "(other)"
)

// Counts is the server's one set of response_body counters, across config
// versions (filters.Registration.Service): one routeCounts per route that
// runs the filter, made when its chain is built. Safe for concurrent use.
type Counts struct {
	mu     sync.Mutex
	routes map[string]*routeCounts
}

// routeCounts are one route's counters. shards[i] is loop i's, made by
// loop i on its first count there (one allocation per loop and route,
// ever): a route whose bodies no loop handled costs a slice of nil
// pointers and writes no series.
type routeCounts struct {
	route  string
	shards []atomic.Pointer[countShard]
}

type countShard struct {
	n [numOutcomes]atomic.Uint64
	_ [64]byte // keep loops' shards on separate cache lines
}

// route returns the counters of route id on a server of loops event
// loops. Off the loops, when a chain is built.
func (c *Counts) route(id string, loops int) *routeCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.routes == nil {
		c.routes = map[string]*routeCounts{}
	}
	if _, ok := c.routes[id]; !ok && len(c.routes) >= maxRoutes {
		id = otherRoute
	}
	rc := c.routes[id]
	if rc == nil {
		rc = &routeCounts{route: id, shards: make([]atomic.Pointer[countShard], max(loops, 1))}
		c.routes[id] = rc
	}
	return rc
}

// add counts one body on loop. A shard is loop's alone unless the route
// was first built for fewer loops (a test's chain): then loops share it,
// and the first to make it wins.
func (r *routeCounts) add(loop int, o outcome) {
	p := &r.shards[loop%len(r.shards)]
	sh := p.Load()
	if sh == nil { // once per loop, on the route's first body there
		if sh = new(countShard); !p.CompareAndSwap(nil, sh) {
			sh = p.Load()
		}
	}
	sh.n[o].Add(1)
}

// total returns the route's bodies that had outcome o.
func (r *routeCounts) total(o outcome) uint64 {
	var t uint64
	for i := range r.shards {
		if sh := r.shards[i].Load(); sh != nil {
			t += sh.n[o].Load()
		}
	}
	return t
}

// list is the routes' counters by route id.
func (c *Counts) list() []*routeCounts {
	c.mu.Lock()
	out := make([]*routeCounts, 0, len(c.routes))
	for _, r := range c.routes {
		out = append(out, r)
	}
	c.mu.Unlock()
	slices.SortFunc(out, func(a, b *routeCounts) int { return strings.Compare(a.route, b.route) })
	return out
}

// WriteMetrics writes loopgate_response_body_total, a series per route and
// outcome that happened there, in the Prometheus text format. The server
// hands it a buffered writer (the metrics page streams).
func (c *Counts) WriteMetrics(w io.Writer) {
	io.WriteString(w, "# HELP loopgate_response_body_total Response bodies on routes with response_body, by route and what was done with them.\n")
	io.WriteString(w, "# TYPE loopgate_response_body_total counter\n")
	line := make([]byte, 0, 128)
	for _, r := range c.list() {
		for o := range numOutcomes {
			n := r.total(o)
			if n == 0 {
				continue
			}
			line = append(line[:0], `loopgate_response_body_total{route="`...)
			line = appendLabelValue(line, r.route)
			line = append(line, `",outcome="`...)
			line = append(line, o.String()...)
			line = append(line, `"} `...)
			line = strconv.AppendUint(line, n, 10)
			line = append(line, '\n')
			w.Write(line)
		}
	}
}

// appendLabelValue escapes a label value as the text format wants it.
func appendLabelValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}
