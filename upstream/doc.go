// Package upstream is Loopgate's per-loop HTTP/1.1 client: connection pools,
// load balancers and the asynchronous call that carries one request to an
// upstream node and its response back.
//
// Everything here but a Node is owned by one gnet event loop. A Loop holds,
// for every upstream node, a Pool of keep-alive connections enrolled on that
// same loop, so taking and returning a connection is a free-list operation
// with no synchronisation. A node given by IP address is connected on the
// loop, and the socket goes onto the loop's poller through Host.Adopt; only
// a wait leaves the loop (a connect that needs a network round trip, or a
// host name to resolve), and its result returns through EventLoop.Execute
// or OnOpen. The connect timeout runs on the loop's clock
// (docs/architecture.md, "Dialing upstreams"). Each node counts its dials,
// reuses and closes by reason (ConnStats), so connection churn is visible
// per node.
//
// A Node is one upstream address, shared by every loop's pool for it and
// kept by the engine across config reloads. Every call reports how it
// ended to its node (Outcome), each loop into its own shard of atomics:
// metrics read it, and so does passive outlier ejection (outlier.go),
// which takes a node that fails in a row out of rotation for a while.
// Active health checks (health.go) run in a Prober off the loops
// (prober.go), bounded in flight and spread in time; loops only read a
// node's health. Group.Unavailable is the set of nodes a pick passes over.
// Balancers (balancer.go, balancers.go): round robin, smooth weighted
// round robin, random, least request, and slow start for nodes that come
// back.
//
// Loop.Update installs a config version's groups: a node that stays keeps
// its pool and connections, and the pools of nodes that left are retired,
// closing idle connections at once and busy ones after their calls.
// Groups of older versions stay usable for the requests that began on
// them. Balancers take an exclusion set (NodeSet), so a retry can go to
// another node and a pick passes over nodes out of rotation: the nodes a
// request tried (a bitmask for the first 64, a short list past them) and
// a view of the nodes ejected or down, tested node by node from their
// atomic state. It works for upstreams of any size and does not allocate.
//
// The engine is reached only through two small interfaces: Host (the
// loop's index and how it runs callbacks) and Clock (timers and time),
// which the engine implements over its timer wheel.
//
// A Call is the async client context for one exchange. Its state moves
//
//	Init -> Sending -> Sent -> Received -> Done
//	  any non-terminal state -> Failed | Timeout
//
// and every event (connection ready, response head, body bytes, failure) is
// delivered to the Call's Receiver on the loop. The same Call serves proxied
// requests and gateway sub-requests such as an external auth check.
package upstream
