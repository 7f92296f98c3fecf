// Package transform holds the filters that change what the upstream sees
// or where the request goes: request IDs, W3C trace context, forwarding
// headers, static header edits, path rewrites, canary (gray) routing,
// directed nodes and consistent-hash keys.
//
// None of them rejects a request, except hash and direct_node for a
// repeated header, and direct_node for a client that may not choose a node
// or names none of the upstream's. Each writes only to the Exchange:
// header changes are queued in x.ReqEdits and x.RespEdits for the engine
// to apply as it writes a head, a rewritten path goes in x.Path, and
// routing choices in x.Upstream. Values a filter builds (an X-Forwarded-For
// list, a prefixed path) live in the exchange's arena, so the request path
// does not allocate; the one exception is a rewrite regex (see NewRewrite).
//
// Each registers itself (config.go) with its name, default order and the
// route keys it owns: headers owns request_headers and response_headers,
// rewrite, gray, hash and direct_node their own sections; trace_context
// the top-level trace_context section; request_id and forwarded have no
// config. engine/config decodes those keys into this package's types
// and runs their Validate, which checks each section once and keeps what
// it compiled (header edits in order, the normalised strip prefix, the
// regex); the engine then builds each route's filters through the
// registry, from those results:
//
//	route := &transform.RewriteRoute{Rewrite: &transform.Rewrite{StripPrefix: "/api"}}
//	// ... route.Validate(check), as engine/config does ...
//	rw, err := transform.NewRewrite(500, route.Rewrite) // err: not validated
//
// Every filter is immutable after construction and safe for concurrent use
// by all loops.
package transform
