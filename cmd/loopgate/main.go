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
	"io"
	"log"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/loopgate/loopgate/engine"
	"github.com/loopgate/loopgate/engine/accesslog"
	"github.com/loopgate/loopgate/engine/admin"
	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/gcfloor"
	"github.com/loopgate/loopgate/engine/tlsedge"
	"github.com/loopgate/loopgate/filters/access"
	"github.com/loopgate/loopgate/filters/auth"
	"github.com/loopgate/loopgate/filters/ratelimit/limiter"
)

// Exit statuses: 0 after a clean stop (SIGTERM or SIGINT and the drain),
// -version or -help; 1 when the config is invalid, a port cannot be bound,
// the pidfile is held, or the event loops stop without being asked to (the
// supervisor should restart the process); 2 for a command-line mistake
// (the flag package's convention).
func main() {
	if len(os.Args) > 1 && os.Args[1] == "config" {
		os.Exit(configCommand(os.Args[2:], os.Stdout, os.Stderr))
	}
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return
	case err != nil:
		os.Exit(2) // parseFlags printed the problem and the usage
	}
	if opts.version {
		bi, _ := debug.ReadBuildInfo()
		writeVersion(os.Stdout, bi)
		return
	}
	err = run(opts)
	engine.SyncNotices() // the last notices, "stopped" among them, reach stderr
	if err != nil {
		fmt.Fprintln(os.Stderr, "loopgate:", err)
		os.Exit(1)
	}
}

// options are the parsed command line.
type options struct {
	configPath string
	loops      int
	loopsSet   bool // -loops was given, so it overrides the config's loops
	pin        bool
	pidfile    string // overrides the config's pid when given
	demo       string
	check      bool
	version    bool
}

// parseFlags parses args (without the program name). On a mistake it
// writes the reason and the usage to stderr and returns a non-nil error;
// for -h and -help it writes the usage and returns flag.ErrHelp.
func parseFlags(args []string, stderr io.Writer) (*options, error) {
	var o options
	fs := flag.NewFlagSet("loopgate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.configPath, "config", "", "YAML config `file` (default: the embedded config)")
	fs.IntVar(&o.loops, "loops", 0, "event loops; 0 = one per CPU (overrides the config when given)")
	fs.BoolVar(&o.pin, "pin", false, "lock each loop to an OS thread (overrides the config when set)")
	fs.StringVar(&o.pidfile, "pidfile", "", "write the PID to this `file` while running (overrides the config's pid)")
	fs.StringVar(&o.demo, "demo-upstream", "", "also serve a demo upstream on this `address`")
	fs.BoolVar(&o.check, "check", false, "validate the config, print warnings and \"config ok\", and exit")
	fs.BoolVar(&o.version, "version", false, "print the version and build information, and exit")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: loopgate [-config file] [-loops n] [-pin] [-pidfile file] [-demo-upstream address] [-check | -version]\n"+
			"       loopgate config [-admin URL] get|diff|rollback|apply ... (loopgate config -h)\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err // the flag package printed it and the usage
	}
	fs.Visit(func(f *flag.Flag) { o.loopsSet = o.loopsSet || f.Name == "loops" })
	var mistake string
	switch {
	case fs.NArg() > 0:
		mistake = fmt.Sprintf("unexpected argument %q: loopgate takes flags only (the config file is given with -config)", fs.Arg(0))
	case o.loops < 0:
		mistake = fmt.Sprintf("-loops %d: want 0 (one per CPU) or more", o.loops)
	}
	if mistake != "" {
		fmt.Fprintln(fs.Output(), "loopgate:", mistake)
		fs.Usage()
		return nil, errors.New(mistake)
	}
	return &o, nil
}

// writeVersion prints the module version and the build's VCS stamp, one
// "key: value" line each; a field the build did not record reads
// "unknown" (go build -buildvcs=false, or no git checkout).
func writeVersion(w io.Writer, bi *debug.BuildInfo) {
	version, goVersion := "unknown", runtime.Version()
	vcs := map[string]string{"vcs.revision": "unknown", "vcs.time": "unknown", "vcs.modified": "unknown"}
	if bi != nil {
		if bi.Main.Version != "" {
			version = bi.Main.Version
		}
		goVersion = bi.GoVersion
		for _, s := range bi.Settings {
			if _, ok := vcs[s.Key]; ok {
				vcs[s.Key] = s.Value
			}
		}
	}
	fmt.Fprintf(w, "loopgate %s\n", version)
	fmt.Fprintf(w, "revision: %s\n", vcs["vcs.revision"])
	fmt.Fprintf(w, "commit time: %s\n", vcs["vcs.time"])
	fmt.Fprintf(w, "modified: %s\n", vcs["vcs.modified"])
	fmt.Fprintf(w, "go: %s %s/%s\n", goVersion, runtime.GOOS, runtime.GOARCH)
}

