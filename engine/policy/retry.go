// Retries: a route's retry policy, and each upstream's retry budget.
// Which failed attempt is tried again is the engine's decision
// (engine/retry.go), made from these.

package policy

import (
	"sync/atomic"
	"time"
)

// RetryPolicy is a route's compiled Retry, per config version.
type RetryPolicy struct {
	Attempts int           // tries in all, the first included
	methods  []string      // retried after their bytes reached a node
	onStatus uint8         // bit s-502 for a retried status 502, 503, 504
	known    uint16        // methodBit of each of methods that has one
	PerTry   time.Duration // each attempt's response timeout; 0 = the route's
}

// NewRetryPolicy compiles a route's retry section.
func NewRetryPolicy(r *Retry) RetryPolicy {
	p := RetryPolicy{Attempts: r.Attempts, methods: r.Methods, PerTry: time.Duration(r.PerTryTimeout)}
	for _, s := range r.OnStatus {
		p.onStatus |= 1 << uint(s-502)
	}
	for _, m := range r.Methods {
		p.known |= methodBit(m)
	}
	return p
}

// methodBit is a bit of its own for each method RFC 9110 and RFC 5789
// define, 0 for any other (an extension method, compared by name).
func methodBit[M string | []byte](m M) uint16 {
	switch string(m) { // compared in place: no copy of a []byte
	case "GET":
		return 1 << 0
	case "HEAD":
		return 1 << 1
	case "POST":
		return 1 << 2
	case "PUT":
		return 1 << 3
	case "DELETE":
		return 1 << 4
	case "OPTIONS":
		return 1 << 5
	case "PATCH":
		return 1 << 6
	case "TRACE":
		return 1 << 7
	case "CONNECT":
		return 1 << 8
	}
	return 0
}

// RetriesStatus reports whether status is on the route's on_status list.
func (p *RetryPolicy) RetriesStatus(status int) bool {
	return status >= 502 && status <= 504 && p.onStatus&(1<<uint(status-502)) != 0
}

// AllowsMethod reports whether method may be retried after its bytes
// reached a node: a standard method by its bit, an extension method by
// name. string(method) in a comparison does not allocate.
func (p *RetryPolicy) AllowsMethod(method []byte) bool {
	if b := methodBit(method); b != 0 {
		return p.known&b != 0
	}
	for _, m := range p.methods {
		if m == string(method) {
			return true
		}
	}
	return false
}

// Budget is one upstream's retry budget (Envoy's): retries in flight
// at most percent of the requests in flight, and always floor. Kept by the
// Registry under the upstream's name, so reloads keep the counts; a loop
// writes only its own shard.
type Budget struct {
	shards []budgetShard
}

// BudgetLimits are an upstream's RetryBudget, per config version.
type BudgetLimits struct{ percent, floor int64 }

// BudgetLimitsOf compiles an upstream's retry budget section.
func BudgetLimitsOf(b *RetryBudget) BudgetLimits {
	return BudgetLimits{percent: int64(b.Percent), floor: int64(b.MinRetries)}
}

// budgetShard is one loop's counters, padded to cache lines of their own:
// every loop writes its shard on every upstream call.
type budgetShard struct {
	_         [64]byte
	requests  atomic.Int64  // exchanges with an upstream call, from its start to the exchange's end
	retries   atomic.Int64  // those of them that retried
	retried   atomic.Uint64 // retries made
	exhausted atomic.Uint64 // retries refused by the budget
	_         [64]byte
}

// NewBudget makes a budget with a shard per loop; Registry.Budget keeps
// it by upstream name.
func NewBudget(loops int) *Budget {
	return &Budget{shards: make([]budgetShard, loops)}
}

// Begin counts a request in flight on loop.
func (b *Budget) Begin(loop int) { b.shards[loop].requests.Add(1) }

// End counts it out, with its retry when it held one.
func (b *Budget) End(loop int, retried bool) {
	s := &b.shards[loop]
	s.requests.Add(-1)
	if retried {
		s.retries.Add(-1)
	}
}

// Admit takes a retry for a request on loop within lim; one that holds a
// retry already keeps it. It sums the shards, which only a retry pays for.
func (b *Budget) Admit(loop int, holding bool, lim BudgetLimits) bool {
	s := &b.shards[loop]
	if holding {
		s.retried.Add(1)
		return true
	}
	var requests, retries int64
	for i := range b.shards {
		requests += b.shards[i].requests.Load()
		retries += b.shards[i].retries.Load()
	}
	if retries >= max(lim.floor, requests*lim.percent/100) {
		s.exhausted.Add(1)
		return false
	}
	s.retries.Add(1)
	s.retried.Add(1)
	return true
}

// Count counts a retry on loop that the budget does not limit (one after
// a connect failure, which adds no load anywhere): it is made, but holds no place among the retries in flight.
func (b *Budget) Count(loop int) { b.shards[loop].retried.Add(1) }

// BudgetTotals are a budget's counters summed over its shards, for the
// metrics page.
type BudgetTotals struct {
	Retried, Exhausted uint64
	InFlight           int64 // requests on a retry now
	Requests           int64 // requests with an upstream call in flight: what Percent is of
}

// Totals sums the shards; the admin goroutine reads them while loops write.
func (b *Budget) Totals() BudgetTotals {
	var t BudgetTotals
	for i := range b.shards {
		s := &b.shards[i]
		t.Retried += s.retried.Load()
		t.Exhausted += s.exhausted.Load()
		t.InFlight += s.retries.Load()
		t.Requests += s.requests.Load()
	}
	return t
}

// Release gives back a retry Admit took but the exchange could not use.
func (b *Budget) Release(loop int, taken bool) {
	s := &b.shards[loop]
	s.retried.Add(^uint64(0))
	if taken {
		s.retries.Add(-1)
	}
}
