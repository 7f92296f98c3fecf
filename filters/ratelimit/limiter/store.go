// Store: the server-owned state of every rate limit, by stable name, that
// outlives the configs that use it.

package limiter

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
	"weak"

	"github.com/loopgate/loopgate/filters/ratelimit"
	"github.com/loopgate/loopgate/filters/ratelimit/cluster"
)

// Store keeps the state of every rate limit by a stable name (the route
// id and the key: "api/ip", or "global"), so a config compiled again
// finds the buckets the one before it used: a reload that keeps a limit
// keeps its bucket, and a client at its limit gets no fresh burst. It also
// owns the one cluster.Cluster of the process, made when the first
// cluster-scope limit is built, and the goroutine that sweeps idle keys
// out of the key tables.
//
// The server makes one and lends it to the filter as a filters.Services
// object; the control plane reads it (Status, Handler, WriteMetrics).
// Compiled filters hold their limits' state directly; the Store holds it
// weakly, so a limit that no running config names any more is freed, and a
// cluster limit hands its leased tokens back to Redis, once the last
// config naming it is gone.
//
// Loops never call the Store. Its methods are safe for concurrent use and
// are for the goroutines that compile configs and serve the admin port.
type Store struct {
	mu         sync.Mutex
	states     map[stateKey]weak.Pointer[state]
	cluster    *cluster.Cluster // nil until a cluster limit is built
	clusterCfg clusterConfig    // the settings it was built from
	closed     bool

	sweepEvery atomic.Int64 // nanoseconds; from the newest config's key_idle
	sweeping   bool         // the sweeper goroutine runs
	quit       chan struct{}
	done       sync.WaitGroup
}

// stateKey identifies a limit's state: local and cluster limits of one
// name are different things.
type stateKey struct {
	scope scope
	name  string
}

// clusterConfig is what the Cluster was built from, compared on each
// compile: Redis and membership settings cannot change while it runs.
type clusterConfig struct {
	redis   Redis
	cluster ClusterSettings
}

// NewStore returns an empty Store. It starts nothing until a config needs
// it: the sweeper with the first keyed limit, the Cluster with the first
// cluster limit.
func NewStore() *Store {
	s := &Store{states: map[stateKey]weak.Pointer[state]{}, quit: make(chan struct{})}
	s.sweepEvery.Store(int64(DefaultKeyIdle / 2))
	return s
}

// state is one limit's state on this node, shared by every compiled
// filter that names the limit.
type state struct {
	name  string
	route string // "" for global
	key   keyForm
	scope scope

	bucket  ratelimit.Bucket // local global and route limits
	keys    *ratelimit.Keys  // local keyed limits
	maxKeys int              // what keys was made with
	idle    time.Duration
	remote  *cluster.Limit      // cluster global and route limits; it counts its own decisions
	keyed   *cluster.KeyedLimit // cluster keyed limits; likewise

	shards []countShard          // local decisions, by loop
	conf   atomic.Pointer[Limit] // the newest compiled config's version, for Status
}

// countShard is one loop's decision counts for one local limit; only that
// loop writes it.
type countShard struct {
	grants, rejections atomic.Uint64
	_                  [48]byte // one cache line per loop
}

func (st *state) count(loop int, allowed bool) {
	if allowed {
		st.shards[loop].grants.Add(1)
	} else {
		st.shards[loop].rejections.Add(1)
	}
}

// stableName is the name a limit's state is kept under: global limits are
// one for every route, the others belong to their route.
func stableName(route string, k keyForm) string {
	if k.kind == keyGlobal {
		return k.String()
	}
	return route + "/" + k.String()
}

// errClosed is returned for builds after Close.
var errClosed = errors.New("rate limit store closed")

