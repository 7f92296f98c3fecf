// Test hooks shared by the internal tests and the engine_test package.

package engine

import (
	"context"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/access"
	"github.com/loopgate/loopgate/filters/auth"
	"github.com/loopgate/loopgate/filters/ratelimit/limiter"
	"github.com/loopgate/loopgate/pool/pooltest"
)

// Every test runs with the exchange's phase transitions checked: an
// illegal one panics (see setPhase).
func init() { phaseChecks = true }

// Bans, Verifier and Limits are the server's filter objects the tests
// reach (Service): the ban list, the running version's verifier, the
// rate limits' store.
func (s *Server) Bans() *access.Bans       { v, _ := Service[*access.Bans](s); return v }
func (s *Server) Verifier() *auth.Verifier { v, _ := Service[*auth.Verifier](s); return v }
func (s *Server) Limits() *limiter.Store   { v, _ := Service[*limiter.Store](s); return v }

// ServeForTest runs srv until the test ends and returns its listen address.
// At the end it shuts srv down, unless the test already did (and judged
// Shutdown's result itself), and fails the test if Shutdown or Run returns
// an error, Run does not return, or a buffer is left unreleased. The leak
// check sees every buffer in the process: serve no gateway from a test that
// runs in parallel with other gateway tests (parallel subtests sharing
// their parent's gateway are fine, since its check runs after them all).
func ServeForTest(t testing.TB, srv *Server) string {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- srv.Run() }()
	select {
	case err := <-done:
		t.Fatalf("gateway exited: %v", err)
	case <-srv.Ready():
	}
	a, err := srv.Addr()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		t.Helper()
		if !srv.Draining() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := srv.Shutdown(ctx); err != nil {
				t.Errorf("gateway shutdown: %v", err)
			}
		}
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("gateway Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("gateway Run has not returned 10s after Shutdown")
			return
		}
		pooltest.CheckNoLeaks(t)
	})
	return a.String()
}

// TouchRoutesForTest records one finished 200 in every route of the running
// config, from the test's goroutine, as if a request had reached each: the
// scrape tests need a page of every route without sending thousands of
// requests.
func (s *Server) TouchRoutesForTest() {
	snap := s.state.Load().snap
	for i := range snap.routes.len() {
		if snap.routes.at(i).empty() {
			continue
		}
		snap.routes.at(i).metrics.observe(0, 200, 0, 1500e3)
	}
}
