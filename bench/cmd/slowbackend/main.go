// The slowbackend command: the delayed answer and the /delay control endpoint.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

var slowBody = []byte("slow\n")

// server answers every request after delay, except those under fast;
// safe for concurrent use.
type server struct {
	delay atomic.Int64 // nanoseconds; any goroutine reads it, /delay writes it
	fast  string       // a path prefix answered at once; "" = none
}

func newServer(delay time.Duration) *server {
	s := &server{}
	s.delay.Store(int64(delay))
	return s
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	delay := flag.Duration("delay", 2*time.Second, "how long each answer waits")
	fast := flag.String("fast", "", "a path prefix answered at once, for a fast route on the same upstream")
	flag.Parse()
	if *delay < 0 {
		log.Fatalf("-delay %v: must not be negative", *delay)
	}
	s := newServer(*delay)
	s.fast = *fast
	log.Fatal(http.ListenAndServe(*addr, s))
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/delay" {
		s.control(w, r)
		return
	}
	if d := time.Duration(s.delay.Load()); d > 0 && (s.fast == "" || !strings.HasPrefix(r.URL.Path, s.fast)) {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Write(slowBody)
}

// control serves /delay: GET reports the delay, POST ?d=DURATION sets it.
func (s *server) control(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet:
	case http.MethodPost:
		d, err := time.ParseDuration(r.URL.Query().Get("d"))
		if err != nil || d < 0 {
			http.Error(w, "want ?d=DURATION, 0s or more", http.StatusBadRequest)
			return
		}
		s.delay.Store(int64(d))
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "GET or POST", http.StatusMethodNotAllowed)
		return
	}
	fmt.Fprintf(w, "delay %v\n", time.Duration(s.delay.Load()))
}
