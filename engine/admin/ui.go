// The dashboard at /ui/: static assets embedded in the binary (no CDN, it
// works with no internet), which poll the admin port's own JSON and
// /metrics. Serving them reads nothing of the data plane.

package admin

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed ui
var uiFiles embed.FS

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
