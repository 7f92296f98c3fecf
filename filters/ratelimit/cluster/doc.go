// Package cluster enforces rate limits shared by every Loopgate node
// through Redis: a GCRA bucket per limit (or per hot client key) in Redis,
// spent in leased batches, behind a health breaker, with a local shadow
// quota while Redis is down.
//
// # The cluster bucket
//
// Each limit is one GCRA bucket in Redis (the algorithm is described in
// package ratelimit), kept by a Lua script that reads the server's TIME in
// integer microseconds, so node clocks do not matter, and stores the TAT
// with a PX expiry so idle limits leave no keys. The script grants "at most
// N": as many of the tokens asked for as the bucket holds, and says how
// long the rest would take. rueidis runs it with EVALSHA and falls back to
// EVAL when Redis has lost its script cache (after a restart).
//
// # Off the loops
//
// rueidis has no asynchronous API, so every Redis call runs on one of a
// fixed pool of workers (Options.Workers, 64) fed by a bounded queue
// (Options.Queue); the client pipelines every call (AlwaysPipelining) and
// each call has a short deadline (Options.CallTimeout, 50ms). A loop never
// waits: Limit.Take answers at once, or answers Pending and calls done on a
// worker when Redis replies; the engine hands that to the exchange's ticket
// to resume it on its own loop. A full queue is answered at once too: Take
// decides by the failure mode, Acquire returns ErrQueueFull.
//
// # Leasing
//
// A node does not ask Redis for every request. It leases tokens in batches
// of N, its recent demand over the lease window (LimitSpec.LeaseWindow,
// 100ms) and at most Burst / effective nodes, and spends them locally with
// one compare-and-swap; a refill is queued when half are gone. Redis sees
// about one call per N requests. Tokens count as spent when Redis grants
// them, so over any interval of length t the cluster admits at most
// Rate·t + Burst + the tokens the nodes held when it began, and the nodes
// hold at most Burst between them. That is the stranding bound: a node can
// be refused while up to Burst tokens sit leased on other nodes, for at
// most as long as they take to spend them or to go idle (about one second)
// and hand them back. docs/rate-limiting.md works through it.
//
// # When Redis fails
//
// rueidis redials on every call while Redis is down; the breaker stops
// that. FailureThreshold consecutive failed calls mark Redis Down (a run
// ending in a timeout only once a confirming heartbeat gets no answer
// either: a saturated node reads replies late, which is not Redis failing;
// a failure a later call's answer contradicts is not counted): no worker
// calls it, and the controller probes with a doubling backoff
// (ProbeMin to ProbeMax). A failed call and a Down state are never a
// request's error: each limit decides by its FailureMode, FailShadow by
// default: a local GCRA at the shadow quota,
//
//	shadow rate = Rate / effective nodes, shadow burst = Burst / effective nodes
//	effective nodes = max(MinNodes, known nodes)          while the counts are fresh
//	                = max(MinNodes, FallbackNodes)        once they are older than LiveMaxAge
//
// Each node heartbeats into a sorted set scored by Redis time (ZADD),
// trims members gone for LiveMaxAge (ZREMRANGEBYSCORE) and reads two
// counts: live, the members that beat within MemberTTL (ZCOUNT), and
// known, every member left (ZCARD); no key is ever enumerated, so neither
// KEYS nor SCAN runs. The shadow quota is recomputed every tick while
// Redis is up, so it is ready the moment Redis fails.
//
// # Partitions
//
// When only some nodes lose Redis, the known nodes that no longer answer
// are on their shadow quotas, Rate / known each, and the live ones leave
// that room: each token the bucket grants them costs known / live times
// the interval, so together they get Rate · live / known and the cluster
// stays within Rate. A Redis that restarted empty has lost the set; a node
// whose own entry is gone keeps the known count it had for LiveMaxAge, so
// the first node back does not take itself for the only one.
//
// When a probe succeeds the node takes Redis's answers again, but under a
// local cap that starts at the shadow quota it was on and rises by
// RampStep (10 %) of the rate each second, so the cluster returns to its
// limit gradually, never with a jump.
//
// # Per-client limits
//
// A KeyedLimit is one limit per client key (an IP, a user, a tenant, a
// header's value) across the cluster. A key is cold until it needs more
// than this node may give it alone: it is decided in a local GCRA bucket
// (a ratelimit.Keys table) at the cold share, Rate / effective nodes and
// Burst / effective nodes, the shadow quota, with no Redis call and no
// Redis key. When that bucket refuses it, the key goes hot in the same
// call: it gets a Limit of its own on a Redis bucket of its own, which
// decides, leased like any other, and whose first takes pay for the cold
// burst this node had spent (Limit.debt). The hot set is a fixed array of
// slots in groups of eight, so it is bounded: a key whose group is full
// stays cold, and a hot key idle for a second hands its lease back and
// leaves the set on the controller's tick. docs/rate-limiting.md states
// and proves the bound on what a key is admitted.
//
// # Status
//
// Cluster.Status reports Redis health, the live and effective node counts,
// and each limit's current quota, lease and counters, for the admin API and
// metrics.
package cluster
