// Package admin serves Loopgate's control plane on its own port, on
// net/http goroutines and never on an event loop: health and readiness,
// Prometheus metrics, pprof (when enabled), and POST /reload.
//
// Every handler is registered explicitly on the admin server's own
// ServeMux; nothing is served from http.DefaultServeMux, so a library that
// registers handlers there cannot expose them on the admin port.
//
// Every request passes guard (guard.go) before the mux: until the admin
// port has tokens, it keeps web pages out. Only Host names that are
// loopback, the connection's own address or configured are served (DNS
// rebinding); what a browser marks as cross-site or cross-origin is
// refused; and a state change, like a CPU profile, needs the
// X-Loopgate-Admin header or a JSON body, which no page can send without a
// CORS preflight the port never grants.
//
// Reloads from every trigger (POST /reload here, SIGHUP in the command) go
// through one Reloader, which debounces them: triggers that arrive within
// Window of the first one of a burst share one reload and its result, and
// triggers that arrive while a reload runs share the next one.
package admin
