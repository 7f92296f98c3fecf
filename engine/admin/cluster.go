// Cluster: the API's changes and the versions kept in Redis and shared by
// every node (admin.cluster: redis), and the revocations (revocations.go).

package admin

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"

	"github.com/loopgate/loopgate/engine/confstore"
)

// ClusterOptions are where the shared config lives and how often a node
// checks it.
type ClusterOptions struct {
	Addrs       []string // the redis section's addrs
	Username    string
	Password    string
	MasterSet   string      // Sentinel master name, "" for none
	TLS         *tls.Config // redis.tls, as the rate limits dial; nil: plain TCP
	DialTimeout time.Duration
	KeyPrefix   string        // default "loopgate:config:"
	Poll        time.Duration // admin.cluster_poll
	NodeID      string        // named in the versions this node writes
	// Revocations, when set, are the node's, shared with the cluster
	// through Redis (shared.go); nil keeps revocations local.
	Revocations RevocationSet
	// Bans, likewise, are the node's bans, shared through Redis; nil
	// keeps them local.
	Bans BanSet
	// Log is told of every version taken from Redis, and of every failure
	// to take one.
	Log func(level, msg string)
}

// callTimeout bounds one Redis call of the config sync: a write answers
// 503 past it, a poll tries again at the next tick.
const callTimeout = time.Second

// Cluster keeps a Control's overlay and versions in Redis. A write is a
// compare-and-set on the version number (casScript), announced on a
// channel; every node applies a version it did not have as soon as the
// announcement arrives, and polls every Poll for one it missed. While
// Redis cannot be reached, nodes keep their last version and writes
// answer 503. Redis calls run on this type's goroutines and the admin
// handlers', never on an event loop.
type Cluster struct {
	c       *Control
	opt     ClusterOptions
	version string // keys
	state   string
	channel string

	clientMu sync.Mutex
	client   atomic.Pointer[rueidis.Client] // nil until a dial succeeded

	revocations, bans *sharedSet // nil when the option is

	kick chan struct{}
	quit chan struct{}
	done sync.WaitGroup
	stop sync.Once
}

// casScript stores a new state when the version is still the one the
// writer read (ARGV[1]), and announces it. It returns -1 when stored, or
// the current version when another writer came first.
var casScript = rueidis.NewLuaScript(`
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur ~= tonumber(ARGV[1]) then return cur end
redis.call('SET', KEYS[2], ARGV[3])
redis.call('SET', KEYS[1], ARGV[2])
redis.call('PUBLISH', ARGV[4], ARGV[2])
return -1`)

// unavailableError is a write refused because Redis cannot be reached.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string {
	return "the cluster's config store (Redis) cannot be reached, so no node can take a change; every node keeps serving its last version: " + e.err.Error()
}

// StartCluster makes c keep its state in Redis: it takes the version Redis
// holds, if newer than c's and Redis answers now, and starts the
// subscriber and the poller. Close stops them.
func (c *Control) StartCluster(opt ClusterOptions) *Cluster {
	if opt.KeyPrefix == "" {
		opt.KeyPrefix = "loopgate:config:"
	}
	k := &Cluster{c: c, opt: opt, version: opt.KeyPrefix + "version", state: opt.KeyPrefix + "state",
		channel: opt.KeyPrefix + "versions", kick: make(chan struct{}, 1), quit: make(chan struct{})}
	if opt.Revocations != nil {
		k.revocations = newSharedSet(opt.KeyPrefix, "revocations", MaxRevocations, revocationCopy{opt.Revocations})
	}
	if opt.Bans != nil {
		k.bans = newSharedSet(opt.KeyPrefix, "bans", MaxBans, banCopy{opt.Bans})
	}
	c.cluster = k
	k.sync() // a node that starts later takes the latest version first
	k.syncSets()
	k.done.Add(2)
	go k.poll()
	go k.subscribe()
	return k
}

// Close stops the subscriber and the poller and closes the client.
func (k *Cluster) Close() {
	k.stop.Do(func() {
		close(k.quit)
		if cl := k.client.Load(); cl != nil {
			(*cl).Close() // ends Receive
		}
		k.done.Wait()
	})
}

