// Cluster revocations: in cluster mode a revocation made through the API
// on any node is kept in Redis and announced, and every node takes the
// whole set from Redis when told, and at every poll when its copy is not
// the latest one.

package admin

import (
	"context"
	"encoding/hex"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// MaxRevocations bounds the cluster's revocations in Redis: a revocation
// past it is refused (409) until some lapse or are lifted. Lapsed ones
// (past their until, or their token's exp) are dropped at every write.
const MaxRevocations = 100_000

// RevocationSet is the node's revocations (auth.Revocations), which the
// cluster replaces with Redis's.
type RevocationSet interface {
	Replace(set map[[16]byte]int64)
	Snapshot() map[[16]byte]int64
}

// revokeScript drops lapsed revocations (scores are the instant, unix ms,
// a revocation ends; +inf for good), adds or updates ARGV[3] unless the
// set is full (-1), bumps the version and announces it.
var revokeScript = rueidis.NewLuaScript(`
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if not redis.call('ZSCORE', KEYS[1], ARGV[3]) and redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[4]) then return -1 end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[5], v)
return v`)

// unrevokeScript lifts ARGV[1]; the version moves only when it was there.
var unrevokeScript = rueidis.NewLuaScript(`
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[2], v)
return v`)

// readRevocationsScript returns the version, and the whole set (member,
// score, ...) when the version is not ARGV[1], the one the node holds.
var readRevocationsScript = rueidis.NewLuaScript(`
local v = redis.call('GET', KEYS[2]) or '0'
if v == ARGV[1] then return {v} end
return {v, redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')}`)

// seedRevocationsScript stores the set ARGV[2..] (score, member, ...) and
// announces it, unless Redis holds a version: a Redis restarted without
// its data gets the revocations back from the first node that sees it.
var seedRevocationsScript = rueidis.NewLuaScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
for i = 2, #ARGV, 2 do redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i+1]) end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[1], v)
return v`)

// errRevocationsFull is a revocation refused by MaxRevocations.
var errRevocationsFull = errors.New("the cluster holds " + strconv.Itoa(MaxRevocations) + " revocations, the most it keeps; lift some or wait for some to lapse")

// SharesRevocations reports whether revocations go through Redis.
func (k *Cluster) SharesRevocations() bool { return k != nil && k.opt.Revocations != nil }

// revoke stores key in Redis until the given time (zero: for good) and
// takes the set at once, so this node refuses the credential when the API
// answers. An until already past changes nothing.
func (k *Cluster) revoke(key [16]byte, until time.Time) error {
	now := k.c.opts.Now()
	score := "+inf"
	if !until.IsZero() {
		if !until.After(now) {
			return nil
		}
		score = strconv.FormatInt(until.UnixMilli(), 10)
	}
	return k.revocationWrite(func(ctx context.Context, cl rueidis.Client) (int64, error) {
		return revokeScript.Exec(ctx, cl, []string{k.revocations, k.revVersion},
			[]string{strconv.FormatInt(now.UnixMilli(), 10), score, hex.EncodeToString(key[:]),
				strconv.Itoa(MaxRevocations), k.revChannel}).AsInt64()
	})
}

// unrevoke lifts key in Redis, and takes the set at once.
func (k *Cluster) unrevoke(key [16]byte) error {
	return k.revocationWrite(func(ctx context.Context, cl rueidis.Client) (int64, error) {
		return unrevokeScript.Exec(ctx, cl, []string{k.revocations, k.revVersion},
			[]string{hex.EncodeToString(key[:]), k.revChannel}).AsInt64()
	})
}

// revocationWrite runs one write script, once more after a broken
// connection (as change does), then syncs.
func (k *Cluster) revocationWrite(write func(context.Context, rueidis.Client) (int64, error)) error {
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
				return errRevocationsFull
			}
			return k.syncRevocations()
		}
	}
	return &unavailableError{err}
}

// syncRevocations takes Redis's set when its version is not the one this
// node holds. Redis is the truth: a revocation lifted on another node is
// lifted here too. While Redis cannot be reached the node keeps its set.
func (k *Cluster) syncRevocations() error {
	if k.opt.Revocations == nil {
		return nil
	}
	k.revMu.Lock()
	defer k.revMu.Unlock()
	cl, err := k.conn()
	if err != nil {
		return &unavailableError{err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	vals, err := readRevocationsScript.Exec(ctx, cl, []string{k.revocations, k.revVersion}, []string{k.revHeld}).ToArray()
	if err != nil {
		return &unavailableError{err}
	}
	version, err := vals[0].ToString()
	if err != nil || len(vals) < 2 {
		return err
	}
	nowNs := k.c.opts.Now().UnixNano()
	if held := k.opt.Revocations.Snapshot(); version == "0" && len(held) > 0 {
		// Redis lost the set (it keeps a version from the first write on):
		// put this node's back rather than admit what it refuses.
		args := []string{k.revChannel}
		for key, until := range held {
			switch {
			case until == 0:
				args = append(args, "+inf", hex.EncodeToString(key[:]))
			case until > nowNs:
				args = append(args, strconv.FormatInt(until/int64(time.Millisecond), 10), hex.EncodeToString(key[:]))
			}
		}
		if err := seedRevocationsScript.Exec(ctx, cl, []string{k.revocations, k.revVersion}, args).Error(); err != nil {
			return &unavailableError{err}
		}
		k.log("info", "config sync: Redis held no revocations; seeded it with this node's "+strconv.Itoa(len(args)/2))
		k.revHeld = "" // read what Redis holds now, this node's or a faster node's
		vals, err = readRevocationsScript.Exec(ctx, cl, []string{k.revocations, k.revVersion}, []string{k.revHeld}).ToArray()
		if err != nil {
			return &unavailableError{err}
		}
		if version, err = vals[0].ToString(); err != nil || len(vals) < 2 {
			return err
		}
	}
	flat, err := vals[1].AsStrSlice()
	if err != nil {
		return err
	}
	set := make(map[[16]byte]int64, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		var key [16]byte
		if n, err := hex.Decode(key[:], []byte(flat[i])); err != nil || n != len(key) {
			continue // not one of ours
		}
		ms, err := strconv.ParseFloat(flat[i+1], 64)
		switch {
		case err != nil:
			continue
		case math.IsInf(ms, 1):
			set[key] = 0 // for good
		case int64(ms)*int64(time.Millisecond) > nowNs:
			set[key] = int64(ms) * int64(time.Millisecond)
		}
	}
	k.opt.Revocations.Replace(set)
	k.revHeld = version
	return nil
}
