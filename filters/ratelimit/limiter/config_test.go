package limiter_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loopgate/loopgate/filters/ratelimit/limiter"
)

// The config shape of issue 8 parses, compiles and takes its defaults.
func TestConfigIssueShape(t *testing.T) {
	cfg := parse(t, `
redis:
  addrs: ["127.0.0.1:1"]
cluster:
  fallback_nodes: 3
  min_nodes: 1
routes:
  - id: api
    prefix: /api/
    upstream: backend
    rate_limits:
      - {key: global, rate: 1000, burst: 100, scope: cluster}
      - {key: ip, rate: 50, burst: 20}
      - {key: "header:X-Tenant-Id", rate: 200, burst: 50}
      - {key: user, rate: 100, burst: 100, on_redis_failure: shadow}
      - {key: route, rate: 2.5}
`)
	if got := strings.Join(cfg.Chain(cfg.Routes[0]), ","); !strings.Contains(got, "rate_limit") {
		t.Fatalf("chain %s lacks rate_limit", got)
	}
	// Compiling starts the cluster: Redis is not there, so it starts down
	// and the limit runs on its shadow quota of 1000 / 3.
	store := newStore(t)
	fs := mustCompile(t, cfg, store)
	defer runtime.KeepAlive(fs) // the Store forgets limits no filter holds
	st := store.Status()
	if st.Cluster == nil || st.Cluster.Redis != "down" || st.Cluster.EffectiveNodes != 3 {
		t.Fatalf("cluster status %+v", st.Cluster)
	}
	want := map[string]string{ // scope/name -> rate/burst/quota
		"cluster/global":               "1000/100/333.3333333333333",
		"local/api/ip":                 "50/20/50",
		"local/api/header:x-tenant-id": "200/50/200",
		"local/api/user":               "100/100/100",
		"local/api/route":              "2.5/3/2.5", // burst: the rate rounded up
	}
	for _, l := range st.Limits {
		got := strings.Join([]string{ftoa(l.Rate), itoa(l.Burst), ftoa(l.Quota)}, "/")
		if w := want[l.Scope+"/"+l.Name]; got != w {
			t.Errorf("%s %s: rate/burst/quota %s, want %s", l.Scope, l.Name, got, w)
		}
		delete(want, l.Scope+"/"+l.Name)
	}
	if len(want) != 0 {
		t.Errorf("missing from the status: %v", want)
	}
}

// Every bad option is refused with its path and line.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: globall, rate: 1}]}]`,
			`line 3: routes[0] (id "a").rate_limits[0].key: unknown key "globall" (want global, route, ip, user, tenant or "header:<Name>")`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{rate: 1}]}]`,
			`rate_limits[0].key: missing`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: "header:X Y", rate: 1}]}]`,
			`rate_limits[0].key: "header:X Y": "X Y" is not a valid header name`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 0}]}]`,
			`rate_limits[0].rate: must be a positive number of requests a second, got 0`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1, burst: -1}]}]`,
			`rate_limits[0].burst: must be at least 1, got -1`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1, scope: region}]}]`,
			`rate_limits[0].scope: unknown scope "region" (want local or cluster)`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1, on_redis_failure: maybe}]}]`,
			`rate_limits[0].on_redis_failure: unknown mode "maybe" (want shadow, open or closed)`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: global, rate: 1, scope: cluster}]}]`,
			`rate_limits[0].scope: cluster needs the top-level redis section`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1, hot_keys: 10}]}]`,
			`rate_limits[0].hot_keys: set, but only a cluster ip, user, tenant or header key keeps hot keys`},
		{"redis: {addrs: [\"127.0.0.1:1\"]}\nroutes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: route, rate: 1, scope: cluster, hot_keys: 10}]}]",
			`rate_limits[0].hot_keys: set, but only a cluster ip, user, tenant or header key keeps hot keys`},
		{"redis: {addrs: [\"127.0.0.1:1\"]}\nroutes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: user, rate: 1, scope: cluster, hot_keys: 100000}]}]",
			`rate_limits[0].hot_keys: must be in [1, 65536], got 100000`},
		{"redis: {addrs: [\"127.0.0.1:1\"]}\nroutes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: route, rate: 2000000, scope: cluster}]}]",
			`rate_limits[0].rate: 2e+06 is above 1000000`},
		{"redis: {addrs: [\"127.0.0.1:1\"]}\nroutes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: route, rate: 1, scope: cluster, lease_window: -1s}]}]",
			`rate_limits[0].lease_window: must not be negative`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1, lease_window: 1s}]}]`,
			`rate_limits[0].lease_window: set, but leases are for scope: cluster`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: route, rate: 1, max_keys: 10}]}]`,
			`rate_limits[0].max_keys: set, but only an ip, user, tenant or header key keeps a table of keys`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1, max_keys: 100000000}]}]`,
			`rate_limits[0].max_keys: must be in [1, 16777216], got 100000000`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1}, {key: ip, rate: 2}]}]`,
			`rate_limits[1]: key ip with scope local is also rate_limits[0]; one limit per key and scope`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1e-12, burst: 1000000000}]}]`,
			`rate_limits[0]: rate 1e-12 with burst 1000000000 spans too long`},
		{`routes: [{id: a, prefix: /, upstream: backend, rate_limits: [{key: ip, rate: 1, bursts: 2}]}]`,
			`routes[0].rate_limits[0].bursts: unknown field`},
		{"redis: {addrs: [localhost]}\n", `redis.addrs[0]: "localhost" is not host:port`},
		{"redis: {}\n", `redis.addrs: missing`},
		{"redis: {addrs: [\"r:6379\"], tls: {cert_file: /nonexistent}}\n", `redis.tls: cert_file and key_file go together`},
		{"redis: {addrs: [\"r:6379\"], tls: {ca_file: /nonexistent/ca.pem}}\n", `redis.tls.ca_file: open /nonexistent/ca.pem`},
		{"cluster: {member_ttl: 1s, heartbeat: 1s}\n", `cluster.member_ttl: 1s is under two heartbeats (1s)`},
		{"cluster: {ramp_step: 2}\n", `cluster.ramp_step: must be in (0, 1], got 2`},
		{"cluster: {node_id: \"a b\"}\n", `cluster.node_id: "a b" contains white space`},
		{"cluster: {probe_min: 1s, probe_max: 100ms}\n", `cluster.probe_max: 100ms is below probe_min 1s`},
		{"rate_limit: {tenant_header: \"X Y\"}\n", `rate_limit.tenant_header: "X Y" is not a valid header name`},
		{"rate_limit: {key_idle: 10}\n", `rate_limit.key_idle`},
	} {
		if got := parseErr(t, tc.yaml); !strings.Contains(got, tc.want) {
			t.Errorf("config\n%s\nerror:\n%s\nwant it to contain:\n%s", tc.yaml, got, tc.want)
		}
	}
}

// A global limit is one bucket for every route naming it: routes giving it
// different figures are refused when the config compiles.
func TestGlobalLimitStatedAlike(t *testing.T) {
	cfg := parse(t, `
