// The Lua scripts Redis runs: GCRA with an "at most N" grant, the hand-back
// of unused tokens, and the membership heartbeat.

package cluster

import "github.com/redis/rueidis"

// Every script reads the clock with TIME on the Redis server, so nodes
// whose clocks disagree still share one timeline, and works in integer
// microseconds: a Lua number is a double, exact to 2^53, and microseconds
// since 1970 stay below 2^51 until the year 2041 + 35 years. Numbers are
// written back with string.format('%d'), because Lua's own conversion
// keeps only 14 significant digits. Redis 5 or later is required: its
// scripts replicate their effects, so a write after TIME is allowed.

// acquireScript takes up to ARGV[3] tokens from the GCRA bucket at
// KEYS[1]. ARGV[1] is what a token costs, in µs of the bucket's timeline,
// and ARGV[2] the tolerance, in µs: the burst times the limit's own
// interval. A node that shares the bucket with every node it knows of
// passes the limit's interval as the cost; one that must leave room for
// nodes that stopped answering passes a higher one (see Limit.scaleArgs),
// so it gets a smaller rate and burst from the same bucket. The script
// grants as many tokens as are there, at most the number asked, and stores
// the new TAT with a PX expiry at the moment the bucket would be full
// again, so an idle limit leaves no key behind. It replies {granted,
// remaining, retry_us, reset_us}: retry_us is the wait until the tokens not
// granted would all fit, reset_us the wait until the bucket is full.
var acquireScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local tat = now
local stored = redis.call('GET', KEYS[1])
if stored then
  tat = math.max(tonumber(stored), now)
end
local avail = math.floor((now + tolerance - tat) / interval)
local granted = math.max(0, math.min(want, avail))
if granted > 0 then
  tat = tat + granted * interval
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', string.format('%d', math.ceil((tat - now) / 1000)))
end
local retry = 0
if granted < want then
  local burst = math.max(1, math.floor(tolerance / interval))
  retry = math.max(1, tat + math.min(want - granted, burst) * interval - tolerance - now)
end
return {granted, math.max(0, avail - granted), retry, tat - now}
`)

// giveBackScript hands ARGV[2] unused tokens back to the bucket at KEYS[1]
// (ARGV[1] µs per token): it moves the TAT back a token's interval for
// each, at most as many as the TAT is ahead of now, counting a token whose
// interval has partly passed as a whole one: the bucket did not earn it
// back yet, and rounding down would lose it (at 0.01 a second, a token
// taken and handed back a moment later). A TAT moved to now or before
// means a full bucket, whose key is deleted, so the bucket is never fuller
// than its burst. It replies with the tokens it took back.
var giveBackScript = rueidis.NewLuaScript(`
local stored = redis.call('GET', KEYS[1])
if not stored then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tat = tonumber(stored)
local back = math.min(tonumber(ARGV[2]), math.ceil(math.max(0, tat - now) / interval))
tat = tat - back * interval
if tat <= now then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', string.format('%d', math.ceil((tat - now) / 1000)))
end
return back
`)

// heartbeatScript scores node ARGV[1] with the server's time in
// milliseconds in the sorted set KEYS[1], trims members older than ARGV[3]
// ms, and replies {live, known, was_member}: live counts the members that
// beat within ARGV[2] ms (the nodes answering), known every member left
// (the nodes seen within ARGV[3] ms, which may still be spending a shadow
// quota), and was_member is 1 when this node's entry was there before the
// ZADD; 0 after an earlier heartbeat means Redis lost the set (a restart,
// a flush, a failover to a replica without it). The set expires once no
// node has beaten for ARGV[3] ms. No key is enumerated.
var heartbeatScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = tonumber(ARGV[2])
local keep = tonumber(ARGV[3])
local was = 0
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then
  was = 1
end
redis.call('ZADD', KEYS[1], string.format('%d', now), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('(%d', now - keep))
redis.call('PEXPIRE', KEYS[1], string.format('%d', keep))
return {redis.call('ZCOUNT', KEYS[1], string.format('%d', now - live), '+inf'), redis.call('ZCARD', KEYS[1]), was}
`)
