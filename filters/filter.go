// Filter and Verdict: the interface every stage implements.

package filters

// Verdict is what a request phase decided.
type Verdict uint8

const (
	Continue Verdict = iota // run the next filter
	Respond                 // stop: answer with x.Rejection
	Suspend                 // wait for the ticket from x.Park to be resumed
)

var verdictNames = [...]string{"continue", "respond", "suspend"}

func (v Verdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return "unknown"
}

// Filter is one stage of a route's chain. Implementations must be safe for
// concurrent use by every loop: state that changes per request lives in the
// Exchange, per-loop state in slices indexed by Exchange.Loop.
type Filter interface {
	// Name identifies the filter in config, timings and errors.
	Name() string
	// Order places the filter in the chain; lower runs first. Orders are
	// unique within a chain.
	Order() int
	// Request runs before the upstream is chosen.
	Request(x *Exchange) Verdict
	// Response runs once the response head is known (from the upstream or
	// from a rejection), before it is written to the client.
	Response(x *Exchange)
	// HasResponseHook reports whether Response does any work. The chain
	// times the response phase only of filters that say so: the others'
	// Response still runs, but reads no clock, so a route none of whose
	// filters has a response hook closes its timings on the reading the
	// engine passes in (Chain.RunResponseFrom). A filter that says false
	// and works in Response after all loses only that work's self time.
	// It must not change once the filter is made.
	HasResponseHook() bool
	// Done runs exactly once for every exchange whose request phase this
	// filter began, however the exchange ended: served, rejected, failed
	// upstream, timed out, client gone, or cut by a drain. Whatever the
	// filter took in its request phase (a permit, a lease, a count) it
	// gives back here. x.End says how the exchange ended; x.Req is nil.
	Done(x *Exchange)
}

// Base gives a filter a name, an order and a do-nothing response phase:
// a filter that embeds it and has a Response of its own overrides
// HasResponseHook too.
type Base struct {
	FilterName  string
	FilterOrder int
}

func (b Base) Name() string        { return b.FilterName }
func (Base) Done(*Exchange)        {}
func (b Base) Order() int          { return b.FilterOrder }
func (Base) Response(x *Exchange)  {}
func (Base) HasResponseHook() bool { return false }
