// The observability settings on a reload: metrics.per_request applies
// live, access_log is refused.

package engine

import (
	"strings"
	"testing"

	"github.com/loopgate/loopgate/engine/config"
)

func TestObservabilityOnReload(t *testing.T) {
	parse := func(text string) *config.Config {
		t.Helper()
		c, err := config.Parse([]byte("listen: 127.0.0.1:0\nadmin: \"off\"\nloops: 1\n" + text))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	s, err := New(parse(""))
	if err != nil {
		t.Fatal(err)
	}
	defer s.logs.Stop()
	if s.metrics.quiet.Load() {
		t.Fatal("per-request metrics off by default")
	}
	changes, err := s.Reload(parse("metrics: {per_request: false}\n"))
	if err != nil || !strings.Contains(changes, "metrics changed") {
		t.Fatalf("reload turning metrics.per_request off: %q, %v", changes, err)
	}
	if !s.metrics.quiet.Load() {
		t.Error("metrics.per_request: false did not apply")
	}
	if _, err := s.Reload(parse("metrics: {per_request: false}\naccess_log: {path: stdout}\n")); err == nil ||
		!strings.Contains(err.Error(), "access_log") {
		t.Errorf("reload turning the access log on: %v, want it refused naming access_log", err)
	}
}
