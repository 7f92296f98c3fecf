package main

import (
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// A server that answers as the bench backend does, over TLS, with tickets.
func backend(t *testing.T) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "hello world\n")
	}))
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

func opts(srv *httptest.Server, version uint16) options {
	return options{addr: srv.Listener.Addr().String(), sni: "bench.test", path: "/",
		cfg: &tls.Config{InsecureSkipVerify: true, MinVersion: version, MaxVersion: version,
			CurvePreferences: []tls.CurveID{tls.X25519, tls.CurveP256}}}
}

// Without a cache every connection is a full handshake; with one, every
// connection after the first resumes, in both versions.
func TestOnceResumesWithACache(t *testing.T) {
	srv := backend(t)
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		o := opts(srv, v)
		for _, resume := range []bool{false, true} {
			cfg := o.cfg.Clone()
			if resume {
				cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			}
			for i := range 3 {
				resumed, err := once(o, cfg)
				if err != nil {
					t.Fatalf("version %x, connection %d: %v", v, i, err)
				}
				if want := resume && i > 0; resumed != want {
					t.Fatalf("version %x, cache %v, connection %d: resumed %v", v, resume, i, resumed)
				}
			}
		}
	}
}

// keepAlive sends on one connection at its schedule and times each request.
func TestKeepAliveTimesEachRequest(t *testing.T) {
	o := opts(backend(t), tls.VersionTLS13)
	start := time.Now()
	lat, err := keepAlive(o, start, 10*time.Millisecond, start.Add(55*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if len(lat) != 6 {
		t.Fatalf("%d requests, want 6 (one every 10 ms for 55 ms)", len(lat))
	}
	for i, d := range lat {
		if d <= 0 {
			t.Fatalf("request %d: latency %v", i, d)
		}
	}
}
