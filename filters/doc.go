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
// rejection set through x.Reject; Suspend parks the exchange until the filter
// calls x.Resume from the same loop (an auth sub-request, a Redis reply).
// Filters never write to the connection and never signal through side
// effects: the verdict is the whole answer.
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
