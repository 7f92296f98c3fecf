package cluster

import (
	"strings"
	"testing"
	"time"
)

func TestOptionsDefaultsAndValidation(t *testing.T) {
	o := Options{Addrs: []string{"127.0.0.1:6379"}}.withDefaults()
	if err := o.validate(); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
	if o.Workers != 64 || o.Queue != 4096 || o.CallTimeout != 50*time.Millisecond || o.FailureThreshold != 3 ||
		o.RampStep != 0.10 || o.FallbackNodes != 1 || o.NodeID == "" {
		t.Fatalf("defaults: %+v", o)
	}
	bad := Options{Workers: -1, NodeID: "a b", ProbeMin: time.Second, ProbeMax: time.Millisecond,
		Heartbeat: time.Second, MemberTTL: time.Second, RampStep: -1}.withDefaults()
	err := bad.validate()
	for _, want := range []string{"no Redis address", "workers -1", "white space", "probe max", "member TTL", "ramp step"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not mention %q", err, want)
		}
	}
}

func TestLimitSpecValidation(t *testing.T) {
	for _, s := range []LimitSpec{
		{Rate: 1, Burst: 1},
		{Name: "x", Rate: 0, Burst: 1},
		{Name: "x", Rate: 2e6, Burst: 1},
		{Name: "x", Rate: 1, Burst: 0},
		{Name: "x", Rate: 1, Burst: 1, OnFailure: 9},
	} {
		if err := s.validate(); err == nil {
			t.Errorf("%+v accepted", s)
		}
	}
	s := LimitSpec{Name: "x", Rate: 1, Burst: 1}
	s.withDefaults()
	if s.LeaseWindow != 100*time.Millisecond || s.OnFailure != FailShadow {
		t.Errorf("defaults: %+v", s)
	}
	for in, want := range map[string]FailureMode{"": FailShadow, "shadow": FailShadow, "open": FailOpen, "closed": FailClosed} {
		if got, err := ParseFailureMode(in); err != nil || got != want {
			t.Errorf("ParseFailureMode(%q) = %v, %v", in, got, err)
		}
	}
	if _, err := ParseFailureMode("fail-open"); err == nil {
		t.Error("ParseFailureMode accepted fail-open")
	}
}