func run(opts *options) error {
	// Before the config: max_connections defaults from the raised limit.
	fdLimit := raiseDescriptorLimit()
	control, cfg, err := startControl(opts)
	if err != nil {
		return err
	}
	defer control.Flush() // a file reload's version is saved after the reload
	setMaxProcs(cfg.Loops)

	// engine.New compiles routes and filter chains, loads keys and opens the
	// access log, so a -check catches everything short of binding the ports.
	srv, err := engine.New(cfg)
	if err != nil {
		return err
	}
	control.Bind(engineControl{srv, fdLimit}, func(e admin.AuditEntry) { logAudit(srv, e) })
	warnings := cfg.Warnings()
	if w := cfg.DescriptorWarning(fdLimit); w != "" {
		warnings = append(warnings, w)
	}
	if v := cfg.TLS.HandshakePriority; cfg.UsesTLS() && !tlsedge.PriorityAvailable(engine.HandshakePriority(v)) {
		warnings = append(warnings, "config: tls.handshake_priority: "+v+" is not available here (Linux, with CAP_SYS_NICE or an RLIMIT_NICE of 20: systemd AmbientCapabilities=CAP_SYS_NICE or LimitNICE=+0); handshakes compute at normal priority")
	}
	for _, w := range warnings {
		if opts.check {
			fmt.Fprintln(os.Stderr, "loopgate: warning:", w) // -check answers a person
		} else {
			log.Printf("loopgate: warning: %s", w) // an error-log line of level warn, as every line while serving
		}
	}
	if opts.check {
		fmt.Println("config ok")
		return nil
	}
	if f := cfg.TLS.HeapFloor(); f > 0 && cfg.UsesTLS() && os.Getenv("GOGC") == "" {
		gcfloor.Start(f, 100)
	}

	// The pidfile comes first: a second instance on it is refused by
	// name, before its ports are found taken.
	var pid *pidfile
	if cfg.Pid != "" {
		if pid, err = writePidfile(cfg.Pid); err != nil {
			return err
		}
	}
	defer pid.remove()
	notify := newNotifier()
	defer notify.close()

	// Every loop binds the listen address with SO_REUSEPORT, which would
	// let this process share a port another one holds (a second Loopgate
	// started by mistake) without an error. A plain bind first refuses any
	// port already taken, and names it.
	for _, l := range cfg.ClientListeners() {
		if err := portFree(l.Address); err != nil {
			return err
		}
	}
	if opts.demo != "" {
		if err := startDemoUpstream(opts.demo); err != nil {
			return err
		}
	}
	if cfg.Admin.Cluster == config.AdminClusterRedis {
		copt, err := clusterOptions(cfg, srv)
		if err != nil {
			return err
		}
		defer control.StartCluster(copt).Close()
	}
	// SIGHUP and POST /reload share one debounced reloader.
	reloads := admin.NewReloader(func(o admin.ReloadOptions) (string, error) {
		notify.reloading()
		return reload(srv, control, o)
	}, func(r admin.Result) {
		logReload(srv, r)
		notify.ready(reloadStatus(r))
	})
	defer reloads.Stop()
	adminAddr := config.AdminOff
	if cfg.Admin.Address != config.AdminOff {
		a, err := admin.Listen(cfg.Admin.Address, srv, reloads, admin.Options{Hosts: cfg.Admin.Hosts, Pprof: cfg.Admin.Pprof,
			Tokens: adminTokens(cfg), OpenReads: cfg.Admin.OpenReads, Control: control, Runtime: runtimeOf(srv),
			RuntimePath: admin.RuntimePath(cfg.Admin.State),
			Audit:       func(e admin.AuditEntry) { logAudit(srv, e) }})
		if err != nil {
			return err
		}
		adminAddr = a.Addr()
	}

	// Signals are caught before anything reports ready, so a SIGTERM that
	// follows a green /readyz always drains instead of killing the process,
	// and a SIGHUP never kills it.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGHUP, syscall.SIGUSR1)
	go handleControlSignals(signals, srv, reloads)

	done := make(chan error, 1)
	go func() { done <- srv.Run() }()
	select {
	case err := <-done:
		if errors.Is(err, engine.ErrLoopsStopped) {
			return err // a loop failed before every loop accepted
		}
		return listenError(listenerNames(cfg.ClientListeners(), nil), err) // gnet could not start: a failed bind, most likely
	case <-srv.Ready():
	}
	listening := listenerNames(cfg.ClientListeners(), srv.Addrs())
	log.Printf("loopgate: serving on %s (admin %s); max_connections %d, RLIMIT_NOFILE %d", listening, adminAddr, cfg.Limits.MaxConnections, fdLimit)
	notify.ready("serving on " + listening)
	// cfg is not read past this point: a use while serving would keep the
	// start config (at 30,000 routes, 13 MB of routes and their router
	// table) alive after every reload has replaced it.
	drain := time.Duration(cfg.Timeouts.Drain)

	select {
	case err := <-done: // the loops stopped unasked: Run's error, exit 1
		return err
	case s := <-sig:
		log.Printf("loopgate: %s: draining for up to %s (send it again to exit at once)", s, drain)
	}
	reloads.Stop() // no reload while draining; POST /reload answers 503
	notify.stopping()
	// A second SIGTERM or SIGINT means the operator will not wait for the
	// drain, as with Envoy: exit now, cutting what is in flight.
	go func() {
		s := <-sig
		log.Printf("loopgate: %s again: exiting without waiting for the drain", s)
		engine.SyncNotices()
		pid.remove()
		os.Exit(1)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	<-done
	log.Printf("loopgate: stopped")
	return nil
}

// loadSource reads the -config file (or takes the embedded config),
// returning its bytes and the config with the flags that override it
// (overrides).
func loadSource(opts *options) (*config.Config, []byte, error) {
	if opts.configPath == "" {
		return overrides(opts, config.Embedded()), config.EmbeddedSource(), nil
	}
	cfg, data, err := config.LoadSource(opts.configPath)
	if err != nil {
		return nil, nil, err
	}
	return overrides(opts, cfg), data, nil
}

// overrides applies the flags that override the config, at startup and on
// every reload and API write alike, so none sees -loops or -pin as a
// change.
func overrides(opts *options, cfg *config.Config) *config.Config {
	if opts.loopsSet {
		cfg.Loops = opts.loops
	}
	if opts.pin {
		cfg.Pin = true
	}
	if opts.pidfile != "" {
		cfg.Pid = opts.pidfile
	}
	return cfg
}

// startControl reads the config file and the admin state (admin.state),
// and returns the Control and the config to start with: the file with the
// API's changes laid over it.
func startControl(opts *options) (*admin.Control, *config.Config, error) {
	file, data, err := loadSource(opts)
	if err != nil {
		return nil, nil, err
	}
	copts := admin.ControlOptions{
		Parse: func(doc []byte) (*config.Config, error) {
			cfg, err := config.Parse(doc)
			if err != nil {
				return nil, err
			}
			return overrides(opts, cfg), nil
		},
		ParseWithRoutes: func(doc []byte, routes []map[string]any) (*config.Config, error) {
			cfg, err := config.ParseWithRoutes(doc, routes)
			if err != nil {
				return nil, err
			}
			return overrides(opts, cfg), nil
		},
		StatePath: file.Admin.State,
		CheckOnly: opts.check,
		Log:       func(level, msg string) { log.Printf("loopgate: %s: admin state: %s", level, msg) },
	}
	if opts.configPath != "" {
		// A file that cannot be read is an admin.ConfigError; the Control
		// parses what changed since the last read, and the whole file (for
		// the line of each problem) only when it must.
		copts.Read = func() ([]byte, error) {
			data, err := config.ReadSettled(opts.configPath)
			if err != nil {
				return nil, &admin.ConfigError{Err: err}
			}
			return data, nil
		}
	}
	return admin.NewControl(copts, data)
}

// engineControl is how the admin Control changes the running config.
type engineControl struct {
	srv     *engine.Server
	fdLimit uint64 // RLIMIT_NOFILE, for the descriptor warning of a reload
}

func (e engineControl) Prepare(cfg *config.Config) (func() error, error) {
	c, err := e.srv.Compile(cfg)
	if err != nil {
		return nil, err
	}
	return func() error { _, err := e.srv.Apply(c); return err }, nil
}

// Reload refuses a file that removes every route or upstream unless
// allowEmpty. A max_connections the descriptor limit cannot hold is
// logged, as at start.
func (e engineControl) Reload(cfg *config.Config, allowEmpty bool) (string, error) {
	if w := cfg.DescriptorWarning(e.fdLimit); w != "" {
		log.Printf("loopgate: warning: %s", w)
	}
	return e.srv.ReloadWith(cfg, engine.ReloadOptions{AllowEmpty: allowEmpty})
}

// reload re-reads the -config file through control, which lays the admin
// API's changes over it and hands it to the engine. A file that does not
// load is an admin.ConfigError, with the line of each problem, and counts
// as a failed reload (srv.Reload counts the reloads that reach it).
func reload(srv *engine.Server, control *admin.Control, o admin.ReloadOptions) (string, error) {
	changes, err := control.Reload("file reload", o)
	var ce *admin.ConfigError
	if errors.As(err, &ce) {
		srv.CountFailedReload()
	}
	return changes, err
}

// gatewayRuntime serves the admin API's bans and revocations: the
// server's ban list, and the running config version's verifier (its
// revocations are the server's, so they last across reloads).
type gatewayRuntime struct{ srv *engine.Server }

// runtimeOf is srv's gatewayRuntime, or nil (no /bans, no /revocations)
// when the build registers no ip_access or no auth filter.
func runtimeOf(srv *engine.Server) admin.Runtime {
	_, hasBans := engine.Service[*access.Bans](srv)
	_, hasAuth := engine.Service[*auth.Verifier](srv)
	if !hasBans || !hasAuth {
		return nil
	}
	return gatewayRuntime{srv}
}

func (r gatewayRuntime) Bans() *access.Bans { b, _ := engine.Service[*access.Bans](r.srv); return b }

// verifier is the running version's: a reload makes a new one over the
// same revocations.
func (r gatewayRuntime) verifier() *auth.Verifier {
	v, _ := engine.Service[*auth.Verifier](r.srv)
	return v
}

func (r gatewayRuntime) Revoke(credential string, until time.Time) {
	r.verifier().Revoke(credential, until)
}
func (r gatewayRuntime) RevokeKey(apiKey string)    { r.verifier().RevokeKey(apiKey) }
func (r gatewayRuntime) Unrevoke(credential string) { r.verifier().Unrevoke(credential) }
func (r gatewayRuntime) Revocations() int           { return r.verifier().Revocations() }
func (r gatewayRuntime) RevokeUser(subject string, until time.Time) {
	r.verifier().RevokeUser(subject, until)
}
func (r gatewayRuntime) UnrevokeUser(subject string) { r.verifier().UnrevokeUser(subject) }
func (r gatewayRuntime) UserRevocationKey(subject string) [16]byte {
	return r.verifier().UserRevocationKey(subject)
}
func (r gatewayRuntime) RevocationSet() admin.RevocationSet {
	revoked, _ := engine.Service[*auth.Revocations](r.srv)
	return revoked
}
func (r gatewayRuntime) RevocationKey(credential string, apiKey bool) ([16]byte, time.Time) {
	return r.verifier().RevocationKey(credential, apiKey)
}

// adminTokens are admin.tokens with their secrets read.
func adminTokens(cfg *config.Config) []admin.Token {
	var out []admin.Token
	for _, t := range cfg.Admin.Tokens {
		out = append(out, admin.Token{Name: t.Name, Secret: t.Secret(), Write: t.Role == config.RoleWrite})
	}
	return out
}

// clusterOptions is where admin.cluster: redis keeps the config: the
// top-level redis section, the one cluster rate limits use.
func clusterOptions(cfg *config.Config, srv *engine.Server) (admin.ClusterOptions, error) {
	g, _ := cfg.FilterGlobal(limiter.Name).(*limiter.Global)
	if g == nil || g.Redis == nil {
		return admin.ClusterOptions{}, errors.New("admin.cluster: redis needs the top-level redis section (redis.addrs), where the versions are kept")
	}
	opt := admin.ClusterOptions{Addrs: g.Redis.Addrs, Username: g.Redis.Username, Password: g.Redis.Password,
		MasterSet: g.Redis.SentinelMaster, TLS: g.RedisTLS(), DialTimeout: time.Duration(g.Redis.DialTimeout),
		Poll: time.Duration(cfg.Admin.ClusterPoll), NodeID: g.Cluster.NodeID,
		Log: func(level, msg string) {
			srv.LogEvent(accesslog.Event{Level: level, Event: "config_sync", Message: msg})
		}}
	// The API's revocations and bans (served when runtimeOf is) are the
	// cluster's too.
	if rt := runtimeOf(srv); rt != nil {
		opt.Revocations, opt.Bans = rt.RevocationSet(), rt.Bans()
	}
	return opt, nil
}

// logAudit writes one error-log line per admin write: who, what, and the
// versions before and after.
func logAudit(srv *engine.Server, e admin.AuditEntry) {
	srv.LogEvent(accesslog.Event{Level: accesslog.LevelInfo, Event: "admin_write", Trigger: e.Action, Token: e.Token,
		FromVersion: e.From, ToVersion: e.To, Changes: e.Changes})
}

// reloadStatus is the STATUS= line the service manager shows after a
// reload.
func reloadStatus(r admin.Result) string {
	if r.Err != nil {
		// One line: the protocol separates its fields with newlines.
		return "serving; last reload failed: " + strings.ReplaceAll(r.Err.Error(), "\n", "; ")
	}
	return "serving; last reload applied"
}

// logReload writes one error-log line per reload: what changed, or why it
// was refused.
func logReload(srv *engine.Server, r admin.Result) {
	ev := accesslog.Event{Level: accesslog.LevelInfo, Event: "reload", Trigger: r.Trigger, Triggers: r.Triggers,
		Changes: r.Changes}
	if r.Err != nil {
		ev.Level, ev.Error = accesslog.LevelError, r.Err.Error()
	}
	srv.LogEvent(ev)
	engine.RaiseReloadRefused(r.Err)
}

// handleControlSignals turns SIGHUP into a reload and SIGUSR1 into
// reopening the access log (for logrotate).
func handleControlSignals(ch <-chan os.Signal, srv *engine.Server, reloads *admin.Reloader) {
	for s := range ch {
		switch s {
		case syscall.SIGHUP:
			reloads.Trigger("SIGHUP")
		case syscall.SIGUSR1:
			srv.ReopenLogs()
			srv.LogEvent(accesslog.Event{Level: accesslog.LevelInfo, Event: "reopen_logs", Trigger: "SIGUSR1"})
		}
	}
}

// portFree reports, as listenError words it, whether addr cannot be bound
// by a socket without SO_REUSEPORT. Port 0 is always free.
// listenerNames lists the listeners for a log line: "127.0.0.1:8080,
// 0.0.0.0:8443 (https)", with the bound addresses (port 0 resolved) when
// bound is given.
func listenerNames(ls []config.Listener, bound []string) string {
	names := make([]string, len(ls))
	for i, l := range ls {
		names[i] = l.Address
		if i < len(bound) {
			names[i] = bound[i]
		}
		if l.TLS != nil {
			names[i] += " (https)"
		}
	}
	return strings.Join(names, ", ")
}

func portFree(addr string) error {
	if _, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return listenError(addr, err)
	}
	return ln.Close()
}

// listenError words a failure to listen on addr as
// "listen 127.0.0.1:8080: address already in use": the address as
// configured, then the system's reason without the layers of socket calls
// around it (net's "listen tcp ...: bind:", gnet's bare "bind:"). The
// reason stays in the chain, so errors.Is(err, syscall.EADDRINUSE) holds.
func listenError(addr string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return fmt.Errorf("listen %s: %w", addr, errno)
	}
	return fmt.Errorf("listen %s: %w", addr, err)
}

// setMaxProcs gives the runtime one P more than there are loops, unless
// GOMAXPROCS is set explicitly. Each loop blocks in epoll_wait as a plain
// syscall; when no P is idle, the runtime's sysmon takes the blocked loop's P
// away every 20 µs and the loop must win it back on every wake-up, which
// shows as a p90 several times the median. With one idle P, sysmon leaves
// the loop alone. The spare P costs nothing while it has no work; TLS
// handshakes compute on it (tls.handshake_workers defaults to half the
// CPUs). A P per handshake worker besides was tried and dropped: with
// more idle Ps the runtime spins more threads looking for work, which
// cost 5 to 15 % more CPU per handshake (loops: 1, pinned to one CPU).
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
