// Server: the admin listener, its mux and its handlers.

package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"
)

// Gateway is what the admin port reads from the data plane. Every method
// must be safe to call from any goroutine and must never wait for an
// event loop (engine.Server's are).
type Gateway interface {
	Ready() <-chan struct{} // closed once the listener accepts connections
	Draining() bool         // a shutdown has begun
	WriteMetrics(w io.Writer)
	LimitsHandler() http.Handler    // GET /limits: rate limits and Redis health, JSON
	UpstreamsHandler() http.Handler // GET /upstreams: nodes' health, ejections, breakers, JSON
}

// Server is a running admin listener.
type Server struct {
	ln      net.Listener
	http    *http.Server
	gw      Gateway
	reloads *Reloader
	ids     atomic.Uint64 // request IDs of admin error answers
}

// Listen binds addr and serves the admin endpoints for gw on it, each on
// its own goroutine. reloads serves POST /reload; nil answers it 503.
func Listen(addr string, gw Gateway, reloads *Reloader) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			err = errno // the system's reason, without net's layers
		}
		return nil, fmt.Errorf("admin: listen %s: %w", addr, err)
	}
	s := &Server{ln: ln, gw: gw, reloads: reloads}
	s.http = &http.Server{Handler: s.mux(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()
	return s, nil
}

// Addr is the address the admin port is bound to (port 0 resolved).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the listener and closes its connections.
func (s *Server) Close() error { return s.http.Close() }

// mux registers every endpoint explicitly, pprof's included.
func (s *Server) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	m.HandleFunc("GET /readyz", s.readyz)
	m.HandleFunc("GET /metrics", s.metrics)
	m.HandleFunc("/reload", s.reload)
	m.Handle("GET /limits", s.gw.LimitsHandler())
	m.Handle("GET /upstreams", s.gw.UpstreamsHandler())
	m.HandleFunc("GET /debug/pprof/", pprof.Index) // and the named profiles: heap, goroutine, allocs, ...
	m.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	m.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return m
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	select {
	case <-s.gw.Ready():
		if s.gw.Draining() {
			http.Error(w, "draining", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	default:
		http.Error(w, "starting", http.StatusServiceUnavailable)
	}
}

// metrics answers Prometheus text; reading the per-loop shards never
// waits for a loop.
func (s *Server) metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	s.gw.WriteMetrics(w)
}

// reload answers POST /reload once the debounced reload that serves it has
// run: 200 with what changed, 422 for a config file that does not load,
// 409 for a config the gateway refused, 503 when shutting down.
// ?allow_empty=1 lets the reload remove every route or upstream (Options).
func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		s.fail(w, http.StatusMethodNotAllowed, 40501, "use POST to reload")
		return
	}
	if s.reloads == nil {
		s.fail(w, http.StatusServiceUnavailable, 50301, "reloading is not available")
		return
	}
	var opts Options
	if v := r.URL.Query().Get("allow_empty"); v != "" {
		allow, err := strconv.ParseBool(v)
		if err != nil {
			s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("allow_empty=%s: want 1 or 0", v))
			return
		}
		opts.AllowEmpty = allow
	}
	trigger := "POST /reload"
	if opts.AllowEmpty {
		trigger += "?allow_empty=1" // the reload line shows it was asked for
	}
	res, err := s.reloads.TriggerWith(trigger, opts).Wait(r.Context())
	if err != nil {
		return // the client left; the reload goes on and is logged
	}
	var ce *ConfigError
	switch {
	case res.Err == nil:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(struct {
			Result   string `json:"result"`
			Changes  string `json:"changes"`
			Triggers int    `json:"triggers"`
		}{"applied", res.Changes, res.Triggers})
	case errors.Is(res.Err, ErrStopped):
		s.fail(w, http.StatusServiceUnavailable, 50301, res.Err.Error())
	case errors.As(res.Err, &ce):
		s.fail(w, http.StatusUnprocessableEntity, 42201, res.Err.Error())
	default:
		s.fail(w, http.StatusConflict, 40901, res.Err.Error())
	}
}

// fail answers {"code":NNNNN,"message":"...","request_id":"..."}, as every
// gateway error does.
func (s *Server) fail(w http.ResponseWriter, status, code int, msg string) {
	id := "admin-" + strconv.FormatUint(s.ids.Add(1), 10)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Request-Id", id)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(struct {
		Code      int    `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	}{code, msg, id})
}
