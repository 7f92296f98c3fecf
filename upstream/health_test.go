package upstream

import (
	"testing"
	"time"
)

// Tiered intervals and thresholds: a node is probed at New until it passed
// StableAfter in a row, then at Stable; it goes down after Unhealthy
// failures in a row, is probed at Degraded after DegradedAfter, and comes
// back after Healthy passes, at New again.
func TestHealthTiers(t *testing.T) {
	cfg := &HealthCheckConfig{Healthy: 2, Unhealthy: 3, New: 30 * time.Second, Stable: 2 * time.Minute,
		Degraded: 3 * time.Minute, StableAfter: 10, DegradedAfter: 5, PanicPercent: 50}
	n := NewNode("u", "10.0.0.1:80", 1)
	o := &Outliers{}
	o.SetHealthCheck(cfg)
	o.Configure(nil, []*Node{n})
	for i := 1; i <= 10; i++ {
		next := n.checked(cfg, true)
		if want := cfg.New; i == 10 {
			if next != cfg.Stable {
				t.Fatalf("after 10 passes: next in %v, want %v", next, cfg.Stable)
			}
		} else if next != want {
			t.Fatalf("after %d passes: next in %v, want %v", i, next, want)
		}
	}
	for i := 1; i <= 5; i++ {
		next := n.checked(cfg, false)
		if down := n.Down(); down != (i >= 3) {
			t.Fatalf("after %d failures: down %v", i, down)
		}
		if want := cfg.New; i == 5 && next != cfg.Degraded || i < 5 && next != want {
			t.Fatalf("after %d failures: next in %v", i, next)
		}
	}
	if o.down.Load() != 1 {
		t.Fatalf("upstream counts %d down, want 1", o.down.Load())
	}
	n.checked(cfg, true)
	if !n.Down() {
		t.Fatal("back after one pass, want two")
	}
	if next := n.checked(cfg, true); n.Down() || next != cfg.New || o.down.Load() != 0 {
		t.Fatalf("after two passes: down %v, next %v, %d counted down", n.Down(), next, o.down.Load())
	}
}
