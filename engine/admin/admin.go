// Server: the admin listener, its mux and its handlers.

package admin

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
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
	ErrorsHandler() http.Handler    // GET /errors: the last error-log lines, JSON
	Summary(top int) any            // GET /summary: the dashboard's bounded digest, encoded as JSON (ui.go)
}

// Options are the admin port's settings besides its address.
type Options struct {
	// Hosts are the Host names served besides loopback and the address a
	// connection arrived on (config admin.hosts; see hostAllowed).
	Hosts []string
	// Pprof serves /debug/pprof/ (config admin.pprof). Off, it answers 404.
	Pprof bool
	// Tokens are the bearer tokens every request needs (config
	// admin.tokens; see authenticate). With none, the port must listen on
	// loopback only.
	Tokens []Token
	// OpenReads are the paths GET serves without a token (config
	// admin.open_reads).
	OpenReads []string
	// Control serves the config API (api.go); nil serves none of it.
	Control *Control
	// Runtime serves bans and revocations (runtime.go); nil serves none.
	Runtime Runtime
	// RuntimePath keeps the bans and revocations written through the API
	// that stay on this node (those the cluster does not share) across
	// restarts: read by Listen, replaced atomically after every write
	// (RuntimePath(admin.state)); "" keeps them in memory only.
	RuntimePath string
	// Audit is told of every ban and revocation written.
	Audit func(AuditEntry)
}

// Server is a running admin listener.
type Server struct {
	ln      net.Listener
	http    *http.Server
	gw      Gateway
	reloads *Reloader
	hosts   map[string]bool // Options.Hosts by hostKey
	pprof   bool
	ids     atomic.Uint64 // request IDs of admin error answers

	tokens    []Token
	tokenSums [][sha256.Size]byte // each token's secret, hashed, for match
	openReads []string
	control   *Control
	runtime   Runtime
	persist   *runtimeStore // nil: the runtime writes are not kept in a file
	audit     func(AuditEntry)
}

// Listen binds addr and serves the admin endpoints for gw on it, each on
// its own goroutine. reloads serves POST /reload; nil answers it 503.
//
// addr is bound as written (see network): "0.0.0.0:9901" on IPv4 only,
// "[::]:9901" on IPv6 only, ":9901" on both.
func Listen(addr string, gw Gateway, reloads *Reloader, opts Options) (*Server, error) {
	ln, err := net.Listen(network(addr), addr)
	if err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			err = errno // the system's reason, without net's layers
		}
		return nil, fmt.Errorf("admin: listen %s: %w", addr, err)
	}
	if err := exposure(ln.Addr(), len(opts.Tokens) > 0); err != nil {
		ln.Close()
		return nil, err
	}
	var cluster *Cluster
	if opts.Control != nil {
		cluster = opts.Control.cluster
	}
	persist := newRuntimeStore(opts.RuntimePath, opts.Runtime, cluster)
	if persist != nil {
		if err := persist.load(time.Now()); err != nil {
			ln.Close()
			return nil, err
		}
	}
	return serve(ln, gw, reloads, opts, persist), nil
}

// serve serves the admin endpoints on ln, which it owns from now on,
// keeping the runtime writes in persist (nil: in memory only).
func serve(ln net.Listener, gw Gateway, reloads *Reloader, opts Options, persist *runtimeStore) *Server {
	s := &Server{ln: ln, gw: gw, reloads: reloads, hosts: hostSet(opts.Hosts), pprof: opts.Pprof,
		tokens: opts.Tokens, openReads: opts.OpenReads, control: opts.Control, runtime: opts.Runtime,
		persist: persist, audit: opts.Audit}
	for _, t := range opts.Tokens {
		s.tokenSums = append(s.tokenSums, sha256.Sum256([]byte(t.Secret)))
	}
	s.http = &http.Server{Handler: s.guard(s.authenticate(s.mux())), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()
	return s
}

// network is the one stack a literal IP address names. Go's "tcp" would
// bind "0.0.0.0" on IPv6 as well (a dual-stack socket), which is not what
// was written; "tcp6" binds "[::]" with IPV6_V6ONLY. A name or an empty
// host stays "tcp": every address of both stacks for "", the first
// address the name resolves to otherwise.
func network(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "tcp" // net.Listen reports it
	}
	ip, err := netip.ParseAddr(host)
	switch {
	case err != nil:
		return "tcp"
	case ip.Is4():
		return "tcp4"
	default:
		return "tcp6"
	}
}

// exposure refuses a bound address that is not loopback when the port
// has no tokens: anyone who can reach it could change the config.
func exposure(a net.Addr, hasTokens bool) error {
	if ta, ok := a.(*net.TCPAddr); hasTokens || ok && ta.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("admin: the admin port listens on %s, which is not loopback, and admin.tokens is empty: "+
		"anyone who can reach it could change the config. Add a token to admin.tokens (role write for changes), "+
		"or bind the admin port to 127.0.0.1", a)
}

// Addr is the address the admin port is bound to (port 0 resolved).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the listener and closes its connections.
func (s *Server) Close() error { return s.http.Close() }

// mux registers every endpoint explicitly, pprof's included. guard runs
// before it, for every path.
func (s *Server) mux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	m.HandleFunc("GET /readyz", s.readyz)
	m.HandleFunc("GET /metrics", s.metrics)
	m.HandleFunc("/reload", s.reload)
	m.Handle("GET /limits", s.gw.LimitsHandler())
	m.Handle("GET /upstreams", s.gw.UpstreamsHandler())
	m.Handle("GET /errors", s.gw.ErrorsHandler())
	s.configAPI(m)
	s.runtimeAPI(m)
	s.uiRoutes(m)
	if !s.pprof {
		m.HandleFunc("/debug/pprof/", func(w http.ResponseWriter, _ *http.Request) {
			s.fail(w, http.StatusNotFound, 40401, "pprof is off; set admin.pprof: true to serve it")
		})
		return m
	}
	m.HandleFunc("GET /debug/pprof/", pprof.Index) // and the named profiles: heap, goroutine, allocs, ...
	m.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	// A CPU profile or a trace costs the process for seconds: like a
	// state change, it needs what no cross-site page can send (see
	// intended), not a plain GET an <img> could make.
	m.Handle("GET /debug/pprof/profile", s.needIntent(http.HandlerFunc(pprof.Profile)))
	m.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	m.Handle("GET /debug/pprof/trace", s.needIntent(http.HandlerFunc(pprof.Trace)))
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
// ?allow_empty=1 lets the reload remove every route or upstream (ReloadOptions).
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
	var opts ReloadOptions
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
		writeJSON(w, http.StatusOK, struct {
			Result   string  `json:"result"`
			Changes  string  `json:"changes"`
			Triggers int     `json:"triggers"`
			TookMs   float64 `json:"took_ms"`
		}{"applied", res.Changes, res.Triggers, float64(res.Took.Microseconds()) / 1000})
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
	w.Header().Set("X-Request-Id", id)
	writeJSON(w, status, struct {
		Code      int    `json:"code"`
		Message   string `json:"message"`
		RequestID string `json:"request_id"`
	}{code, msg, id})
}

// writeJSON answers v as JSON with status. HTML escaping is off, so a
// message such as "listen a -> b" reads as written instead of "\u003e";
// nosniff keeps a browser from reading the body as anything but JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
