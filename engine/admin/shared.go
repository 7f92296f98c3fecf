// Shared sets: in cluster mode the revocations and the bans made through
// the API on any node are kept in Redis and announced, and every node takes
// the whole set from Redis when told, and at every poll when its copy is
// not the latest one.

package admin

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// MaxRevocations bounds the cluster's revocations in Redis: a revocation
// past it is refused (409) until some lapse or are lifted. Lapsed ones
// (past their until, or their token's exp) are dropped at every write.
const MaxRevocations = 100_000

// MaxBans bounds the cluster's bans in Redis likewise (access.DefaultMaxBans,
// what one node holds).
const MaxBans = 100_000

// RevocationSet is the node's revocations (auth.Revocations), which the
// cluster replaces with Redis's.
type RevocationSet interface {
	Replace(set map[[16]byte]int64)
	Snapshot() map[[16]byte]int64
}

// BanSet is the node's bans (access.Bans), which the cluster replaces with
// Redis's: each prefix with the unix nanoseconds it lapses.
type BanSet interface {
	Replace(set map[netip.Prefix]int64)
	Snapshot() map[netip.Prefix]int64
}

// sharedSet is one set every node holds a copy of: in Redis a sorted set
// (member, score: the unix ms it lapses, +inf for good), a version counter
// bumped by every change, and a channel announcing the version.
type sharedSet struct {
	what                  string // "revocations", "bans", for messages
	key, version, channel string
	max                   int
	full                  error // a write refused by max
	kick                  chan struct{}
	local                 localSet

	mu   sync.Mutex // serialises syncs of this set
	held string     // the version of the set this node holds; "" for none; guarded by mu
}

// localSet is a node's copy of a shared set: each member with the unix
// nanoseconds it lapses, 0 for good.
type localSet interface {
	snapshot() map[string]int64
	replace(set map[string]int64)
}

func newSharedSet(prefix, what string, max int, local localSet) *sharedSet {
	return &sharedSet{what: what, key: prefix + what, version: prefix + what + ":version",
		channel: prefix + what + ":versions", max: max, local: local, kick: make(chan struct{}, 1),
		full: fmt.Errorf("the cluster holds %d %s, the most it keeps; lift some or wait for some to lapse", max, what)}
}

// errFull reports whether err is a shared set's refusal for being full.
func errFull(err error) bool {
	var f *fullError
	return errors.As(err, &f)
}

type fullError struct{ err error }

func (e *fullError) Error() string { return e.err.Error() }

// addScript drops lapsed members (ARGV[1] is now, unix ms), adds or updates
// ARGV[3] with score ARGV[2] unless the set is full (-1), bumps the version
// and announces it.
var addScript = rueidis.NewLuaScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[3]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return -1 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[5], v)
return v`)

// removeScript removes ARGV[1]; the version moves only when it was there
// (0 otherwise).
var removeScript = rueidis.NewLuaScript(`
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[2], v)
return v`)

// readSetScript returns the version, and the whole set (member, score,
// ...) when the version is not ARGV[1], the one the node holds.
var readSetScript = rueidis.NewLuaScript(`
local v = redis.call('GET', KEYS[2]) or '0'
if v == ARGV[1] then return {v} end
return {v, redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')}`)

// seedSetScript adds the set ARGV[2..] (score, member, ...) and announces
// it: a Redis restarted without its data gets the set back from every node
// that sees it (their union: what any node refused stays refused).
var seedSetScript = rueidis.NewLuaScript(`
for i = 2, #ARGV, 2 do redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i+1]) end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[1], v)
return v`)

// SharesRevocations reports whether revocations go through Redis.
func (k *Cluster) SharesRevocations() bool { return k != nil && k.revocations != nil }

// SharesBans reports whether bans go through Redis.
func (k *Cluster) SharesBans() bool { return k != nil && k.bans != nil }

// add stores member in s in Redis until the given time (zero: for good)
// and takes the set at once, so this node applies it when the API
// answers. An until already past changes nothing.
func (k *Cluster) add(s *sharedSet, member string, until time.Time) error {
	now := k.c.opts.Now()
	score := "+inf"
	if !until.IsZero() {
		if !until.After(now) {
			return nil
		}
		score = strconv.FormatInt(until.UnixMilli(), 10)
	}
	_, err := k.setWrite(s, func(ctx context.Context, cl rueidis.Client) (int64, error) {
		return addScript.Exec(ctx, cl, []string{s.key, s.version},
			[]string{strconv.FormatInt(now.UnixMilli(), 10), score, member, strconv.Itoa(s.max), s.channel}).AsInt64()
	})
	return err
}

// remove lifts member from s in Redis, and takes the set at once. It
// reports whether member was there.
func (k *Cluster) remove(s *sharedSet, member string) (bool, error) {
	n, err := k.setWrite(s, func(ctx context.Context, cl rueidis.Client) (int64, error) {
		return removeScript.Exec(ctx, cl, []string{s.key, s.version}, []string{member, s.channel}).AsInt64()
	})
	return n > 0, err
}

// setWrite runs one write script, once more after a broken connection
// (as change does), then syncs s. It returns the script's answer.
func (k *Cluster) setWrite(s *sharedSet, write func(context.Context, rueidis.Client) (int64, error)) (int64, error) {
	// Sync first: a Redis that came back empty gets this node's set back
	// before the write, which would otherwise become the whole set.
	// (Twice: the first call after Redis restarted finds the connection
	// broken, as change's first attempt does.)
	if err := k.syncSet(s); err != nil {
		if err = k.syncSet(s); err != nil {
			return 0, err
		}
	}
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var cl rueidis.Client
		if cl, err = k.conn(); err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		var n int64
		n, err = write(ctx, cl)
		cancel()
		if err == nil {
			if n == -1 {
				return n, &fullError{s.full}
			}
			return n, k.syncSet(s)
		}
	}
	return 0, &unavailableError{err}
}

