package engine_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/loopgate/loopgate/filters/ratelimit/limiter"
	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

// Redis killed under a cluster limit is one redis_lost webhook POST, a
// warn error-log line and a count, and the summary's cluster mode says
// shadow; Redis back is the resolution, and the mode leaves shadow.
func TestAlertRedisLostThroughWebhook(t *testing.T) {
	rc := &alertReceiver{}
	hook := "http://" + startUpstream(t, rc) + "/hook"
	r := redistest.Start(t)
	var errLog logBuffer
	g := startLoggingGateway(t, &errLog, "alerts:\n  webhooks: [{url: \""+hook+"\", events: [redis_lost]}]\n"+
		fmt.Sprintf(clusterNode, r.Addr(), "a", apiRoute("{key: global, rate: 1000, burst: 1000, scope: cluster}")),
		startUpstream(t, okHandler))
	mode := func() *limiter.ClusterSummary { return summary(t, g, 50).RateLimits.(limiter.Summary).Cluster }
	waitFor(t, "the node in the membership set", func() bool {
		c := mode()
		return c != nil && c.Mode == "redis" && c.LiveNodes == 1 && c.KnownNodes == 1
	})
	r.Kill()
	waitFor(t, "the shadow quota", func() bool {
		fetch(g.url("/a")) // Redis calls fail, and the breaker trips
		return mode().Mode == "shadow"
	})
	waitFor(t, "the firing alert", func() bool { return len(rc.of(r.Addr())) == 1 })
	if p := rc.of(r.Addr())[0]; p.Event != "redis_lost" || p.Status != "firing" {
		t.Fatalf("alert %+v", p)
	}
	waitFor(t, "the error-log line", func() bool {
		return bytes.Contains(errLog.Bytes(), []byte(`"level":"warn","event":"notice","message":"warning: alert redis_lost `+r.Addr()+` firing`))
	})
	r.Restart()
	waitFor(t, "the resolved alert", func() bool { return len(rc.of(r.Addr())) == 2 })
	if p := rc.of(r.Addr())[1]; p.Status != "resolved" || p.Since == nil {
		t.Fatalf("alert %+v", p)
	}
	waitMetric(t, g.srv, `loopgate_alerts_total{event="redis_lost",status="resolved"}`, 1)
	if m := mode().Mode; m == "shadow" {
		t.Fatalf("cluster mode %q after the recovery", m)
	}
}