// local returns the state of the local limit l on route, made now or
// kept from an earlier config. A keyed limit's table is kept only when its
// size and idle time are unchanged; changing either starts an empty one.
func (s *Store) local(route string, l *Limit, loops, maxKeys int, idle time.Duration) (*state, error) {
	name := stableName(route, l.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	k := stateKey{local, name}
	if st := s.states[k].Value(); st != nil && len(st.shards) >= loops && (st.keys == nil || st.maxKeys == maxKeys && st.idle == idle) {
		st.conf.Store(l)
		return st, nil
	}
	st := &state{name: name, route: routeOf(route, l.key), key: l.key, scope: local, shards: make([]countShard, loops)}
	if l.key.keyed() {
		st.keys, st.maxKeys, st.idle = ratelimit.NewKeys(maxKeys, idle), maxKeys, idle
		s.startSweeper()
	}
	st.conf.Store(l)
	s.states[k] = weak.Make(st)
	return st, nil
}

func routeOf(route string, k keyForm) string {
	if k.kind == keyGlobal {
		return ""
	}
	return route
}

// remote returns the state of the cluster limit l on route, made now (the
// Cluster too, the first time) or kept from an earlier config. A changed
// rate, burst, failure mode or lease window makes a new cluster.Limit on
// the same Redis bucket; the old one hands its lease back once no config
// uses it.
func (s *Store) remote(route string, l *Limit, g *Global) (*state, error) {
	name := stableName(route, l.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errClosed
	}
	c, err := s.clusterFor(g)
	if err != nil {
		return nil, err
	}
	spec := l.spec(name)
	k := stateKey{clustered, name}
	if l.key.keyed() {
		return s.remoteKeyed(k, route, l, g, c, spec)
	}
	if st := s.states[k].Value(); st != nil && st.remote != nil && st.remote.Spec() == withLeaseDefault(spec) {
		st.conf.Store(l)
		return st, nil
	}
	lim, err := c.NewLimit(spec)
	if err != nil {
		return nil, err
	}
	st := &state{name: name, route: routeOf(route, l.key), key: l.key, scope: clustered, remote: lim}
	st.conf.Store(l)
	runtime.AddCleanup(st, (*cluster.Limit).Close, lim)
	s.states[k] = weak.Make(st)
	return st, nil
}

// remoteKeyed is remote for a cluster ip, user, tenant or header limit. A
// changed rate, burst, failure mode, lease window, max_keys, hot_keys or
// key_idle makes a new KeyedLimit: its cold keys start afresh, its hot keys
// on the same Redis buckets. s.mu must be held.
func (s *Store) remoteKeyed(k stateKey, route string, l *Limit, g *Global, c *cluster.Cluster, spec cluster.LimitSpec) (*state, error) {
	ks := cluster.KeyedSpec{LimitSpec: withLeaseDefault(spec), MaxKeys: g.RateLimit.MaxKeys,
		HotKeys: l.HotKeys, Idle: time.Duration(g.RateLimit.KeyIdle)}
	if l.MaxKeys > 0 {
		ks.MaxKeys = l.MaxKeys
	}
	if ks.HotKeys == 0 {
		ks.HotKeys = cluster.DefaultHotKeys
	}
	if st := s.states[k].Value(); st != nil && st.keyed != nil && st.keyed.Spec() == ks {
		st.conf.Store(l)
		return st, nil
	}
	lim, err := c.NewKeyedLimit(ks)
	if err != nil {
		return nil, err
	}
	st := &state{name: k.name, route: routeOf(route, l.key), key: l.key, scope: clustered, keyed: lim}
	st.conf.Store(l)
	runtime.AddCleanup(st, (*cluster.KeyedLimit).Close, lim)
	s.states[k] = weak.Make(st)
	s.startSweeper()
	return st, nil
}

// withLeaseDefault is spec as cluster.NewLimit keeps it, to compare with
// Limit.Spec.
func withLeaseDefault(spec cluster.LimitSpec) cluster.LimitSpec {
	if spec.LeaseWindow == 0 {
		spec.LeaseWindow = cluster.DefaultLeaseWindow
	}
	return spec
}

// clusterFor returns the Cluster, building it from g the first time. s.mu
// must be held.
func (s *Store) clusterFor(g *Global) (*cluster.Cluster, error) {
	cfg := clusterConfig{cluster: g.Cluster}
	if g.Redis != nil {
		cfg.redis = *g.Redis
	}
	if s.cluster != nil {
		if !reflect.DeepEqual(cfg, s.clusterCfg) {
			return nil, errors.New("the redis and cluster settings cannot change while the gateway runs; restart it to change them")
		}
		return s.cluster, nil
	}
	c, err := cluster.New(g.options())
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	s.cluster, s.clusterCfg = c, cfg
	return c, nil
}

// setSweepEvery sets the sweep period, for the newest config.
func (s *Store) setSweepEvery(d time.Duration) { s.sweepEvery.Store(int64(max(d, time.Millisecond))) }

// startSweeper starts the goroutine that sweeps the key tables, once.
// s.mu must be held.
func (s *Store) startSweeper() {
	if s.sweeping {
		return
	}
	s.sweeping = true
	s.done.Add(1)
	go s.sweep()
}

// sweep drops idle keys from every live key table every sweepEvery, off
// the loops, until Close. The loops carry on deciding meanwhile: Sweep is
// lock-free.
func (s *Store) sweep() {
	defer s.done.Done()
	t := time.NewTimer(time.Duration(s.sweepEvery.Load()))
	defer t.Stop()
	for {
		select {
		case <-s.quit:
			return
		case <-t.C:
		}
		now := nanotime()
		for _, st := range s.live() {
			if st.keys != nil {
				st.keys.Sweep(now)
			}
			if st.keyed != nil {
				st.keyed.Keys().Sweep(now)
			}
		}
		t.Reset(time.Duration(s.sweepEvery.Load()))
	}
}

// live returns the states some compiled config still holds, dropping the
// names of those gone.
func (s *Store) live() []*state {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*state, 0, len(s.states))
	for k, p := range s.states {
		if st := p.Value(); st != nil {
			out = append(out, st)
		} else {
			delete(s.states, k)
		}
	}
	return out
}

// Close stops the sweeper and the Cluster (which hands every lease back to
// Redis and leaves the membership set). Filters compiled earlier keep
// deciding: local limits as before, cluster limits by their failure mode.
// Builds after Close fail.
func (s *Store) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	c := s.cluster
	s.mu.Unlock()
	close(s.quit)
	s.done.Wait()
	if c != nil {
		c.Close()
	}
}

//go:linkname nanotime runtime.nanotime
func nanotime() int64
