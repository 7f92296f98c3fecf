// Package limiter is Loopgate's rate_limit filter: it applies a route's
// rate_limits, local and cluster-wide, to every request, and keeps their
// state in a server-owned Store so that it outlives config reloads.
//
// # Limits
//
// A route lists its limits; a request passes only when every one allows
// it:
//
//	rate_limits:
//	  - {key: global, rate: 1000, burst: 100, scope: cluster}
//	  - {key: ip, rate: 50, burst: 20}
//	  - {key: "header:X-Tenant-Id", rate: 200, burst: 50}
//
// The key says what is counted: global (one bucket shared by every route
// naming it), route, ip (the client IP as trusted proxies report it), user
// (auth's subject), tenant (auth's tenant, else the tenant header) or
// header:<Name>. Local limits are a GCRA bucket per key on this node
// (package ratelimit): one compare-and-swap, never a lock, and keyed
// tables of bounded size. Cluster limits are one bucket in Redis shared by
// every node (package cluster), spent from leased batches, with a shadow
// quota while Redis is down; a cluster ip, user, tenant or header limit
// (cluster.KeyedLimit) decides each key at its local share until the key
// needs more, and then leases it through a Redis bucket of its own.
//
// # The request path
//
// Local limits are decided first, so a request they refuse costs no
// cluster token and no Redis call. A cluster limit answers at once from
// the node's lease, or the request parks (filters.Exchange.Park) while a
// worker asks Redis, and the worker's answer resumes it on its own loop.
// A request that ends while parked (its client left, or it timed out)
// gives its tokens back in the Done phase, or, when Redis had not answered
// yet, the worker gives them back when it does. A refusal is 429, code
// 42902, with Retry-After and X-RateLimit-Limit, -Remaining and -Reset; a
// fail-closed cluster limit while Redis is down answers 503, code 50304.
//
// # State across reloads
//
// The engine provides one Store (a filters.Services object). Each limit's
// state is kept there under a stable name, the route id and the key
// ("api/ip", or "global"), so a config compiled again finds its buckets,
// key tables and cluster limits where the last one left them: a client at
// its limit gets no fresh burst from a reload. The Store also owns the
// process's one cluster.Cluster, the goroutine that sweeps idle keys off
// the loops, and the status the admin port shows (Status, Handler,
// WriteMetrics).
package limiter
