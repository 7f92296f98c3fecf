// Reload: compiling a new config off the loops, refusing what cannot
// change live, and swapping it in.

package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/loopgate/loopgate/engine/config"
	"github.com/loopgate/loopgate/engine/policy"
)

// errNotCompiledHere is Apply's answer to a Compiled from another server.
var errNotCompiledHere = errors.New("engine: apply: the config was compiled for another server")

// Compiled is a config compiled for one Server, ready for Apply, or
// checked on its own by the package's Compile (srv and snap nil).
type Compiled struct {
	srv  *Server
	cfg  *config.Config
	snap *snapshot
}

// Compile checks that cfg compiles, off any server: it builds everything a
// version needs, as Server.Compile does, reports every error on one line,
// and keeps cfg for Server.Apply, which compiles it again against that
// server's durable state (bans, revocations, limits, breakers, metrics) so
// the state carries over. Use it to check a config before a server
// exists; Server.Compile saves the second compile.
func Compile(cfg *config.Config) (*Compiled, error) {
	n := cfg.EventLoops()
	scratch := durable{services: newServices(), metrics: newRegistry(n), resilience: policy.NewRegistry(n, cfg.HealthChecks.MaxInFlight, cfg.HealthChecks.Batch),
		tunnels: new(tunnelRegistry)}
	// A cluster rate limit dials Redis while it compiles; this copy of it
	// serves nothing.
	defer scratch.services.close()
	if _, err := compile(cfg, n, &scratch, nil, nil, false); err != nil {
		return nil, err
	}
	return &Compiled{cfg: cfg}, nil
}

// Compile builds everything a config version needs (route table, filter
// chains, upstream definitions) off the loops, from cfg as config.Parse
// returned it. It reports every error it finds, on one line. Chains share
// the server's durable state (bans, revocations, filter stats, metrics,
// upstream nodes), so compiling changes nothing that runs; a Compiled
// that is never applied is simply dropped. Safe for concurrent use.
func (s *Server) Compile(cfg *config.Config) (*Compiled, error) { return s.compile(cfg, false) }

// compile is Compile; refresh is compile's (a file reload's).
func (s *Server) compile(cfg *config.Config, refresh bool) (*Compiled, error) {
	old := s.state.Load()
	snap, err := compile(cfg, len(s.loops), &s.durable, old.snap, old.cfg, refresh)
	if err != nil {
		return nil, err
	}
	return &Compiled{srv: s, cfg: cfg, snap: snap}, nil
}

// Apply makes c the running config version and returns its number. New
// requests use it at once: every loop compares versions per request and
// adopts a new one on the loop, and Apply also posts the change to every
// loop, so idle loops retire the pools they no longer need too. Requests
// already running finish on the version they began with. It refuses a
// config whose fixed settings (see config.Diff.Fixed) differ from the
// running one's. Unlike Reload it applies a config with no routes or no
// upstreams: the caller built c on purpose. Safe for concurrent use.
func (s *Server) Apply(c *Compiled) (uint64, error) {
	if c.srv == nil { // from the package's Compile
		var err error
		if c, err = s.Compile(c.cfg); err != nil {
			s.metrics.reloadsFailed.Add(1)
			return 0, err
		}
	}
	s.reloading.Lock()
	defer s.reloading.Unlock()
	if c.srv != s {
		return 0, errNotCompiledHere
	}
	old := s.state.Load()
	// Only the fixed settings: comparing every route as well costs a
	// second at 30,000 routes, on every admin API write.
	if fixed := config.FixedChanges(old.cfg, c.cfg); len(fixed) > 0 {
		s.metrics.reloadsFailed.Add(1)
		return 0, refusedFixed(old.version, fixed)
	}
	return s.apply(old, c), nil
}

// apply stores c as the version after old. s.reloading must be held.
func (s *Server) apply(old *state, c *Compiled) uint64 {
	st := &state{version: old.version + 1, cfg: c.cfg, snap: c.snap}
	s.applyLiveObservability(c.cfg) // metrics.per_request (accesslog.go)
	s.alerts.Configure(alertOptions(&c.cfg.Alerts))
	c.snap.activate(s.resilience.Prober())
	s.state.Store(st)
	for _, l := range s.loops {
		if el := l.eventLoop(); el != nil {
			_ = el.Execute(context.Background(), l.refresh) // fails only once the engine stopped
		}
	}
	s.metrics.applied(st.version, c.snap, old.snap) // after the store: see registry.sweep
	s.noteApply()                                   // returnMemory hands back what the last version left behind
	s.checkCertificates(time.Now())                 // a replaced certificate resolves its alert at once
	return st.version
}

// ReloadOptions widen what one reload may do. The zero value is the
// cautious default.
type ReloadOptions struct {
	// AllowEmpty applies a config that removes every route or every
	// upstream (see config.Diff.Emptied). Without it such a reload is
	// refused: a config file cut short before routes: is valid YAML with no
	// routes, and applying it would answer every request 404.
	AllowEmpty bool
}

// Reload is ReloadWith with the default options: a config that would
// remove every route or every upstream is refused.
func (s *Server) Reload(cfg *config.Config) (string, error) {
	return s.ReloadWith(cfg, ReloadOptions{})
}

// ReloadWith compiles cfg and, when it compiles, changes nothing that
// cannot change live and empties nothing o does not allow, makes it the
// config every new request uses. Unlike Apply, it builds again what the
// filters' settings read from files (auth.jwt.jwks_file, key files), even
// when cfg shares the running config's settings (config.WithRoutes): a
// reload is how an operator has a changed key file read. It returns one
// line saying what changed,
// or an error saying why the reload was refused; a refused reload leaves
// the running config serving. Safe for concurrent use: reloads are
// applied one at a time.
func (s *Server) ReloadWith(cfg *config.Config, o ReloadOptions) (string, error) {
	s.reloading.Lock()
	defer s.reloading.Unlock()
	old := s.state.Load()
	d := config.Compare(old.cfg, cfg)
	if len(d.Fixed) > 0 {
		s.metrics.reloadsFailed.Add(1)
		return "", refusedFixed(old.version, d.Fixed)
	}
	if len(d.Emptied) > 0 && !o.AllowEmpty {
		return "", fmt.Errorf("engine: reload refused: the new config removes %s, as a config file cut short would; "+
			"to apply it on purpose, reload with allow_empty (POST /reload?allow_empty=1); still serving config v%d",
			strings.Join(d.Emptied, " and "), old.version)
	}
	c, err := s.compile(cfg, true)
	if err != nil {
		s.metrics.reloadsFailed.Add(1)
		return "", fmt.Errorf("engine: reload refused: %s; still serving config v%d",
			strings.TrimPrefix(err.Error(), "engine: "), old.version)
	}
	v := s.apply(old, c)
	return fmt.Sprintf("config v%d: %s", v, d.String()), nil
}

// refusedFixed is the error of a reload that changes settings only a
// restart can change.
func refusedFixed(running uint64, fixed []string) error {
	return fmt.Errorf("engine: reload refused: %s cannot change while running (restart instead); still serving config v%d",
		strings.Join(fixed, ", "), running)
}

// Version returns the number of the running config version: 1 for the
// config the server was created with, one more for every applied reload.
func (s *Server) Version() uint64 { return s.state.Load().version }