// syncSets syncs every shared set; a failure keeps a set until the next
// call.
func (k *Cluster) syncSets() {
	for _, s := range k.sets() {
		_ = k.syncSet(s)
	}
}

// sets are the shared sets, revocations first.
func (k *Cluster) sets() []*sharedSet {
	var out []*sharedSet
	for _, s := range []*sharedSet{k.revocations, k.bans} {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

// syncSet takes Redis's copy of s when its version is not the one this
// node holds. Redis is the truth: a member lifted on another node is lifted
// here too. While Redis cannot be reached the node keeps its copy.
func (k *Cluster) syncSet(s *sharedSet) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cl, err := k.conn()
	if err != nil {
		return &unavailableError{err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	vals, err := readSetScript.Exec(ctx, cl, []string{s.key, s.version}, []string{s.held}).ToArray()
	if err != nil {
		return &unavailableError{err}
	}
	version, err := vals[0].ToString()
	if err != nil || len(vals) < 2 {
		return err
	}
	nowNs := k.c.opts.Now().UnixNano()
	if held := s.local.snapshot(); len(held) > 0 && lost(version, s.held) {
		// Redis lost the set: put this node's back rather than admit what
		// it refuses.
		args := []string{s.channel}
		for member, until := range held {
			switch {
			case until == 0:
				args = append(args, "+inf", member)
			case until > nowNs:
				args = append(args, strconv.FormatInt(until/int64(time.Millisecond), 10), member)
			}
		}
		if len(args) > 1 { // else nothing live to put back
			if err := seedSetScript.Exec(ctx, cl, []string{s.key, s.version}, args).Error(); err != nil {
				return &unavailableError{err}
			}
			k.log("info", "config sync: Redis had lost the "+s.what+"; seeded it with this node's "+strconv.Itoa(len(args)/2))
			s.held = "" // read what Redis holds now, this node's and any other's
			vals, err = readSetScript.Exec(ctx, cl, []string{s.key, s.version}, []string{s.held}).ToArray()
			if err != nil {
				return &unavailableError{err}
			}
			if version, err = vals[0].ToString(); err != nil || len(vals) < 2 {
				return err
			}
		}
	}
	flat, err := vals[1].AsStrSlice()
	if err != nil {
		return err
	}
	set := make(map[string]int64, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		ms, err := strconv.ParseFloat(flat[i+1], 64)
		switch {
		case err != nil:
			continue
		case math.IsInf(ms, 1):
			set[flat[i]] = 0 // for good
		case int64(ms)*int64(time.Millisecond) > nowNs:
			set[flat[i]] = int64(ms) * int64(time.Millisecond)
		}
	}
	s.local.replace(set)
	s.held = version
	return nil
}

// lost reports whether Redis lost a set's data: it holds no version (it
// keeps one from the first write on), or one older than the version this
// node took from it before (it restarted empty, and a node wrote since).
func lost(version, held string) bool {
	if version == "0" {
		return true
	}
	v, err1 := strconv.ParseUint(version, 10, 64)
	h, err2 := strconv.ParseUint(held, 10, 64)
	return err1 == nil && err2 == nil && v < h
}

// revocationCopy is a node's revocations as a shared set: each key in hex.
type revocationCopy struct{ RevocationSet }

func (r revocationCopy) snapshot() map[string]int64 {
	held := r.Snapshot()
	out := make(map[string]int64, len(held))
	for key, until := range held {
		out[hex.EncodeToString(key[:])] = until
	}
	return out
}

func (r revocationCopy) replace(set map[string]int64) {
	out := make(map[[16]byte]int64, len(set))
	for member, until := range set {
		var key [16]byte
		if n, err := hex.Decode(key[:], []byte(member)); err == nil && n == len(key) {
			out[key] = until
		} // else not one of ours
	}
	r.Replace(out)
}

// banCopy is a node's bans as a shared set: each prefix as written by
// netip.Prefix.String. A ban always lapses.
type banCopy struct{ BanSet }

func (b banCopy) snapshot() map[string]int64 {
	held := b.Snapshot()
	out := make(map[string]int64, len(held))
	for p, until := range held {
		out[p.String()] = until
	}
	return out
}

func (b banCopy) replace(set map[string]int64) {
	out := make(map[netip.Prefix]int64, len(set))
	for member, until := range set {
		if p, err := netip.ParsePrefix(member); err == nil && until > 0 {
			out[p] = until
		}
	}
	b.Replace(out)
}
