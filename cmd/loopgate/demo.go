// The demo upstream that `make run` starts next to the gateway.

package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// startDemoUpstream serves /api/echo (the request body back, with the
// method and path) and a greeting everywhere else.
func startDemoUpstream(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("demo upstream: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/api/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s\n", r.Method, r.URL.RequestURI())
		_, _ = io.Copy(w, io.LimitReader(r.Body, 1<<20))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from the demo upstream: %s %s\n", r.Method, r.URL.Path)
	})
	go func() { _ = (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln) }()
	return nil
}