routes:
  - {id: a, path: /a, upstream: backend, rate_limits: [{key: global, rate: 10}]}
  - {id: b, path: /b, upstream: backend, rate_limits: [{key: global, rate: 20}]}
`)
	_, err := compile(t, cfg, newStore(t), 1)
	if err == nil || !strings.Contains(err.Error(), `the local global limit is one bucket for every route, but route "a" gives it rate 10, burst 10 and route "b" rate 20, burst 20`) {
		t.Fatalf("compile error %v", err)
	}
	cfg = parse(t, `
redis: {addrs: ["127.0.0.1:1"]}
routes:
  - {id: a, path: /a, upstream: backend, rate_limits: [{key: global, rate: 10, scope: cluster}]}
  - {id: b, path: /b, upstream: backend, rate_limits: [{key: global, rate: 10, scope: cluster, on_redis_failure: open}]}
`)
	_, err = compile(t, cfg, newStore(t), 1)
	if err == nil || !strings.Contains(err.Error(), `routes "a" and "b" give it different on_redis_failure or lease_window`) {
		t.Fatalf("compile error %v", err)
	}
}

func ftoa(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
func itoa(n int64) string   { return strconv.FormatInt(n, 10) }

// TLS files are read and checked when the config loads, and two loads of
// one config compare equal (a reload of it changes nothing).
func TestConfigRedisTLS(t *testing.T) {
	dir := t.TempDir()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600)

	yaml := fmt.Sprintf("redis: {addrs: [\"r:6379\"], tls: {ca_file: %q, cert_file: %q, key_file: %q, server_name: redis}}\n", certFile, certFile, keyFile)
	a, b := parse(t, yaml), parse(t, yaml)
	if !reflect.DeepEqual(a.FilterGlobal(limiter.Name), b.FilterGlobal(limiter.Name)) {
		t.Fatal("two loads of one TLS config differ")
	}
	bad := fmt.Sprintf("redis: {addrs: [\"r:6379\"], tls: {cert_file: %q, key_file: %q}}\n", certFile, certFile)
	if got := parseErr(t, bad); !strings.Contains(got, "redis.tls.cert_file: tls: ") {
		t.Fatalf("a certificate given as its own key: %s", got)
	}
	if got := parseErr(t, fmt.Sprintf("redis: {addrs: [\"r:6379\"], tls: {ca_file: %q}}\n", keyFile)); !strings.Contains(got, "holds no PEM certificate") {
		t.Fatalf("a key given as the CA: %s", got)
	}
}
