// Package filters is Loopgate's per-route filter chain: the stages a
// request passes between being routed and being forwarded, and that its
// response passes on the way back.
//
// A Filter has a name, a unique order, a request phase and a response phase,
// in the manner of Pingora's phases and Envoy's filter chain:
//
//	Request(x)  -> Continue | Respond | Suspend   (in ascending order)
//	Response(x)                                    (in descending order, for
//	                                                every filter whose Request ran)
//
// Continue runs the next filter; Respond ends the request phase with the
// rejection set through x.Reject; Suspend waits for an answer that comes
// later (see Parking below). Filters never write to the connection and never
// signal through side effects: the verdict is the whole answer.
//
// # Parking
//
// A filter whose answer comes later (an auth service, a Redis reply) parks
// the request and returns Suspend:
//
//	func (f *limiter) Request(x *filters.Exchange) filters.Verdict {
//		c := f.calls.Get().(*call) // per-request state, from a pool
//		c.ticket = x.Park()
//		select {
//		case f.work <- c: // a worker asks Redis, keeps the reply in c, calls c.ticket.Resume(c.then)
//			return filters.Suspend
//		default: // the workers are saturated; a loop never waits for them
//			f.calls.Put(c)
//			return f.fallback(x) // Continue or Respond: the ticket is void
//		}
//	}
//
// The ticket is a small value that may travel to any goroutine. Whoever has
// the answer calls t.Resume(fn), once, from any goroutine; it never blocks.
// fn then runs on the exchange's own event loop, with the exchange, as the
// rest of the filter's request phase: it reads the answer (kept somewhere
// the filter owns), edits x, and returns the verdict the chain continues
// with. Until then the loop serves other connections; the request waits at
// most timeouts.suspend, then gets a 504.
//
// A resume is dropped, and fn never runs, when it comes too late: the
// request timed out, its client left, or the filter returned something
// other than Suspend after parking. A second Resume of a ticket is dropped
// too. Each drop is counted (loopgate_stale_resumes_total). So fn must not
// be the only place the filter gives back what the request took: Done runs
// on every path and is that place.
//
// Sub-requests (Exchange.Sub) use the same tickets: the filter parks, passes
// the ticket to Do, and its continuation runs like fn above, with the
// response. A ticket resumed before the filter even returns Suspend (a
// sub-request that failed at once) is fine: the resume waits for the park.
//
// fn is kept until it runs, so bind it once (c.then above is c's decide
// method, bound into a field when the pool makes c) rather than making a
// closure per request: then parking allocates nothing.
//
// The Exchange is the typed per-request context: the parsed request, the
// client address, the identity established by auth, the edits to apply to
// the upstream request and to the response, and per-filter timings. Self
// time is a filter's own work in both phases; total time adds everything
// after it, up to the end of its response phase, so a slow upstream shows in
// total time and never in self time.
//
// Each kind of filter registers itself once (Register, registry.go): its
// name and default order, the config keys it owns at the top level and in
// a route, its config types, and its constructor. engine/config decodes,
// provisions and validates those configs through the registry, reporting
// to a Check (check.go); the engine builds each route's filters from them
// with a Build (build.go). Adding a filter is a package that registers and
// one blank import in filters/builtin.
//
// Chains are compiled per route when the config is loaded and are immutable;
// every loop runs them concurrently. Per-loop state (caches) is indexed by
// Exchange.Loop. A panic in a filter becomes a 500 with code 50001.
package filters
