// The dashboard at /ui/: static assets embedded in the binary (no CDN, it
// works with no internet), and GET /summary, the bounded digest they poll.
// Serving the files reads nothing of the data plane.

package admin

import (
	"embed"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
)

//go:embed ui
var uiFiles embed.FS

// uiRoutes registers the dashboard's files and the summary it polls. The
// summary is not under /ui/: the files load without a token (auth.go's
// uiPath), the summary needs one.
func (s *Server) uiRoutes(m *http.ServeMux) {
	m.Handle("GET /ui/", uiHandler())
	m.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
	m.HandleFunc("GET /summary", s.summary)
}

// Summary bounds of ?top=N: the default, and the most (engine.MaxSummaryTop,
// which the engine clamps to whatever it is asked).
const (
	summaryTop    = 50
	summaryMaxTop = 1000
)

// summary answers GET /summary[?top=N]: the gateway's digest for the
// dashboard, JSON. top (default 50, at most 1000) bounds its size: that
// many of the busiest routes and rate limits, as many more routes in a
// state that is not normal, and their upstreams. A top that is not a
// number in range is 400, code 40001.
func (s *Server) summary(w http.ResponseWriter, r *http.Request) {
	top := summaryTop
	if v := r.URL.Query().Get("top"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > summaryMaxTop {
			s.fail(w, http.StatusBadRequest, 40001, fmt.Sprintf("top=%s: want a whole number from 1 to %d", v, summaryMaxTop))
			return
		}
		top = n
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, s.gw.Summary(top))
}

// uiHandler serves the dashboard's files under /ui/. The page may not be
// framed (its buttons change the config: no clickjacking) and loads
// nothing but its own files.
func uiHandler() http.Handler {
	sub, err := fs.Sub(uiFiles, "ui")
	if err != nil {
		panic(err) // the embedded tree has the directory: a build that lacks it is broken
	}
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
}
