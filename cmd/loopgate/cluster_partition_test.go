// Cluster rate limits across Redis partitions: two loopgate processes
// share one limit through a real redis-server, each over a TCP proxy the
// test can blackhole.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

// blackhole is a TCP proxy to Redis that the test can cut: while cut it
// accepts connections and holds every byte either way, closing nothing,
// as a network that drops packets would; once healed it forwards what it
// held and carries on. A connection whose far side closed while cut is
// closed when the cut heals.
type blackhole struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	open  *sync.Cond // broadcast when cut turns false
	cut   bool
	conns map[net.Conn]struct{}
}

func startBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	b.open = sync.NewCond(&b.mu)
	go b.serve()
	t.Cleanup(func() {
		ln.Close()
		b.set(false)
		b.mu.Lock()
		for c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
	})
	return b
}

func (b *blackhole) addr() string { return b.ln.Addr().String() }

// set cuts the path (true) or heals it.
func (b *blackhole) set(cut bool) {
	b.mu.Lock()
	b.cut = cut
	b.mu.Unlock()
	if !cut {
		b.open.Broadcast()
	}
}

// pass waits while the path is cut.
func (b *blackhole) pass() {
	b.mu.Lock()
	for b.cut {
		b.open.Wait()
	}
	b.mu.Unlock()
}

func (b *blackhole) track(c net.Conn) {
	b.mu.Lock()
	b.conns[c] = struct{}{}
	b.mu.Unlock()
}

func (b *blackhole) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.track(c)
		go func() {
			up, err := net.Dial("tcp", b.target)
			if err != nil {
				b.pass() // a refused connect is news the cut would not carry
				c.Close()
				return
			}
			b.track(up)
			go b.copy(up, c)
			b.copy(c, up)
		}()
	}
}

// copy forwards src to dst while the path is open.
func (b *blackhole) copy(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			b.pass()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	b.pass()
	dst.Close()
	src.Close()
}

// clusterStatus is what GET /limits on the admin port says of Redis.
type clusterStatus struct {
	Redis      string `json:"redis"`
	LiveNodes  int    `json:"live_nodes"`
	KnownNodes int    `json:"known_nodes"`
	Trips      uint64 `json:"trips"`
}

func readCluster(adminAddr string) (clusterStatus, error) {
	code, body, err := adminGet(adminAddr, "/limits")
	if err != nil || code != 200 {
		return clusterStatus{}, fmt.Errorf("GET /limits: %d %v", code, err)
	}
	var st struct {
		Cluster *clusterStatus `json:"cluster"`
	}
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Cluster == nil {
		return clusterStatus{}, fmt.Errorf("GET /limits: %v in %s", err, body)
	}
	return *st.Cluster, nil
}

// pacedLoad offers each gateway perSecond requests a second from a few
// keep-alive clients, and counts the answers by kind.
type pacedLoad struct {
	stop                atomic.Bool
	wg                  sync.WaitGroup
	ok, limited, failed atomic.Int64
	lastFailure         atomic.Value // string
}

func startPacedLoad(listens []string, clientsPerGW, perSecond int) *pacedLoad {
	l := &pacedLoad{}
	interval := time.Second * time.Duration(clientsPerGW) / time.Duration(perSecond)
	for _, addr := range listens {
		tr := &http.Transport{MaxIdleConnsPerHost: clientsPerGW, DisableCompression: true}
		client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		for range clientsPerGW {
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				next := time.Now()
				for !l.stop.Load() {
					l.one(client, "http://"+addr+"/a")
					// Pacing shapes the load; it synchronises nothing.
					next = next.Add(interval)
					if d := time.Until(next); d > 0 {
						time.Sleep(d)
					} else {
						next = time.Now()
					}
				}
			}()
		}
	}
	return l
}

func (l *pacedLoad) one(client *http.Client, url string) {
	resp, err := client.Get(url)
	if err != nil {
		l.failed.Add(1)
		l.lastFailure.Store(err.Error())
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		l.ok.Add(1)
	case http.StatusTooManyRequests:
		l.limited.Add(1)
	default:
		l.failed.Add(1)
		l.lastFailure.Store(resp.Status)
	}
}

func (l *pacedLoad) finish() { l.stop.Store(true); l.wg.Wait() }

