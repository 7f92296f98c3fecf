// The rate_limit filter through real sockets: the 429 it answers, the rate
// one gateway admits, and the state a recompiled config keeps.

package engine_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/limiter"
)

// A refusal is 429, code 42902, with the refusing limit's figures in
// Retry-After and the X-RateLimit headers, and nothing reaches the
// upstream for it.
func TestRateLimitRejectionHeaders(t *testing.T) {
	up := startRawUpstream(t, rawBenchUpstream)
	// 0.1 a second: a token every 10 s; an idle client may make 2 at once.
	g := startGateway(t, `
upstreams: [{name: backend, nodes: ["%s"]}]
routes:
  - id: api
    prefix: /
    upstream: backend
    rate_limits: [{key: ip, rate: 0.1, burst: 2}]
`, up)
	c := g.client(t)
	for i := range 2 {
		if resp, body := c.get("/a"); resp.StatusCode != 200 {
			t.Fatalf("request %d within the burst: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body := c.get("/a")
	expectError(t, resp, body, 429, 42902)
	// Both tokens were taken well under a second ago: the bucket is full
	// again in 20 s, and one token fits in 10 s.
	want := map[string]string{
		"Retry-After":           "10",
		"X-Ratelimit-Limit":     "0.1",
		"X-Ratelimit-Remaining": "0",
		"X-Ratelimit-Reset":     "20",
	}
	for name, v := range want {
		if got := resp.Header.Values(name); len(got) != 1 || got[0] != v {
			t.Errorf("%s: %q, want %q", name, got, v)
		}
	}
	// A refused request keeps the connection: the next one is answered.
	resp, body = c.get("/a")
	expectError(t, resp, body, 429, 42902)
}

// hammerResult counts the statuses a load run got.
type hammerResult struct {
	statuses map[int]int
	errs     int
	elapsed  time.Duration
}

func (h hammerResult) total() int {
	n := 0
	for _, c := range h.statuses {
		n += c
	}
	return n
}

// hammer sends GET path from clients keep-alive connections to each of
// addrs, each at most one request a millisecond (so a few clients offer
// far more than the limits under test, without spending the shared CPU
// on refusals), for about d, and counts the statuses.
// header, when set, gives client i's extra header line. It never fails the
// test, so it runs off the test goroutine; the caller judges errs.
func hammer(addrs []string, clients int, d time.Duration, path string, header func(i int) string) hammerResult {
	var mu sync.Mutex
	res := hammerResult{statuses: map[int]int{}}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	start := time.Now()
	for _, addr := range addrs {
		for i := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				counts, errs := hammerOne(addr, path, header, i, stop)
				mu.Lock()
				for s, n := range counts {
					res.statuses[s] += n
				}
				res.errs += errs
				mu.Unlock()
			}()
		}
	}
	time.Sleep(d) // the load's length, not synchronisation
	close(stop)
	res.elapsed = time.Since(start)
	wg.Wait()
	return res
}

// hammerOne is one keep-alive client of hammer; it redials after an error.
func hammerOne(addr, path string, header func(int) string, i int, stop chan struct{}) (map[int]int, int) {
	counts := map[int]int{}
	errs := 0
	req := "GET " + path + " HTTP/1.1\r\nHost: test\r\n"
	if header != nil {
		req += header(i)
	}
	req += "\r\n"
	var c net.Conn
	var br *bufio.Reader
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for {
		select {
		case <-stop:
			return counts, errs
		default:
		}
		if c == nil {
			var err error
			if c, err = net.DialTimeout("tcp", addr, 5*time.Second); err != nil {
				errs++
				continue
			}
			br = bufio.NewReader(c)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		resp, err := writeAndRead(c, br, req)
		if err != nil {
			errs++
			c.Close()
			c = nil
			continue
		}
		counts[resp]++
		time.Sleep(time.Millisecond) // pacing, not synchronisation
	}
}

func writeAndRead(c net.Conn, br *bufio.Reader, req string) (int, error) {
	if _, err := io.WriteString(c, req); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, err
}

// expectAdmitted requires a load run to have got only 200s and 429s, more
// of them offered than the limit admits, and admitted within 10 % of
// rate·elapsed + burst.
func expectAdmitted(t *testing.T, res hammerResult, rate, burst float64) {
	t.Helper()
	admitted, refused := res.statuses[200], res.statuses[429]
	if other := res.total() - admitted - refused; other != 0 || res.errs != 0 {
		t.Fatalf("statuses %v and %d errors: want only 200 and 429", res.statuses, res.errs)
	}
	want := rate*res.elapsed.Seconds() + burst
	t.Logf("admitted %d in %v (%.1f/s), refused %d; want %.0f ± 10%%",
		admitted, res.elapsed.Round(time.Millisecond), float64(admitted)/res.elapsed.Seconds(), refused, want)
	if refused < admitted {
		t.Fatalf("offered %d, admitted %d: the load was not well above the limit", res.total(), admitted)
	}
	if d := float64(admitted) - want; d > 0.1*want || d < -0.1*want {
		t.Fatalf("admitted %d, want %.0f ± 10%%", admitted, want)
	}
}

// One gateway with a route limit of R admits R ± 10 % a second under a
// far higher offered load, over 5 s.
func TestRateLimitOneGatewayAdmitsRate(t *testing.T) {
	up := startRawUpstream(t, rawBenchUpstream)
	const rate, burst = 100, 10
	g := startGateway(t, `
upstreams: [{name: backend, nodes: ["%s"]}]
routes:
  - id: api
    prefix: /
    upstream: backend
    rate_limits: [{key: route, rate: 100, burst: 10}]
`, up)
	res := hammer([]string{g.addr}, 4, 5*time.Second, "/a", nil)
	expectAdmitted(t, res, rate, burst)
	st := findLimit(t, g, "api/route", "local")
	if st.Grants != uint64(res.statuses[200]) || st.Rejections != uint64(res.statuses[429]) {
		t.Fatalf("status counts %d grants, %d rejections; the clients saw %v", st.Grants, st.Rejections, res.statuses)
	}
}

// Each key has its own bucket: an ip limit refuses the client over it and
// not the others, and the tenant key reads the tenant header.
func TestRateLimitKeysSeparateClients(t *testing.T) {
	up := startRawUpstream(t, rawBenchUpstream)
	g := startGateway(t, `
trusted_proxies: ["127.0.0.1/32"]
rate_limit: {tenant_header: X-Org}
upstreams: [{name: backend, nodes: ["%s"]}]
routes:
  - id: api
    prefix: /
    upstream: backend
    rate_limits:
      - {key: ip, rate: 0.001, burst: 2}
      - {key: tenant, rate: 0.001, burst: 3}
`, up)
	c := g.client(t)
	get := func(ip, org string) int {
		resp, _ := c.exchange("GET / HTTP/1.1\r\nHost: t\r\nX-Forwarded-For: " + ip + "\r\nX-Org: " + org + "\r\n\r\n")
		return resp.StatusCode
	}
	got := []int{get("203.0.113.1", "a"), get("203.0.113.1", "a"), get("203.0.113.1", "a"), // ip limit: 2
		get("203.0.113.2", "a"), get("203.0.113.3", "a"), // tenant a's third, fourth: its limit is 3
		get("203.0.113.4", "b")}
	want := []int{200, 200, 429, 200, 429, 200}
	if !slices.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
}

// findLimit returns the gateway's status of one limit, failing the test
// when it has none.
func findLimit(t *testing.T, g *gateway, name, scope string) limiter.LimitStatus {
	t.Helper()
	for _, l := range g.srv.Limits().Status().Limits {
		if l.Name == name && l.Scope == scope {
			return l
		}
	}
	t.Fatalf("no %s limit %q in the status", scope, name)
	return limiter.LimitStatus{}
}
