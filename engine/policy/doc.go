// Package policy holds a route's resilience policies, each with its
// config, its defaults and validation, its runtime state and its metric
// series, the way Caddy keeps a module's config with its code:
//
//   - the retry policy (Retry, RetryPolicy) and each upstream's retry
//     budget (RetryBudget, Budget);
//   - the circuit breaker (CircuitBreaker, Breaker): a count-based window
//     of call outcomes that opens on a failure or slow-call rate;
//   - adaptive slow-call isolation (Isolation, Limiter): a concurrency
//     limit on the route's upstream calls that falls to a floor while its
//     calls are slow, and the route's share of each node's pool.
//
// Registry keeps the runtime state by stable name (route id, upstream
// name) across reloads, together with each upstream's outlier ejection
// state and the active health prober, and writes the policies' series.
//
// The engine compiles a config version's settings (NewBreakerSettings,
// NewIsolationSettings, NewRetryPolicy, BudgetLimitsOf) and asks the
// runtime objects on its loops; everything a loop calls is lock-free
// (atomics) and allocates nothing, but for a breaker's transitions.
// engine/config embeds the config types; this package imports neither
// the engine nor its config.
package policy
