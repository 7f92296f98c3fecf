// The reload hooks of the observability settings.

package engine

import (
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
	running := parse("")
	s, err := New(running)
	if err != nil {
		t.Fatal(err)
	}
	defer s.logs.Stop()
	if s.metrics.quiet.Load() {
		t.Fatal("per-request metrics off by default")
	}
	off := parse("metrics: {per_request: false}\n")
	if got := restartOnlyLogSettings(running, off); len(got) != 0 {
		t.Errorf("metrics.per_request reported as restart-only: %v", got)
	}
	s.applyLiveObservability(off)
	if !s.metrics.quiet.Load() {
		t.Error("metrics.per_request: false did not apply")
	}
	logged := parse("access_log: {path: stdout, ring_size: 64}\n")
	if got := restartOnlyLogSettings(running, logged); len(got) != 2 {
		t.Errorf("restart-only settings %v, want access_log.path and access_log.ring_size", got)
	}
}
