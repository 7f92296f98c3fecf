// Package transform holds the filters that change what the upstream sees
// or where the request goes: request IDs, forwarding headers, static header
// edits, path rewrites, canary (gray) routing and consistent-hash keys.
//
// None of them rejects a request. Each writes only to the Exchange:
// header changes are queued in x.ReqEdits and x.RespEdits for the engine
// to apply as it writes a head, a rewritten path goes in x.Path, and
// routing choices in x.Upstream. Values a filter builds (an X-Forwarded-For
// list, a prefixed path) live in the exchange's arena, so the request path
// does not allocate; the one exception is a rewrite regex (see NewRewrite).
//
// The engine compiles them per route from the config, in their default
// orders (config.DefaultFilterOrders):
//
//	trusted, _ := access.ParsePrefixes(cfg.TrustedProxies)
//	fs := []filters.Filter{
//		transform.NewRequestID(100),
//		transform.NewForwarded(800, trusted),
//	}
//	if r.Rewrite != nil {
//		rw, err := transform.NewRewrite(500, r.Rewrite) // err: bad regex or path bytes
//		...
//	}
//
// Every filter is immutable after construction and safe for concurrent use
// by all loops.
package transform
