// Counts: what happened to the bodies of routes running the filter, for
// loopgate_response_body_total.

package respbody

import (
	"fmt"
	"io"
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

// countShards spreads the counters over cache lines by loop, so loops do
// not write the same line; a gateway with more loops shares shards.
const countShards = 16

// Counts is the server's one set of response_body counters, across config
// versions (filters.Registration.Service). Safe for concurrent use.
type Counts struct {
	shards [countShards]struct {
		n [numOutcomes]atomic.Uint64
		_ [64]byte
	}
}

func (c *Counts) add(loop int, o outcome) { c.shards[loop%countShards].n[o].Add(1) }

// Total returns the bodies that had outcome o.
func (c *Counts) Total(o outcome) uint64 {
	var t uint64
	for i := range c.shards {
		t += c.shards[i].n[o].Load()
	}
	return t
}

// WriteMetrics writes loopgate_response_body_total, one series per
// outcome, in the Prometheus text format.
func (c *Counts) WriteMetrics(w io.Writer) {
	fmt.Fprintln(w, "# HELP loopgate_response_body_total Response bodies on routes with response_body, by what was done with them.")
	fmt.Fprintln(w, "# TYPE loopgate_response_body_total counter")
	for o := range numOutcomes {
		fmt.Fprintf(w, "loopgate_response_body_total{outcome=%q} %d\n", o.String(), c.Total(o))
	}
}
