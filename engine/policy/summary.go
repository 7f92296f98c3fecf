// Summary: a limiter's figures at one moment, for the admin port's
// summary (GET /summary), read from its atomics like its series.

package policy

// LimiterState is a route's isolation limiter at one moment.
type LimiterState struct {
	Limit    int64  `json:"limit"`     // the current concurrency limit
	Base     int64  `json:"base"`      // the configured limit it recovers to
	InFlight int64  `json:"in_flight"` // upstream calls holding a permit
	Waiting  int64  `json:"waiting"`   // requests waiting for a permit
	Queue    int64  `json:"queue"`     // how many may wait (isolation.queue); 0 = no queue
	Rejected uint64 `json:"rejected"`  // requests answered 429, code 42901, at the limit
}

// BaseState is the state of a limiter under settings s that no request
// has made yet (the engine makes a route's limiter with its first
// request): at its base limit, with nothing in flight.
func BaseState(s *IsolationSettings) LimiterState {
	return LimiterState{Limit: s.limit, Base: s.limit, Queue: s.queue}
}

// State reads the limiter's figures under settings s (the running
// version's). Atomic loads only: any goroutine, never waiting for a loop.
func (iso *Limiter) State(s *IsolationSettings) LimiterState {
	return LimiterState{Limit: iso.limit.Load(), Base: s.limit, InFlight: max(iso.inFlight.Load(), 0),
		Waiting: max(iso.waiting.Load(), 0), Queue: s.queue, Rejected: iso.rejected.Load()}
}
