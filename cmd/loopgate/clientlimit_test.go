// Per-client cluster limits through the binary: two loopgate processes
// share a {key: "header:X-User", scope: cluster} limit through a real
// redis-server, with many distinct users.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/redistest"
)

// envInt reads a positive integer from the environment, else def: the
// bench script (bench/clientlimit.sh) runs this test at full size.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// Users, a tenth of them heavy, spread their requests over two gateways
// that share a per-user cluster limit of 2/s, burst 4. A light user asks
// once a second (half its rate, a quarter on each gateway): it stays cold
// on both, is never refused and costs no Redis call. A heavy user asks ten
// times a second, alternating gateways: it goes hot on both and is
// admitted within Rate·t + Burst + the cold bursts it spent before (2 per
// gateway), and at least its rate over most of the run. Every key the
// gateways write in Redis expires. The figures (admitted against the
// bound, Redis scripts per request) are logged; bench/clientlimit.sh runs
// the same with 10,000 users.
func TestClusterLimitPerUserAcrossGateways(t *testing.T) {
	users := envInt("LOOPGATE_CLIENTLIMIT_USERS", 1000)
	seconds := envInt("LOOPGATE_CLIENTLIMIT_SECONDS", 3)
	const rate, burst, nodes = 2.0, 4, 2
	const shareBurst = burst / nodes
	heavy := users / 10

	r := redistest.Start(t)
	admitted := make([]atomic.Int64, users)
	up := serveUpstream(t, func(w http.ResponseWriter, req *http.Request) {
		if u, err := strconv.Atoi(req.Header.Get("X-User")); err == nil && u >= 0 && u < users {
			admitted[u].Add(1)
		}
		io.WriteString(w, "ok")
	})
	var listens, admins []string
	for _, id := range []string{"a", "b"} {
		_, listen, admin := startServing(t, fmt.Sprintf(`
redis: {addrs: ["%s"], key_prefix: "users:"}
cluster: {node_id: %s, fallback_nodes: 2, min_nodes: 2}
upstreams: [{name: backend, nodes: ["%%s"]}]
routes:
  - {id: api, prefix: /, upstream: backend, rate_limits: [{key: "header:X-User", rate: %v, burst: %d, scope: cluster, hot_keys: 4096}]}
`, r.Addr(), id, rate, burst), up)
		listens, admins = append(listens, listen), append(admins, admin)
	}

	// The schedule: slots of 100 ms; in each, every heavy user asks once
	// and a tenth of the light users do, each user alternating gateways.
	// A pool of keep-alive clients sends each slot's requests.
	type request struct{ user, gw int }
	work := make(chan request, 1024)
	offered := make([]atomic.Int64, users)
	var refused, failed atomic.Int64
	var lastFailure atomic.Value
	var wg sync.WaitGroup
	clients := make([]*http.Client, nodes)
	for i := range clients {
		clients[i] = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}, Timeout: 10 * time.Second}
	}
	for range 48 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q := range work {
				req, _ := http.NewRequest("GET", "http://"+listens[q.gw]+"/", nil)
				req.Header.Set("X-User", strconv.Itoa(q.user))
				resp, err := clients[q.gw].Do(req)
				if err != nil {
					failed.Add(1)
					lastFailure.Store(err.Error())
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case http.StatusOK:
				case http.StatusTooManyRequests:
					refused.Add(1)
				default:
					failed.Add(1)
					lastFailure.Store(resp.Status)
				}
			}
		}()
	}
	scriptsBefore := r.CommandCalls("evalsha", "eval")
	start := time.Now()
	slots := seconds * 10
	for s := range slots {
		for u := range users {
			if u < heavy {
				work <- request{u, (s + u) % nodes}
			} else if u%10 == s%10 {
				work <- request{u, (s/10 + u) % nodes}
			} else {
				continue
			}
			offered[u].Add(1)
		}
		// Pacing shapes the load; it synchronises nothing.
		if d := time.Until(start.Add(time.Duration(s+1) * 100 * time.Millisecond)); d > 0 {
			time.Sleep(d)
		}
	}
	close(work)
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	scripts := r.CommandCalls("evalsha", "eval") - scriptsBefore

	var requests, heavyAdmitted, heavyOffered, lightAdmitted, lightOffered, over int64
	bound := int64(rate*elapsed) + burst + nodes*shareBurst
	floor := int64(rate * float64(seconds) / 2)
	worst := int64(0)
	for u := range users {
		a, o := admitted[u].Load(), offered[u].Load()
		requests += o
		if u < heavy {
			heavyAdmitted += a
			heavyOffered += o
			worst = max(worst, a)
			if a > bound {
				over++
				t.Errorf("heavy user %d: admitted %d in %.2fs, above Rate·t + Burst + the cold bursts = %d", u, a, elapsed, bound)
			}
			if a < floor {
				t.Errorf("heavy user %d: admitted %d in %.2fs, under half its rate (%d)", u, a, elapsed, floor)
			}
			continue
		}
		lightAdmitted += a
		lightOffered += o
		if a != o {
			t.Errorf("light user %d: admitted %d of %d, within its share every one must pass", u, a, o)
		}
	}
	t.Logf("%d users (%d heavy) over 2 gateways, %.2fs: %d requests, %d refused, %d failed", users, heavy, elapsed, requests, refused.Load(), failed.Load())
	t.Logf("heavy users: %d admitted of %d offered, %.2f each on average, most %d, bound %d (Rate·t = %.1f)",
		heavyAdmitted, heavyOffered, float64(heavyAdmitted)/float64(max(heavy, 1)), worst, bound, rate*elapsed)
	t.Logf("light users: %d admitted of %d offered", lightAdmitted, lightOffered)
	t.Logf("Redis scripts: %d, %.4f per request (heartbeats included)", scripts, float64(scripts)/float64(requests))
	if n := failed.Load(); n != 0 {
		t.Errorf("%d requests failed (the last: %v)", n, lastFailure.Load())
	}

	for i, admin := range admins {
		code, body, err := adminGet(admin, "/limits")
		if err != nil || code != 200 {
			t.Fatalf("GET /limits: %d %v", code, err)
		}
		var st struct {
			Limits []struct {
				Name string `json:"name"`
				Hot  *struct {
					Len        int    `json:"len"`
					Promotions uint64 `json:"promotions"`
					Full       uint64 `json:"full"`
					ColdGrants uint64 `json:"cold_grants"`
				} `json:"hot"`
			} `json:"limits"`
		}
		if err := json.Unmarshal([]byte(body), &st); err != nil || len(st.Limits) != 1 || st.Limits[0].Hot == nil {
			t.Fatalf("GET /limits: %v in %s", err, body)
		}
		h := st.Limits[0].Hot
		t.Logf("gateway %d: %d hot keys, %d promotions, %d refused for a full hot set, %d cold grants", i, h.Len, h.Promotions, h.Full, h.ColdGrants)
		// A heavy user idle for a second while the load generator stalls
		// goes cold and hot again, so only the floor is sure.
		if h.Promotions < uint64(heavy) {
			t.Errorf("gateway %d: %d promotions, want every one of the %d heavy users hot", i, h.Promotions, heavy)
		}
	}

	keys := 0
	for cursor := "0"; ; {
		reply, err := r.Do("SCAN", cursor, "MATCH", "users:*", "COUNT", "1000").ToArray()
		if err != nil || len(reply) != 2 {
			t.Fatalf("SCAN: %v", err)
		}
		cursor, _ = reply[0].ToString()
		batch, _ := reply[1].AsStrSlice()
		for _, key := range batch {
			keys++
			// -1: no expiry; -2: gone since the SCAN.
			if ttl, err := r.Do("PTTL", key).AsInt64(); err != nil || ttl == -1 {
				t.Errorf("Redis key %q: PTTL %d (%v); every key must expire", key, ttl, err)
			}
		}
		if cursor == "0" {
			break
		}
	}
	if keys > heavy+1 {
		t.Errorf("%d Redis keys, want at most one per heavy user and the membership set (%d)", keys, heavy+1)
	}
	t.Logf("Redis keys after the run: %d, every one with a TTL", keys)
}