// conn returns the client, dialling when there is none (rueidis dials in
// NewClient and fails while Redis is down).
func (k *Cluster) conn() (rueidis.Client, error) {
	if cl := k.client.Load(); cl != nil {
		return *cl, nil
	}
	k.clientMu.Lock()
	defer k.clientMu.Unlock()
	if cl := k.client.Load(); cl != nil {
		return *cl, nil
	}
	select {
	case <-k.quit:
		return nil, errors.New("closed")
	default:
	}
	cl, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress: k.opt.Addrs, Username: k.opt.Username, Password: k.opt.Password, TLSConfig: k.opt.TLS,
		Sentinel: rueidis.SentinelOption{MasterSet: k.opt.MasterSet, Username: k.opt.Username, Password: k.opt.Password,
			TLSConfig: k.opt.TLS, Dialer: net.Dialer{Timeout: k.opt.DialTimeout}},
		ClientName:   "loopgate-config-" + k.opt.NodeID,
		Dialer:       net.Dialer{Timeout: k.opt.DialTimeout},
		DisableCache: true,
		DisableRetry: true, // a failed call is retried by the next poll, not by rueidis
	})
	if err != nil {
		return nil, err
	}
	k.client.Store(&cl)
	return cl, nil
}

// fetch reads the version and the state in one MGET (the script writes
// both at once). A version of 0 has no state: Redis holds none yet.
func (k *Cluster) fetch(ctx context.Context) (uint64, *confstore.State, error) {
	cl, err := k.conn()
	if err != nil {
		return 0, nil, err
	}
	vals, err := cl.Do(ctx, cl.B().Mget().Key(k.version, k.state).Build()).ToArray()
	if err != nil {
		return 0, nil, err
	}
	vs, err := vals[0].ToString()
	if rueidis.IsRedisNil(err) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	n, err := strconv.ParseUint(vs, 10, 64)
	if err != nil {
		return 0, nil, fmt.Errorf("%s holds %q, not a version", k.version, vs)
	}
	data, err := vals[1].ToString()
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %v", k.state, err)
	}
	st, err := confstore.Decode([]byte(data))
	if err != nil {
		return 0, nil, fmt.Errorf("%s: %v", k.state, err)
	}
	return n, st, nil
}

// cas stores st as the version after expect; it reports false when Redis
// holds another version than expect.
func (k *Cluster) cas(ctx context.Context, expect uint64, st *confstore.State) (bool, error) {
	cl, err := k.conn()
	if err != nil {
		return false, err
	}
	data, err := confstore.Encode(st)
	if err != nil {
		return false, err
	}
	n, err := casScript.Exec(ctx, cl, []string{k.version, k.state},
		[]string{strconv.FormatUint(expect, 10), strconv.FormatUint(st.Latest(), 10), string(data), k.channel}).AsInt64()
	if err != nil {
		return false, err
	}
	return n == -1, nil
}

// sync brings this node to the version Redis holds, or seeds an empty
// Redis (a new one, or one restarted without its data) with this node's.
// Redis is the truth: a node holding another version, older or newer,
// takes Redis's.
func (k *Cluster) sync() {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	n, st, err := k.fetch(ctx)
	if err != nil {
		return // the next poll tries again; writes answer 503 meanwhile
	}
	c := k.c
	c.mu.Lock()
	defer c.mu.Unlock()
	switch local := c.st.Latest(); {
	case n == 0 && local > 0:
		if _, err := k.cas(ctx, 0, c.st); err != nil {
			k.log("error", "config sync: seeding Redis with version "+strconv.FormatUint(local, 10)+": "+err.Error())
		}
	case n != local || !sameOverlay(st, c.st):
		if err := k.adopt(st); err != nil {
			k.log("error", fmt.Sprintf("config sync: version %d from Redis is refused here, still serving version %d: %v", n, local, err))
			return
		}
		k.log("info", fmt.Sprintf("config sync: now serving version %d from Redis (was %d)", n, local))
	}
}

func sameOverlay(a, b *confstore.State) bool {
	x, _ := confstore.Encode(&confstore.State{Overlay: a.Overlay})
	y, _ := confstore.Encode(&confstore.State{Overlay: b.Overlay})
	return string(x) == string(y)
}

// adopt applies st's overlay over this node's file and makes st this
// node's state, cached in admin.state when set. c.mu must be held.
func (k *Cluster) adopt(st *confstore.State) error {
	c := k.c
	next := confstore.Merge(c.file, st.Overlay)
	cfg, apply, err := c.prepare(next, nil)
	if err != nil {
		return err
	}
	if err := apply(); err != nil {
		return err
	}
	c.st, c.cur, c.cfg = st, next, cfg
	c.fileCfg = nil // see Control.fileConfig
	if err := c.save(false, nil); err != nil {
		k.log("error", "config sync: "+err.Error())
	}
	return nil
}

func (k *Cluster) log(level, msg string) {
	if k.opt.Log != nil {
		k.opt.Log(level, msg)
	}
}

