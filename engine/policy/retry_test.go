package policy

import "testing"

// The budget allows max(floor, percent of requests in flight) retries in
// flight, counted across loops; a request already on a retry keeps its own.
func TestRetryBudget(t *testing.T) {
	b := NewBudget(2)
	lim := BudgetLimitsOf(&RetryBudget{Percent: 20, MinRetries: 3})
	for range 10 {
		b.Begin(0)
	}
	for i := range 3 {
		if !b.Admit(i%2, false, lim) {
			t.Fatalf("retry %d refused under the floor of 3", i)
		}
	}
	if b.Admit(1, false, lim) {
		t.Fatal("a 4th retry in flight of 10 requests was admitted: floor 3, 20 % is 2")
	}
	if !b.Admit(0, true, lim) {
		t.Fatal("a request holding a retry was refused its next attempt")
	}
	for range 20 {
		b.Begin(1)
	}
	for i := range 3 { // 30 in flight: 6 retries
		if !b.Admit(1, false, lim) {
			t.Fatalf("retry %d of 6 refused with 30 requests in flight", 4+i)
		}
	}
	if b.Admit(0, false, lim) {
		t.Fatal("a 7th retry admitted with 30 requests in flight")
	}
	if got := b.Totals().Exhausted; got != 2 {
		t.Fatalf("exhausted %d, want 2", got)
	}
	b.End(0, true)
	b.End(1, true) // 28 in flight, 4 on retries: 5 allowed
	if !b.Admit(0, false, lim) {
		t.Fatal("retries that ended did not free their places")
	}
	// The metrics page's sums, across both shards: 8 retries made (one of
	// them by a request already holding its retry), 2 refused, 5 on a retry, of
	// 28 requests in flight.
	if got, want := b.Totals(), (BudgetTotals{Retried: 8, Exhausted: 2, InFlight: 5, Requests: 28}); got != want {
		t.Fatalf("totals %+v, want %+v", got, want)
	}
}

// A listed method is retried, standard or extension, spelt exactly; any
// other is not, whatever its bit or name shares with a listed one.
func TestRetryAllowsListedMethods(t *testing.T) {
	p := NewRetryPolicy(&Retry{Attempts: 2, Methods: []string{"GET", "PUT", "PURGE"}})
	for m, want := range map[string]bool{
		"GET": true, "PUT": true, "PURGE": true,
		"POST": false, "DELETE": false, "HEAD": false, "get": false, "PURGED": false, "": false,
	} {
		if got := p.AllowsMethod([]byte(m)); got != want {
			t.Errorf("AllowsMethod(%q) = %v, want %v", m, got, want)
		}
	}
	if none := NewRetryPolicy(&Retry{Attempts: 2}); none.AllowsMethod([]byte("GET")) {
		t.Error("a policy without methods allows GET")
	}
}
