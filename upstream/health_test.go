package upstream

import (
	"bufio"
	"net"
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

// A tick starts at most batch probes and never one already running; a node
// the prober no longer checks counts as up again. One node of two down
// does not make the group all down.
func TestProberBatchAndRemoval(t *testing.T) {
	cfg := &HealthCheckConfig{Healthy: 1, Unhealthy: 1, New: time.Second, StableAfter: 1, DegradedAfter: 1}
	nodes := []*Node{NewNode("u", "10.0.0.1:80", 1), NewNode("u", "10.0.0.2:80", 1), NewNode("u", "10.0.0.3:80", 1)}
	o := &Outliers{}
	o.SetHealthCheck(cfg)
	o.Configure(nil, nodes)
	checks := map[*Node]*HealthCheckConfig{}
	for _, n := range nodes {
		checks[n] = cfg
	}
	p := NewProber(10, 2)
	p.Set(checks)
	later := time.Now().Add(cfg.New) // every first probe is due within New
	dueNow := func() int { out, _ := p.due(later); return len(out) }
	if first, second := dueNow(), dueNow(); first != 2 || second != 1 {
		t.Fatalf("due per tick: %d then %d, want the batch of 2 then the last 1", first, second)
	}

	nodes[0].checked(cfg, false)
	g := &Group{pools: []*Pool{{node: nodes[0]}, {node: nodes[1]}}}
	if !nodes[0].Down() || o.down.Load() != 1 || g.AllDown() {
		t.Fatalf("one failure: down %v, %d counted down, all down %v", nodes[0].Down(), o.down.Load(), g.AllDown())
	}
	delete(checks, nodes[0])
	p.Set(checks)
	if nodes[0].Down() || o.down.Load() != 0 || len(p.targets) != 2 {
		t.Fatalf("after removal: down %v, %d counted down, %d probed", nodes[0].Down(), o.down.Load(), len(p.targets))
	}
}

// A prober without targets sleeps instead of ticking; the Set that gives
// it one (a reload adding a health check) wakes it, and the node is probed.
func TestProberIdleWakesOnSet(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	p := NewProber(10, 10)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { p.Run(stop); close(done) }()
	defer func() { close(stop); <-done }()
	for deadline := time.Now().Add(10 * time.Second); !p.sleeping.Load(); {
		if time.Now().After(deadline) {
			t.Fatal("a prober without targets does not sleep")
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a synchronisation
	}
	cfg := &HealthCheckConfig{TCP: true, Healthy: 1, Unhealthy: 1, New: 10 * time.Millisecond, Timeout: time.Second,
		StableAfter: 1, DegradedAfter: 1}
	n := NewNode("u", ln.Addr().String(), 1)
	p.Set(map[*Node]*HealthCheckConfig{n: cfg})
	for deadline := time.Now().Add(10 * time.Second); p.Probes() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no probe after Set gave an idle prober a target")
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a synchronisation
	}
}

// A reload that shortens the interval of a node's tier moves the probe
// already queued to min(queued, now + new interval): from 2m to 1s it is
// due within a second; back to 2m it keeps the earlier probe, and a change
// to another tier's interval leaves it alone.
func TestProberSetReschedulesQueuedProbes(t *testing.T) {
	slow := &HealthCheckConfig{Healthy: 1, Unhealthy: 1, New: 2 * time.Minute, Stable: 2 * time.Minute,
		Degraded: 3 * time.Minute, StableAfter: 10, DegradedAfter: 5}
	n := NewNode("u", "10.0.0.1:80", 1)
	p := NewProber(10, 10)
	p.Set(map[*Node]*HealthCheckConfig{n: slow})
	p.targets[n].due = time.Now().Add(slow.New) // the worst draw of the first probe

	fast := *slow
	fast.New = time.Second
	before := time.Now()
	p.Set(map[*Node]*HealthCheckConfig{n: &fast})
	if due := p.targets[n].due; due.After(time.Now().Add(fast.New)) || due.Before(before) {
		t.Fatalf("after 2m -> 1s the queued probe is due in %v, want within 1s", time.Until(due))
	}
	queued := p.targets[n].due
	p.Set(map[*Node]*HealthCheckConfig{n: slow})
	if p.targets[n].due != queued {
		t.Fatalf("after 1s -> 2m the probe queued moved from %v to %v", queued, p.targets[n].due)
	}

	p.targets[n].due = time.Now().Add(slow.New)
	queued = p.targets[n].due
	stable := *slow
	stable.Stable = time.Second // not the tier a node with no passes is in
	p.Set(map[*Node]*HealthCheckConfig{n: &stable})
	if p.targets[n].due != queued {
		t.Fatalf("a change to the stable tier moved a new node's probe by %v", queued.Sub(p.targets[n].due))
	}
	for range 10 {
		n.checked(&stable, true) // ten passes: the node is stable now
	}
	p.Set(map[*Node]*HealthCheckConfig{n: slow})
	if p.targets[n].due != queued {
		t.Fatalf("a stable node's tier went from 1s to 2m, and its probe moved")
	}
}

// Between probes the prober sleeps until the next one is due, not 10
// times a second: with one node's probe an hour out it does not look for
// due probes at all. A node added with a short interval is probed at once
// (Set wakes it), and again and again: each probe that ends with its
// successor due before the hour wakes it too.
func TestProberSleepsUntilTheNextProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 100)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
			select {
			case accepted <- struct{}{}:
			default:
			}
		}
	}()
	slow := &HealthCheckConfig{TCP: true, Healthy: 1, Unhealthy: 1, New: time.Hour, Stable: time.Hour, Degraded: time.Hour,
		Timeout: time.Second, StableAfter: 10, DegradedAfter: 10}
	far := NewNode("u", "127.0.0.1:1", 1) // never probed within the test
	p := NewProber(10, 10)
	p.Set(map[*Node]*HealthCheckConfig{far: slow})
	p.targets[far].due = time.Now().Add(time.Hour) // not the first probe's random draw
	<-p.wake                                       // Set's wake-up: Run would look twice, and the window below could see the second look
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { p.Run(stop); close(done) }()
	defer func() { close(stop); <-done }()
	for deadline := time.Now().Add(10 * time.Second); p.looks.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the prober never looked for due probes")
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a synchronisation
	}
	// Absence of wake-ups needs a window: a prober ticking every 100 ms
	// looks 5 times in it.
	looks := p.looks.Load()
	time.Sleep(500 * time.Millisecond)
	if n := p.looks.Load() - looks; n != 0 {
		t.Fatalf("the prober looked for due probes %d times in 500 ms with the next probe an hour out", n)
	}
	p.mu.Lock()
	wakeAt := p.wakeAt
	p.mu.Unlock()
	if left := time.Until(wakeAt); left < 50*time.Minute {
		t.Fatalf("the prober looks again in %v, want about an hour", left)
	}

	fast := *slow
	fast.New = 20 * time.Millisecond
	near := NewNode("u", ln.Addr().String(), 1)
	p.Set(map[*Node]*HealthCheckConfig{far: slow, near: &fast})
	for i := range 3 {
		select {
		case <-accepted:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d probes of a node checked every 20 ms, want 3: the prober slept through them", i)
		}
	}
}

