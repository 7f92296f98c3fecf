// Command loopgate runs the Loopgate API gateway.
//
// With no -config it runs on the embedded default config. -demo-upstream
// starts a small HTTP server for that config to proxy to, so the gateway
// works out of the box:
//
//	loopgate -demo-upstream 127.0.0.1:9001
//	curl http://127.0.0.1:8080/api/echo -d hello
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	_ "net/http/pprof" // served on the admin port only
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/loopgate/loopgate/engine"
	"github.com/loopgate/loopgate/engine/config"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "loopgate:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		configPath = flag.String("config", "", "YAML config file (default: the embedded config)")
		loops      = flag.Int("loops", -1, "event loops; 0 = one per CPU (overrides the config)")
		pin        = flag.Bool("pin", false, "lock each loop to an OS thread (overrides the config when set)")
		demo       = flag.String("demo-upstream", "", "also serve a demo upstream on this address")
		check      = flag.Bool("check", false, "validate the config and exit")
	)
	flag.Parse()

	cfg := config.Embedded()
	if *configPath != "" {
		var err error
		if cfg, err = config.Load(*configPath); err != nil {
			return err
		}
	}
	if *loops >= 0 {
		cfg.Loops = *loops
	}
	if *pin {
		cfg.Pin = true
	}
	setMaxProcs(cfg.Loops)

	// engine.New compiles routes and filter chains and loads keys, so a
	// -check catches everything short of binding the ports.
	srv, err := engine.New(cfg)
	if err != nil {
		return err
	}
	if *check {
		fmt.Println("config ok")
		return nil
	}

	if *demo != "" {
		if err := startDemoUpstream(*demo); err != nil {
			return err
		}
	}
	if cfg.Admin != config.AdminOff {
		if err := startAdmin(cfg.Admin, srv); err != nil {
			return err
		}
	}

	// Signals are caught before anything reports ready, so a SIGTERM that
	// follows a green /readyz always drains instead of killing the process.
	// SIGHUP will mean reload; until reloading exists it must not kill us.
	signal.Ignore(syscall.SIGHUP)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)

	done := make(chan error, 1)
	go func() { done <- srv.Run() }()
	select {
	case err := <-done:
		return err
	case <-srv.Ready():
	}
	listening := cfg.Listen
	if a, err := srv.Addr(); err == nil {
		listening = a.String() // port 0 resolved
	}
	log.Printf("loopgate: serving on %s (admin %s)", listening, cfg.Admin)

	select {
	case err := <-done:
		return err
	case s := <-sig:
		log.Printf("loopgate: %s: draining for up to %s", s, time.Duration(cfg.Timeouts.Drain))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.Timeouts.Drain))
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	<-done
	log.Printf("loopgate: stopped")
	return nil
}

// startAdmin serves health and pprof on the control-plane port, never on a loop.
func startAdmin(addr string, srv *engine.Server) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	mux := http.DefaultServeMux // net/http/pprof registered itself here
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-srv.Ready():
			if srv.Draining() {
				http.Error(w, "draining", http.StatusServiceUnavailable)
				return
			}
			fmt.Fprintln(w, "ready")
		default:
			http.Error(w, "starting", http.StatusServiceUnavailable)
		}
	})
	go func() { _ = (&http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}).Serve(ln) }()
	return nil
}

// setMaxProcs gives the runtime one P more than there are loops, unless
// GOMAXPROCS is set explicitly. Each loop blocks in epoll_wait as a plain
// syscall; when no P is idle, the runtime's sysmon takes the blocked loop's P
// away every 20 µs and the loop must win it back on every wake-up, which
// shows as a p90 several times the median. With one idle P, sysmon leaves
// the loop alone. The spare P costs nothing while it has no work.
func setMaxProcs(loops int) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	if loops <= 0 {
		loops = runtime.NumCPU()
	}
	if runtime.GOMAXPROCS(0) < loops+1 {
		runtime.GOMAXPROCS(loops + 1)
	}
}