// change is Control.change in cluster mode: the edit is made on the
// version Redis holds, and stored only if no other writer stored one
// since (else 409 with If-Match, or the edit is made again on the newer
// version, a few times).
func (k *Cluster) change(w writer, edit func(d confstore.Doc) error) (confstore.Version, error) {
	c := k.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		v, retry, err := k.changeOnce(ctx, w, edit)
		cancel()
		// The first call after Redis came back fails on the connection that
		// broke (EOF) and rueidis redials for the next: try once more.
		var unavailable *unavailableError
		if attempt == 0 && errors.As(err, &unavailable) {
			retry = true
		}
		if !retry || attempt == 4 {
			return v, err
		}
	}
}

func (k *Cluster) changeOnce(ctx context.Context, w writer, edit func(d confstore.Doc) error) (v confstore.Version, retry bool, err error) {
	c := k.c
	n, st, err := k.fetch(ctx)
	if err != nil {
		return v, false, &unavailableError{err}
	}
	if n != 0 && (n != c.st.Latest() || !sameOverlay(st, c.st)) {
		if err := k.adopt(st); err != nil {
			return v, false, fmt.Errorf("version %d from Redis is refused here: %w", n, err)
		}
	}
	if w.ifMatch != 0 && w.ifMatch != c.st.Latest() {
		return v, false, &staleError{w.ifMatch, c.st.Latest()}
	}
	next := confstore.Copy(c.cur)
	if err := edit(next); err != nil {
		return v, false, err
	}
	diff := confstore.Diff(c.cur, next)
	if len(diff) == 0 {
		return unchanged(c.st), false, nil
	}
	cfg, apply, err := c.prepare(next, diff)
	if err != nil {
		return v, false, err
	}
	nst := &confstore.State{Overlay: confstore.Delta(c.file, next), Versions: append([]confstore.Version(nil), c.st.Versions...)}
	from := c.st.Latest()
	v = confstore.Version{Number: from + 1, Time: c.opts.Now().UTC().Format(time.RFC3339Nano), Source: confstore.SourceCluster,
		Token: w.token, Action: w.action + " on " + k.opt.NodeID, Changes: diff}
	nst.Add(v)
	ok, err := k.cas(ctx, n, nst)
	switch {
	case err != nil:
		return confstore.Version{}, false, &unavailableError{err}
	case !ok && w.ifMatch != 0:
		return confstore.Version{}, false, &staleError{w.ifMatch, from + 1}
	case !ok:
		return confstore.Version{}, true, nil // another node wrote first: edit its version
	}
	if err := apply(); err != nil {
		return confstore.Version{}, false, err
	}
	c.st, c.cur, c.cfg = nst, next, cfg
	c.fileCfg = nil // see Control.fileConfig
	if err := c.save(false, nil); err != nil {
		k.log("error", "config sync: "+err.Error())
	}
	c.audit(w, from, v)
	return v, false, nil
}

// poll syncs the config and the shared sets every Poll, and each at once
// when the subscriber is told of a version of it.
func (k *Cluster) poll() {
	defer k.done.Done()
	t := time.NewTicker(k.opt.Poll)
	defer t.Stop()
	var revKick, banKick chan struct{} // nil, never ready, for a set not shared
	if k.revocations != nil {
		revKick = k.revocations.kick
	}
	if k.bans != nil {
		banKick = k.bans.kick
	}
	for {
		select {
		case <-k.quit:
			return
		case <-t.C:
			k.sync()
			k.syncSets()
		case <-k.kick:
			k.sync()
		case <-revKick:
			_ = k.syncSet(k.revocations) // a failure keeps the set until the next tick
		case <-banKick:
			_ = k.syncSet(k.bans)
		}
	}
}

// subscribe listens for announced versions, re-subscribing after Redis
// comes back.
func (k *Cluster) subscribe() {
	defer k.done.Done()
	for {
		select {
		case <-k.quit:
			return
		default:
		}
		if cl, err := k.conn(); err == nil {
			channels := []string{k.channel}
			for _, s := range k.sets() {
				channels = append(channels, s.channel)
			}
			_ = cl.Receive(context.Background(), cl.B().Subscribe().Channel(channels...).Build(), func(m rueidis.PubSubMessage) {
				kick := k.kick
				for _, s := range k.sets() {
					if m.Channel == s.channel {
						kick = s.kick
					}
				}
				select {
				case kick <- struct{}{}:
				default: // a sync is due already
				}
			})
		}
		select {
		case <-k.quit:
			return
		case <-time.After(k.opt.Poll):
		}
	}
}