// A reload that removes a node's check while its probe runs counts the
// node up (Set); the failure that probe then reports must not take it
// down again, since no later probe would bring it back.
func TestProberRemovedWhileProbing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	asked := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = bufio.NewReader(c).ReadString('\n') // the probe's request line
		asked <- c
	}()
	cfg := &HealthCheckConfig{Method: "GET", Path: "/", Expect: []int{200}, Timeout: 30 * time.Second,
		Healthy: 1, Unhealthy: 1, New: time.Hour, Stable: time.Hour, Degraded: time.Hour, StableAfter: 10, DegradedAfter: 10}
	n := NewNode("u", ln.Addr().String(), 1)
	p := NewProber(10, 10)
	p.Set(map[*Node]*HealthCheckConfig{n: cfg})
	p.mu.Lock()
	p.targets[n].due = time.Now() // probed at once, not at a random point within the hour
	p.mu.Unlock()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { p.Run(stop); close(done) }()
	defer func() { close(stop); <-done }()
	var c net.Conn
	select {
	case c = <-asked:
	case <-time.After(10 * time.Second):
		t.Fatal("the node was never probed")
	}
	p.mu.Lock()
	tgt := p.targets[n] // running while the probe is out
	p.mu.Unlock()
	p.Set(map[*Node]*HealthCheckConfig{}) // the reload drops the check mid-probe
	_, _ = c.Write([]byte("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\n\r\n"))
	c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		p.mu.Lock()
		running := tgt.running // the probe's last step, under p.mu
		p.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the probe never ended")
		}
		time.Sleep(5 * time.Millisecond) // polling interval, not a synchronisation
	}
	if n.Down() {
		t.Fatal("a probe that ended after its check was removed took the node down; nothing would bring it back")
	}
}
