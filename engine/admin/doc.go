// Package admin serves Loopgate's control plane on its own port, on
// net/http goroutines and never on an event loop: health and readiness,
// Prometheus metrics, pprof (when enabled), POST /reload, the config API
// (api.go), bans and revocations (runtime.go), and the dashboard with the
// summary it polls (ui.go).
//
// Every handler is registered explicitly on the admin server's own
// ServeMux; nothing is served from http.DefaultServeMux, so a library that
// registers handlers there cannot expose them on the admin port.
//
// Every request passes guard (guard.go) before the mux: whether or not the
// port has tokens, it keeps web pages out. Only Host names that are
// loopback, the connection's own address or configured are served (DNS
// rebinding); what a browser marks as cross-site or cross-origin is
// refused; and a state change, like a CPU profile, needs the
// X-Loopgate-Admin header or a JSON body, which no page can send without a
// CORS preflight the port never grants. Then authenticate (auth.go)
// checks the bearer token and its role, when admin.tokens has any; a port
// without tokens must listen on loopback (Listen refuses otherwise).
//
// Every config change, a file reload or an API write, goes through one
// Control (control.go), one at a time: it lays the API's changes (the
// overlay) over the config file, validates and compiles the result as a
// reload does, applies it live and records it as a version in the state
// file (package confstore), or, with admin.cluster, in Redis, where every
// node picks it up (cluster.go), as it does the revocations made through
// the API (revocations.go).
//
// Reloads from every trigger (POST /reload here, SIGHUP in the command) go
// through one Reloader, which debounces them: triggers that arrive within
// Window of the first one of a burst share one reload and its result, and
// triggers that arrive while a reload runs share the next one.
package admin
