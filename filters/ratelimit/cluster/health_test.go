package cluster

import "testing"

// The breaker counts only failures Redis has not contradicted: a run of
// refused calls trips it at once; a run that ends in a timeout waits for
// the controller's confirming heartbeat, and trips only if no call started
// after the timed-out one got an answer.
func TestBreakerCountsOnlyRedisFailures(t *testing.T) {
	fresh := func() *breaker { return &breaker{threshold: 3} }

	b := fresh()
	for start := int64(1); start <= 3; start++ {
		b.failed(start, false)
	}
	if b.health() != Down || b.trips.Load() != 1 {
		t.Fatalf("three refused calls: %v, %d trips; want down", b.health(), b.trips.Load())
	}

	// A busy process reads replies late: three calls time out, but calls
	// started after them were answered. Not a trip.
	b = fresh()
	b.succeeded(5)
	for start := int64(10); start <= 12; start++ {
		b.failed(start, true)
	}
	if b.health() != Up || b.confirmDue() != 12 {
		t.Fatalf("three timeouts: %v, confirm from %d; want up, awaiting the heartbeat", b.health(), b.confirmDue())
	}
	b.succeeded(13) // the confirming heartbeat, or any later call
	b.confirm(12)
	if b.health() != Up || b.trips.Load() != 0 || b.confirmed.Load() != 1 || b.failures.Load() != 0 {
		t.Fatalf("timeouts then a later answer: %v, %d trips, %d confirmed; want up", b.health(), b.trips.Load(), b.confirmed.Load())
	}

	// Redis stopped answering: the confirming heartbeat times out too.
	b = fresh()
	for start := int64(10); start <= 13; start++ {
		b.failed(start, true)
	}
	b.confirm(b.confirmDue())
	if b.health() != Down || b.trips.Load() != 1 || b.confirmDue() != 0 {
		t.Fatalf("timeouts and no answer: %v, %d trips; want down", b.health(), b.trips.Load())
	}

	// Failures of calls started before the latest answer are stale: Redis
	// answered since.
	b = fresh()
	b.succeeded(100)
	for start := int64(90); start <= 99; start++ {
		b.failed(start, false)
	}
	if b.health() != Up || b.failures.Load() != 0 {
		t.Fatalf("failures older than an answer: %v, %d counted; want up, none", b.health(), b.failures.Load())
	}
}