// Two gateways share {key: global, rate: 200, scope: cluster} through one
// redis-server, each over its own blackhole proxy. In every partition the
// two together admit at most 1.2 × the limit, counted at the upstream over
// a window of a few seconds that starts when the partition does:
//
//   - b cut off: b on its shadow quota (R/2), a leaves b's half of the
//     bucket unspent (before the fix a spent the whole bucket: 1.5 R);
//   - both cut off: both on their shadow quotas;
//   - a back before b: a takes half the bucket and ramps from R/2 (before,
//     a counted itself alone once b's heartbeat had aged out);
//   - Redis restarted empty while b is cut off: a, the first node back,
//     keeps counting b (before, it saw an empty set and took the whole
//     bucket at once);
//   - b back: the two share the bucket again.
//
// Each window must also admit at least half the limit: the shadow quotas
// and the bucket are spent, not idle. No request fails.
func TestClusterLimitAcrossRedisPartitions(t *testing.T) {
	r := redistest.Start(t)
	var admitted atomic.Int64
	up := serveUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		admitted.Add(1)
		io.WriteString(w, "ok")
	})
	const rate, burst = 200.0, 20.0
	type node struct {
		id            string
		proxy         *blackhole
		g             *gateway
		listen, admin string
	}
	var nodes []*node
	for _, id := range []string{"a", "b"} {
		n := &node{id: id, proxy: startBlackhole(t, r.Addr())}
		// Heartbeats every 200 ms, a node unheard of for 600 ms is taken
		// for cut off. The call deadline leaves room for a loaded machine
		// under -race and still lets a cut-off node fall back within a
		// second.
		n.g, n.listen, n.admin = startServing(t, fmt.Sprintf(`
redis: {addrs: ["%s"], call_timeout: 250ms, key_prefix: "part:"}
cluster: {node_id: %s, fallback_nodes: 2, heartbeat: 200ms, member_ttl: 600ms, probe_min: 50ms, probe_max: 400ms}
upstreams: [{name: backend, nodes: ["%%s"]}]
routes:
  - {id: api, prefix: /, upstream: backend, rate_limits: [{key: global, rate: %v, burst: %v, scope: cluster}]}
`, n.proxy.addr(), id, rate, burst), up)
		nodes = append(nodes, n)
	}
	a, b := nodes[0], nodes[1]
	waitStatus := func(n *node, what string, cond func(clusterStatus) bool) {
		t.Helper()
		var last clusterStatus
		var lastErr error
		deadline := time.Now().Add(30 * time.Second)
		for {
			if last, lastErr = readCluster(n.admin); lastErr == nil && cond(last) {
				return
			}
			select {
			case <-n.g.exited:
				t.Fatalf("%s exited while waiting for %s; output:\n%s", n.id, what, n.g.logs)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: timed out waiting for %s; the last status %+v %v; output:\n%s", n.id, what, last, lastErr, n.g.logs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, n := range nodes {
		waitStatus(n, "both nodes live", func(s clusterStatus) bool { return s.Redis == "up" && s.LiveNodes == 2 })
	}

	load := startPacedLoad([]string{a.listen, b.listen}, 4, 400)
	defer load.finish()
	// window counts what the upstream admits over d from now, after
	// setup (a partition) has been made.
	var failures []string
	window := func(name string, d time.Duration, setup func()) {
		t.Helper()
		before, start := admitted.Load(), time.Now()
		setup()
		for time.Since(start) < d {
			time.Sleep(20 * time.Millisecond) // the window's length; the counts decide
		}
		got, dt := admitted.Load()-before, time.Since(start).Seconds()
		t.Logf("%s: %d admitted in %.2fs, %.0f/s (limit %.0f/s)", name, got, dt, float64(got)/dt, rate)
		if bound := 1.2*rate*dt + burst; float64(got) > bound {
			failures = append(failures, fmt.Sprintf("%s: admitted %d in %.2fs, above 1.2 R·t + burst = %.0f", name, got, dt, bound))
		}
		// The floor only catches a limit that stopped admitting: a ramp
		// after recovery starts from the shadow quota, and a loaded
		// machine's paced load falls behind.
		if floor := 0.3 * rate * dt; float64(got) < floor {
			failures = append(failures, fmt.Sprintf("%s: admitted %d in %.2fs, under 0.3 of the limit (%.0f)", name, got, dt, floor))
		}
	}
	const span = 3 * time.Second

	window("both connected", 2*time.Second, func() {})
	window("b cut off", span, func() {
		b.proxy.set(true)
		waitStatus(b, "Redis marked down", func(s clusterStatus) bool { return s.Redis == "down" })
	})
	if s, err := readCluster(a.admin); err != nil || s.LiveNodes != 1 || s.KnownNodes != 2 {
		t.Errorf("a with b cut off: %+v %v, want 1 live of 2 known", s, err)
	}
	window("both cut off", span, func() {
		a.proxy.set(true)
		waitStatus(a, "Redis marked down", func(s clusterStatus) bool { return s.Redis == "down" })
	})
	window("a back before b", span, func() {
		a.proxy.set(false)
		waitStatus(a, "Redis up again", func(s clusterStatus) bool { return s.Redis == "up" })
	})
	window("Redis restarted empty, b still cut off", span, func() {
		r.Kill()
		r.Restart()
		waitUntil(t, "a calling the restarted Redis", a.g.exited, a.g.logs, func() bool {
			return r.CommandCalls("evalsha", "eval") > 0
		})
		// The set is gone, b's entry with it: a still counts b. The kill
		// may have tripped a's breaker; its probe brings it back.
		waitStatus(a, "Redis up after the restart, b still known", func(s clusterStatus) bool { return s.Redis == "up" && s.KnownNodes == 2 })
	})
	window("b back", span, func() {
		b.proxy.set(false)
		waitStatus(b, "Redis up again", func(s clusterStatus) bool { return s.Redis == "up" })
	})
	load.finish()

	for _, f := range failures {
		t.Error(f)
	}
	if n := load.failed.Load(); n != 0 {
		t.Errorf("%d requests failed (the last: %v): a Redis partition must never fail a request", n, load.lastFailure.Load())
	}
	if load.limited.Load() == 0 {
		t.Error("nothing was refused: the load did not reach the limit")
	}
	// A call slower than the 250 ms deadline (a loaded machine) trips the
	// breaker for a probe's while, so the end state is waited for.
	for _, n := range nodes {
		waitStatus(n, "Redis up at the end", func(s clusterStatus) bool { return s.Redis == "up" })
	}
	if t.Failed() {
		t.Logf("gateway a:\n%s\ngateway b:\n%s", a.g.logs, b.g.logs)
	}
}
